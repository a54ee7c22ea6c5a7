import assert from "node:assert/strict";
import { checkLinearizable, type Model, type WglOperation } from "./wgl.ts";

type In = { f: "w"; v: number } | { f: "r" };
/** A register holding a number: write v, or read it. */
const register: Model<number, In, number> = {
  init: () => 0,
  step: (s, op) =>
    op.input.f === "w"
      ? [op.input.v]
      : op.output === undefined || op.output === s
      ? [s]
      : [],
  key: String,
  readOnly: (op) => op.input.f === "r",
};
const w = (
  v: number,
  call: number,
  ret: number | null,
): WglOperation<In, number> => ({ input: { f: "w", v }, call, return: ret });
const r = (v: number, call: number, ret: number): WglOperation<In, number> => ({
  input: { f: "r" },
  output: v,
  call,
  return: ret,
});

Deno.test("wgl: concurrent writes may be ordered either way", () => {
  assert.equal(
    checkLinearizable(register, [w(1, 0, 10), w(2, 0, 10), r(1, 11, 12)]).ok,
    true,
  );
  assert.equal(
    checkLinearizable(register, [w(1, 0, 10), w(2, 0, 10), r(2, 11, 12)]).ok,
    true,
  );
  // Both reads after both writes must agree.
  assert.equal(
    checkLinearizable(register, [
      w(1, 0, 10),
      w(2, 0, 10),
      r(2, 11, 12),
      r(1, 13, 14),
    ]).ok,
    false,
  );
});

Deno.test("wgl: a stale read is rejected and the failure is located", () => {
  const result = checkLinearizable(register, [
    w(1, 0, 1),
    r(1, 2, 3),
    r(0, 4, 5),
  ]);
  assert.equal(result.ok, false);
  if (result.ok !== false) return;
  assert.equal(result.stuckAt, 2);
  assert.deepEqual(result.linearized, [0, 1]);
});

Deno.test("wgl: an unknown write may take effect late, or never", () => {
  // Seen long after its call.
  assert.equal(
    checkLinearizable(register, [w(5, 0, null), r(0, 1, 2), r(5, 100, 101)]).ok,
    true,
  );
  // Never seen.
  assert.equal(
    checkLinearizable(register, [w(5, 0, null), r(0, 1, 2), r(0, 100, 101)]).ok,
    true,
  );
  // But not before its call.
  assert.equal(
    checkLinearizable(register, [r(5, 0, 1), w(5, 2, null)]).ok,
    false,
  );
  // Nor twice.
  assert.equal(
    checkLinearizable(register, [
      w(5, 0, null),
      r(5, 1, 2),
      w(6, 3, 4),
      r(5, 5, 6),
    ]).ok,
    false,
  );
});

Deno.test("wgl: a nondeterministic model explores every state", () => {
  // A coin: "flip" lands 0 or 1; a read tells which.
  type C = { f: "flip" } | { f: "r" };
  const coin: Model<number, C, number> = {
    init: () => 0,
    step: (s, op) =>
      op.input.f === "flip" ? [0, 1] : op.output === s ? [s] : [],
    key: String,
  };
  const flip = { input: { f: "flip" } as C, call: 0, return: 1 };
  const read = (v: number, call: number) => ({
    input: { f: "r" } as C,
    output: v,
    call,
    return: call + 1,
  });
  assert.equal(
    checkLinearizable(coin, [flip, read(1, 2), read(1, 4)]).ok,
    true,
  );
  assert.equal(
    checkLinearizable(coin, [flip, read(1, 2), read(0, 4)]).ok,
    false,
  );
});

Deno.test("wgl: a pathological history ends 'unknown' within the budget", () => {
  // Many concurrent writes and reads that never match: every order is tried.
  const ops: WglOperation<In, number>[] = [];
  for (let i = 0; i < 40; i++) ops.push(w(i, 0, 1000));
  ops.push(r(999, 0, 1000));
  const started = performance.now();
  const result = checkLinearizable(register, ops, { maxConfigurations: 5_000 });
  assert.equal(result.ok, "unknown");
  assert.ok(performance.now() - started < 5_000);
  const timed = checkLinearizable(register, ops, { maxMs: 50 });
  assert.equal(timed.ok, "unknown");
});

Deno.test("wgl: a long sequential history is checked quickly", () => {
  const ops: WglOperation<In, number>[] = [];
  for (let i = 0; i < 20_000; i += 2) {
    ops.push(w(i, i, i + 1.5), r(i, i + 1, i + 2.5));
  }
  const started = performance.now();
  assert.equal(checkLinearizable(register, ops).ok, true);
  assert.ok(performance.now() - started < 5_000);
});
