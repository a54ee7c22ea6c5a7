/**
 * The model against the registry itself: histories made by applying
 * random commands to a real `RegistryState` (with lease expiries the
 * history does not record, as the leader's keeper proposes them), with
 * answers mapped to `OpOutput` as `registry_model.ts` documents, are
 * linearizable under the model; and a lookup's answer changed is not.
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { ID_IN_USE, LEASE_NOT_FOUND } from "../../../protocol/registry.ts";
import { encodeCommand, RegistryState } from "../../../registry/state.ts";
import type { Operation, OpInput, OpOutput } from "../history.ts";
import {
  leaseRetirement,
  registryModel,
  registryOps,
} from "./registry_model.ts";
import { checkLinearizable } from "./wgl.ts";

const NAME = "chaos/k1";

/** The search as `mod.ts` runs it: with leases no later operation names dropped. */
function check(operations: Operation[]) {
  const ops = registryOps(operations);
  return checkLinearizable(
    registryModel({ retiredAfter: leaseRetirement(ops) }),
    ops,
  );
}

/** One step: an operation of the history, or an expiry it does not see. */
const step = fc.oneof(
  fc.record({
    f: fc.constant("bind" as const),
    id: fc.integer({ min: 0, max: 2 }),
    lease: fc.integer({ min: -1, max: 2 }),
    // 0: a url of its own; 1, 2: one shared (a server restarted there).
    url: fc.integer({ min: 0, max: 2 }),
  }),
  fc.record({
    f: fc.constant("unbind" as const),
    id: fc.integer({ min: 0, max: 2 }),
  }),
  fc.record({ f: fc.constant("lookup" as const) }),
  fc.record({
    f: fc.constant("leaseGrant" as const),
    lease: fc.integer({ min: 0, max: 2 }),
  }),
  fc.record({
    f: fc.constant("leaseKeepAlive" as const),
    lease: fc.integer({ min: 0, max: 2 }),
  }),
  fc.record({
    f: fc.constant("leaseRevoke" as const),
    lease: fc.integer({ min: 0, max: 2 }),
  }),
  fc.record({
    f: fc.constant("expire" as const),
    lease: fc.integer({ min: 0, max: 2 }),
  }),
);
type Step = typeof step extends fc.Arbitrary<infer T> ? T : never;

/** Runs `steps` on a real state; returns the history of the operations (expiries unrecorded). */
function run(
  steps: Step[],
  overlap: number[],
  fates: number[] = [2],
): Operation[] {
  const state = new RegistryState();
  const operations: Operation[] = [];
  const apply = (command: Parameters<typeof encodeCommand>[0]) =>
    state.apply(encodeCommand(command)).result;
  steps.forEach((s, k) => {
    // 0: unknown, applied; 1: unknown, not applied; else ok.
    const fate = fates[k % fates.length];
    const before = fate === 1 ? state.snapshot() : null;
    let input: OpInput;
    let output: OpOutput;
    const lease = "lease" in s && s.lease >= 0 ? `${NAME}-l${s.lease}` : null;
    switch (s.f) {
      case "expire":
        apply({ op: "leaseExpire", ids: [lease!] });
        return;
      case "bind": {
        input = {
          f: "bind",
          name: NAME,
          id: `e${s.id}`,
          url: s.url === 0 ? `tcp://u${k}` : `tcp://shared${s.url}`,
          leaseId: lease,
        };
        const result = apply({
          op: "bind",
          name: NAME,
          endpoint: { id: input.id, url: input.url },
          ...(lease === null ? {} : { leaseId: lease }),
          exclusiveId: true,
        });
        if (result.ok) output = { f: "bind", revision: result.value.revision };
        else if (result.error.code === ID_IN_USE) {
          output = { f: "bind", idInUse: true };
        } else {
          assert.equal(result.error.code, LEASE_NOT_FOUND);
          output = { f: "bind", leaseNotFound: true };
        }
        break;
      }
      case "unbind": {
        input = { f: "unbind", name: NAME, id: `e${s.id}` };
        const result = apply({ op: "unbind", name: NAME, id: input.id });
        assert.ok(result.ok);
        output = {
          f: "unbind",
          revision: result.value.revision,
          removed: result.value.removed!,
        };
        break;
      }
      case "lookup":
        input = { f: "lookup", name: NAME, consistency: "linearizable" };
        output = {
          f: "lookup",
          revision: state.revision,
          endpoints: state.bindings(NAME).map(({ id, url, leaseId }) => ({
            id,
            url,
            leaseId,
          })),
        };
        break;
      case "leaseGrant": {
        input = { f: "leaseGrant", name: NAME, leaseId: lease!, ttlMs: 1000 };
        const result = apply({ op: "leaseGrant", id: lease!, ttlMs: 1000 });
        if (result.ok) {
          output = {
            f: "leaseGrant",
            revision: result.value.revision,
            ttlMs: 1000,
          };
        } else {
          assert.equal(result.error.code, -32602);
          assert.match(result.error.message, /exists already/);
          output = { f: "leaseGrant", exists: true };
        }
        break;
      }
      case "leaseKeepAlive": {
        input = { f: "leaseKeepAlive", name: NAME, leaseId: lease! };
        output = state.lease(lease!) === undefined
          ? { f: "leaseKeepAlive", leaseNotFound: true }
          : { f: "leaseKeepAlive", ttlMs: 1000 };
        break;
      }
      case "leaseRevoke": {
        input = { f: "leaseRevoke", name: NAME, leaseId: lease! };
        const result = apply({ op: "leaseRevoke", id: lease! });
        if (result.ok) {
          output = { f: "leaseRevoke", revision: result.value.revision };
        } else {
          assert.equal(result.error.code, LEASE_NOT_FOUND);
          output = { f: "leaseRevoke", leaseNotFound: true };
        }
        break;
      }
    }
    // Takes effect at time 10k, within an interval around it.
    const spread = overlap[k % overlap.length];
    if (before !== null) state.load(before);
    operations.push({
      index: operations.length,
      process: operations.length,
      input,
      invokedAt: 10 * k - spread,
      ...(fate < 2
        ? { completedAt: null, outcome: "unknown" as const }
        : { completedAt: 10 * k + spread, outcome: "ok" as const, output }),
    });
  });
  return operations;
}

