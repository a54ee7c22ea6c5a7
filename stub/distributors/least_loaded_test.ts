import assert from "node:assert/strict";
import { leastLoaded } from "./least_loaded.ts";
import { callInfo, candidate, picks } from "./_test_util.ts";

const loaded = (
  id: string,
  load: number | null,
  inFlight = 0,
  more: { inFlightAtLoad?: number; ewmaLatencyMs?: number } = {},
) =>
  candidate(id, {
    load,
    inFlightAtLoad: more.inFlightAtLoad ?? 0,
    stats: { inFlight, ewmaLatencyMs: more.ewmaLatencyMs ?? 0 },
  });

Deno.test("leastLoaded picks the lowest reported load", () => {
  const list = [loaded("a", 0.5), loaded("b", 0.1), loaded("c", 0.3)];
  assert.deepEqual(picks(leastLoaded(), list, 3), ["b", "b", "b"]);
  // Any scale, negative too.
  const scaled = [loaded("a", 120), loaded("b", -4), loaded("c", 7)];
  assert.equal(leastLoaded().choose(scaled, callInfo())?.id, "b");
});

Deno.test("leastLoaded adds this client's calls under way to equal loads, then takes ties in turn", () => {
  const list = [loaded("a", 2, 2), loaded("b", 2, 1), loaded("c", 9, 0)];
  assert.deepEqual(picks(leastLoaded(), list, 2), ["b", "b"]);
  const tied = [loaded("a", 2, 1), loaded("b", 2, 1), loaded("c", 9)];
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

Deno.test("leastLoaded counts only the calls this client started since the report", () => {
  // a reported 3 with 3 of this client's calls under way (all counted in
  // the report); b reported 1, and this client sent it 4 calls since.
  const list = [
    loaded("a", 3, 3, { inFlightAtLoad: 3 }),
    loaded("b", 1, 4, { inFlightAtLoad: 0 }),
  ];
  assert.equal(leastLoaded().choose(list, callInfo())?.id, "a");
  // Two of a's calls of the report ended since: about 1 left there.
  const ended = [
    loaded("a", 3, 1, { inFlightAtLoad: 3 }),
    loaded("b", 2, 0, { inFlightAtLoad: 0 }),
  ];
  assert.equal(leastLoaded().choose(ended, callInfo())?.id, "a");
});

Deno.test("leastLoaded weighs the load by the latency this client sees, unless latency is false", () => {
  // Same load; the slow one answers in 20 ms, the fast one in 2 ms: the
  // fast one waits less even with more under way ((4 + 1) × 2 < (1 + 1) × 20).
  const list = [
    loaded("slow", 1, 0, { ewmaLatencyMs: 20 }),
    loaded("fast", 4, 0, { ewmaLatencyMs: 2 }),
  ];
  assert.equal(leastLoaded().choose(list, callInfo())?.id, "fast");
  assert.equal(
    leastLoaded({ latency: false }).choose(list, callInfo())?.id,
    "slow",
  );
  // Not measured yet: tried at once.
  const fresh = [...list, loaded("new", 4, 0)];
  assert.equal(leastLoaded().choose(fresh, callInfo())?.id, "new");
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
