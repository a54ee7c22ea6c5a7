import assert from "node:assert/strict";
import { leastInFlight } from "./least_in_flight.ts";
import { callInfo, candidate, candidates, picks, tally } from "./_test_util.ts";

const busy = (id: string, inFlight: number) =>
  candidate(id, { stats: { inFlight } });

Deno.test("leastInFlight picks the endpoint with the fewest calls under way", () => {
  const list = [busy("a", 3), busy("b", 0), busy("c", 2)];
  assert.deepEqual(picks(leastInFlight(), list, 4), ["b", "b", "b", "b"]);
});

Deno.test("leastInFlight takes the tied endpoints in turn", () => {
  const list = [busy("a", 1), busy("b", 0), busy("c", 0), busy("d", 0)];
  assert.deepEqual(picks(leastInFlight({ start: 0 }), list, 6), [
    "b",
    "c",
    "d",
    "b",
    "c",
    "d",
  ]);
});

Deno.test("leastInFlight spreads an idle cluster evenly, not always on the first", () => {
  const counts = tally(picks(leastInFlight(), candidates("a", "b", "c"), 300));
  assert.deepEqual([...counts.values()], [100, 100, 100]);
});

Deno.test("leastInFlight follows the counts as they change", () => {
  const distributor = leastInFlight({ start: 0 });
  const call = callInfo();
  assert.equal(distributor.choose([busy("a", 0), busy("b", 1)], call)?.id, "a");
  assert.equal(distributor.choose([busy("a", 1), busy("b", 1)], call)?.id, "b");
  assert.equal(distributor.choose([busy("a", 2), busy("b", 1)], call)?.id, "b");
  assert.equal(distributor.choose([busy("a", 2), busy("b", 3)], call)?.id, "a");
});

Deno.test("leastInFlight returns undefined for an empty list and has no hooks", () => {
  const distributor = leastInFlight();
  assert.equal(distributor.choose([], callInfo()), undefined);
  assert.equal(distributor.onError, undefined);
  assert.equal(distributor.onReturn, undefined);
});
