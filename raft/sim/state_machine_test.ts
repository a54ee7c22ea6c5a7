import assert from "node:assert/strict";
import { SimStateMachine } from "./state_machine.ts";

Deno.test("§7 snapshot: a restored state machine equals the one its snapshot was taken of", () => {
  const a = new SimStateMachine();
  for (let i = 1; i <= 20; i++) {
    a.apply({ index: i, term: 1, data: i % 5 === 0 ? "" : `p1.${i}` });
  }
  const b = new SimStateMachine();
  b.restore(a.take());
  assert.equal(b.fingerprint(), a.fingerprint());
  assert.equal(b.take(), a.take());
  assert.equal(SimStateMachine.fingerprintOf(a.take()), a.fingerprint());
  // Both go on alike.
  a.apply({ index: 21, term: 2, data: "p1.21" });
  b.apply({ index: 21, term: 2, data: "p1.21" });
  assert.equal(b.fingerprint(), a.fingerprint());
});

Deno.test("§7 snapshot: states that differ in one key, one entry's term or one entry have different fingerprints", () => {
  const build = (entries: [number, string][]) => {
    const machine = new SimStateMachine();
    entries.forEach(([term, data], i) =>
      machine.apply({ index: i + 1, term, data })
    );
    return machine;
  };
  const base = build([[1, "p1.1"], [1, "p1.2"], [1, "p1.3"]]);
  assert.notEqual(
    build([[1, "p1.1"], [2, "p1.2"], [1, "p1.3"]]).fingerprint(),
    base.fingerprint(),
  );
  assert.notEqual(
    build([[1, "p1.1"], [1, "p1.2"]]).fingerprint(),
    base.fingerprint(),
  );
  const state = JSON.parse(base.take());
  state.kv.pop();
  assert.notEqual(
    SimStateMachine.fingerprintOf(JSON.stringify(state)),
    base.fingerprint(),
  );
});

Deno.test("§7 snapshot: restoring data that is no snapshot of it throws a clear error", () => {
  assert.throws(
    () => new SimStateMachine().restore(`{"kv":3}`),
    /not a simulated state machine snapshot/,
  );
});
