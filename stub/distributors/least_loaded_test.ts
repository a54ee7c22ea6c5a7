import assert from "node:assert/strict";
import { leastLoaded } from "./least_loaded.ts";
import { callInfo, candidate, picks } from "./_test_util.ts";

const loaded = (id: string, load: number | null, inFlight = 0) =>
  candidate(id, { load, stats: { inFlight } });

Deno.test("leastLoaded picks the lowest reported load", () => {
  const list = [loaded("a", 0.5), loaded("b", 0.1), loaded("c", 0.3)];
  assert.deepEqual(picks(leastLoaded(), list, 3), ["b", "b", "b"]);
  // Any scale, negative too.
  const scaled = [loaded("a", 120), loaded("b", -4), loaded("c", 7)];
  assert.equal(leastLoaded().choose(scaled, callInfo())?.id, "b");
});

Deno.test("leastLoaded breaks equal loads by calls under way, then in turn", () => {
  const list = [loaded("a", 0.2, 2), loaded("b", 0.2, 1), loaded("c", 0.9, 0)];
  assert.deepEqual(picks(leastLoaded(), list, 2), ["b", "b"]);
  const tied = [loaded("a", 0.2, 1), loaded("b", 0.2, 1), loaded("c", 0.9)];
  assert.deepEqual(picks(leastLoaded({ start: 0 }), tied, 4), [
    "a",
    "b",
    "a",
    "b",
  ]);
});

Deno.test("leastLoaded falls back to calls under way when no server reports a load", () => {
  const list = [
    loaded("a", null, 2),
    loaded("b", null, 0),
    loaded("c", null, 1),
  ];
  assert.deepEqual(picks(leastLoaded(), list, 2), ["b", "b"]);
  const idle = [loaded("a", null), loaded("b", null), loaded("c", null)];
  assert.deepEqual(picks(leastLoaded({ start: 0 }), idle, 4), [
    "a",
    "b",
    "c",
    "a",
  ]);
});

Deno.test("leastLoaded ranks endpoints that report a load before those that do not", () => {
  // b reports a high load with many calls under way, a reports nothing and
  // is idle: b still goes first (a may be a server just started).
  const list = [loaded("a", null, 0), loaded("b", 50, 9)];
  assert.equal(leastLoaded().choose(list, callInfo())?.id, "b");
  // A load that is not a finite number counts as none.
  const odd = [loaded("a", NaN), loaded("b", Infinity), loaded("c", null, 1)];
  assert.deepEqual(picks(leastLoaded({ start: 0 }), odd, 3), ["a", "b", "a"]);
});

Deno.test("leastLoaded returns undefined for an empty list and has no hooks", () => {
  const distributor = leastLoaded();
  assert.equal(distributor.choose([], callInfo()), undefined);
  assert.equal(distributor.onError, undefined);
  assert.equal(distributor.onReturn, undefined);
});
