import assert from "node:assert/strict";
import { formatFigures, longestGap, runFigures } from "./report.ts";
import type { History, Operation } from "./history.ts";

function bind(
  index: number,
  invokedAt: number,
  completedAt: number | null,
  outcome: Operation["outcome"],
): Operation {
  return {
    index,
    process: index,
    input: {
      f: "bind",
      name: "chaos/k0",
      id: "e0",
      url: `tcp://10.0.0.${index}:1`,
      leaseId: null,
    },
    invokedAt,
    completedAt,
    outcome,
    ...(outcome === "ok"
      ? { output: { f: "bind" as const, revision: index + 1 } }
      : {}),
  };
}

Deno.test("longestGap measures the longest stretch of a window with no acknowledgement, edges included", () => {
  assert.equal(longestGap([10, 20, 50, 55], 0, 60), 30);
  assert.equal(longestGap([10, 20], 0, 100), 80);
  assert.equal(longestGap([], 5, 25), 20);
  assert.equal(longestGap([1, 2, 3], 10, 20), 10);
});

Deno.test("runFigures: a fault's unavailability runs from its start to the first acknowledged write after its heal", () => {
  const history: History = {
    prefix: "chaos/",
    startRevision: 0,
    operations: [
      bind(0, 0, 10, "ok"),
      bind(1, 10, 100, "ok"),
      bind(2, 100, null, "unknown"),
      bind(3, 110, 1500, "ok"),
      bind(4, 1500, 1510, "fail"),
      bind(5, 1510, 1520, "ok"),
    ],
    watches: [],
    finalIndexes: [],
  };
  const figures = runFigures(history, [
    {
      kind: "kill-leader",
      target: ["n1"],
      detail: "n1 led",
      startedAt: 120,
      healedAt: 1000,
    },
  ]);
  assert.equal(figures.operations, 6);
  assert.deepEqual(figures.byOutcome, { ok: 4, unknown: 1, fail: 1 });
  assert.deepEqual(figures.byKind.bind, { ok: 4, unknown: 1, fail: 1 });
  assert.equal(figures.faults.length, 1);
  const fault = figures.faults[0];
  assert.equal(fault.count, 1);
  assert.equal(fault.totalMs, 880);
  // No write was acknowledged from 120 (the fault) to 1500 (after the heal).
  assert.equal(fault.maxUnavailableMs, 1380);
  assert.equal(fault.maxRecoveryMs, 500);
  const text = formatFigures(figures);
  assert.match(
    text,
    /\| kill-leader \| 1 \| 0\.9 s \| 1\.38 s \/ 1\.38 s \| 500 ms \|/,
  );
  assert.match(text, /\| bind \| 4 \| 1 \| 1 \|/);
});
