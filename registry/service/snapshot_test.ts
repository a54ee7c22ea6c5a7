import assert from "node:assert/strict";
import { HeldSnapshots } from "./snapshot.ts";

Deno.test("HeldSnapshots holds at most max snapshots, dropping the oldest first", () => {
  const held = new HeldSnapshots(2, 60_000);
  const a = held.hold(new Uint8Array([1]));
  const b = held.hold(new Uint8Array([2]));
  const c = held.hold(new Uint8Array([3]));
  assert.match(a, /^[0-9a-f]{32}$/);
  assert.notEqual(a, b);
  assert.equal(held.get(a), undefined);
  assert.deepEqual(held.get(b), new Uint8Array([2]));
  assert.deepEqual(held.get(c), new Uint8Array([3]));
});

Deno.test("HeldSnapshots drops a snapshot idle longer than idleMs, and a use keeps it", () => {
  let now = 0;
  const held = new HeldSnapshots(4, 40, () => now);
  const kept = held.hold(new Uint8Array([1]));
  const idle = held.hold(new Uint8Array([2]));
  for (let i = 0; i < 4; i++) {
    now += 15;
    assert.ok(held.get(kept) !== undefined);
  }
  assert.equal(held.get(idle), undefined);
  assert.deepEqual(held.get(kept), new Uint8Array([1]));
  now += 41;
  assert.equal(held.get(kept), undefined);
});