const histories = fc.tuple(
  fc.array(step, { minLength: 1, maxLength: 60 }),
  fc.array(fc.integer({ min: 1, max: 25 }), { minLength: 1, maxLength: 8 }),
);

Deno.test("registry model: histories of the real RegistryState are linearizable", () => {
  fc.assert(
    fc.property(histories, ([steps, overlap]) => {
      const operations = run(steps, overlap);
      assert.equal(
        check(operations).ok,
        true,
      );
    }),
    { numRuns: 300 },
  );
});

Deno.test("registry model: with unknown outcomes, applied or not, they stay linearizable", () => {
  fc.assert(
    fc.property(
      histories,
      fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 1, maxLength: 9 }),
      ([steps, overlap], fates) => {
        assert.equal(check(run(steps, overlap, fates)).ok, true);
      },
    ),
    { numRuns: 200 },
  );
});

Deno.test("registry model: a lookup of the real RegistryState answered otherwise is rejected", () => {
  fc.assert(
    fc.property(histories, fc.nat(), ([steps, overlap], which) => {
      const operations = run(steps, overlap.map(() => 1));
      const lookups = operations.filter((op) => op.input.f === "lookup");
      fc.pre(lookups.length > 0);
      const target = lookups[which % lookups.length];
      if (target.output?.f !== "lookup") return;
      target.output.endpoints.push({
        id: "zz",
        url: "tcp://nobody",
        leaseId: null,
      });
      assert.equal(
        check(operations).ok,
        false,
      );
    }),
    { numRuns: 200 },
  );
});

Deno.test("registry model: the real RegistryState's ID_IN_USE and takeover answers check out, and its refusal is needed", () => {
  const steps: Step[] = [
    { f: "leaseGrant", lease: 0 },
    { f: "leaseGrant", lease: 1 },
    { f: "bind", id: 0, lease: 0, url: 0 },
    { f: "bind", id: 0, lease: 1, url: 0 },
    { f: "bind", id: 0, lease: -1, url: 0 },
    { f: "lookup" },
    { f: "bind", id: 1, lease: 0, url: 1 },
    { f: "bind", id: 1, lease: 1, url: 1 },
    { f: "lookup" },
    { f: "leaseKeepAlive", lease: 0 },
  ];
  const operations = run(steps, [1]);
  const outputs = operations.map((op) => op.output);
  assert.deepEqual(outputs[3], { f: "bind", idInUse: true });
  assert.deepEqual(outputs[4], { f: "bind", idInUse: true });
  assert.deepEqual(outputs[7], { f: "bind", revision: 3 });
  assert.equal(check(operations).ok, true);
  // Taken as applied, the refused bind contradicts the lookup after it.
  operations[3].output = { f: "bind", revision: 2 };
  assert.equal(check(operations).ok, false);
});
