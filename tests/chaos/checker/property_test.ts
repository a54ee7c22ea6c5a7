import assert from "node:assert/strict";
import fc from "fast-check";
import type { History, Operation } from "../history.ts";
import { checkHistory, formatReport } from "./mod.ts";
import { simulate } from "./_simulate.ts";

const small = (seed: number, leases: boolean) =>
  simulate({
    seed,
    operations: 150,
    names: 2,
    clients: 4,
    ids: 3,
    leases,
    ttlMs: 15,
  });

Deno.test("checker: histories of a sequential in-memory registry are accepted", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 2 ** 31 }),
      fc.boolean(),
      (seed, leases) => {
        const report = checkHistory(small(seed, leases));
        assert.equal(report.valid, true, formatReport(report));
      },
    ),
    { numRuns: 40 },
  );
});

Deno.test("checker: the same histories with one lookup's answer changed are rejected", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 2 ** 31 }),
      fc.boolean(),
      fc.nat(),
      fc.constantFrom("drop", "add", "url", "lease"),
      (seed, leases, which, how) => {
        const history = small(seed, leases);
        const lookups = history.operations.filter((op) =>
          op.outcome === "ok" && op.output?.f === "lookup" &&
          (how === "add" || op.output.endpoints.length > 0)
        );
        fc.pre(lookups.length > 0);
        const mutated = mutate(history, lookups[which % lookups.length], how);
        const report = checkHistory(mutated, { shrinkMs: 20 });
        assert.equal(report.valid, false, formatReport(report));
      },
    ),
    { numRuns: 40 },
  );
});

function mutate(history: History, target: Operation, how: string): History {
  const operations = history.operations.map((op) => {
    if (op !== target || op.output?.f !== "lookup") return op;
    const endpoints = op.output.endpoints.map((e) => ({ ...e }));
    if (how === "drop") endpoints.pop();
    else if (how === "add") {
      endpoints.push({ id: "zz", url: "tcp://nobody", leaseId: null });
    } else if (how === "url") endpoints[0].url = `${endpoints[0].url}-changed`;
    else {endpoints[0].leaseId = endpoints[0].leaseId === null
        ? "chaos/k0-l99"
        : null;}
    return { ...op, output: { ...op.output, endpoints } };
  });
  return { ...history, operations };
}

Deno.test("checker: a generated history of 3000 operations is checked in seconds", () => {
  const history = simulate({
    seed: 11,
    operations: 3000,
    names: 1,
    clients: 8,
    ids: 4,
    unknownRate: 0.01,
  });
  const started = performance.now();
  const report = checkHistory(history);
  assert.equal(report.valid, true, formatReport(report));
  assert.ok(
    performance.now() - started < 8_000,
    `took ${performance.now() - started} ms`,
  );
});
