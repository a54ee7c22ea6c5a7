import assert from "node:assert/strict";
import type { Candidate } from "./distributor.ts";
import { weightedRoundRobin } from "./weighted_round_robin.ts";
import { callInfo, candidate, candidates, picks, tally } from "./_test_util.ts";

const weighted = (id: string, weight: number, local = false) =>
  candidate(id, { weight, local });

Deno.test("weightedRoundRobin interleaves weights 5, 1, 1 as nginx: a a b a c a a", () => {
  const list = [weighted("a", 5), weighted("b", 1), weighted("c", 1)];
  assert.deepEqual(
    picks(weightedRoundRobin(), list, 14).join(" "),
    "a a b a c a a a a b a c a a",
  );
});

Deno.test("weightedRoundRobin splits 4,000 calls 1:3 exactly (1,000 and 3,000)", () => {
  const list = [weighted("a", 1), weighted("b", 3)];
  const sequence = picks(weightedRoundRobin(), list, 4_000);
  assert.deepEqual(sequence.slice(0, 8).join(" "), "b a b b b a b b");
  const counts = tally(sequence);
  assert.equal(counts.get("a"), 1_000);
  assert.equal(counts.get("b"), 3_000);
  // The bound, 5% of 1:3, holds a fortiori.
  assert.ok(Math.abs(counts.get("b")! / counts.get("a")! - 3) <= 0.15);
});

Deno.test("weightedRoundRobin gives every run of W picks exactly the weights", () => {
  const list = [weighted("a", 2), weighted("b", 3), weighted("c", 5)];
  const sequence = picks(weightedRoundRobin(), list, 1_000);
  for (let start = 0; start < sequence.length; start += 10) {
    const counts = tally(sequence.slice(start, start + 10));
    assert.deepEqual(
      [counts.get("a"), counts.get("b"), counts.get("c")],
      [2, 3, 5],
    );
  }
});

Deno.test("weightedRoundRobin with equal weights is round-robin from the first", () => {
  assert.deepEqual(
    picks(weightedRoundRobin(), candidates("a", "b", "c"), 6).join(" "),
    "a b c a b c",
  );
});

Deno.test("weightedRoundRobin counts a weight that is not a positive number as 1", () => {
  const list = [weighted("a", 0), weighted("b", -3), weighted("c", NaN)];
  assert.deepEqual(
    picks(weightedRoundRobin(), list, 6).join(" "),
    "a b c a b c",
  );
});

Deno.test("weightedRoundRobin carries on when an endpoint joins, leaves or changes weight", () => {
  const distributor = weightedRoundRobin();
  const share = (list: Candidate[], count: number) => {
    const counts = tally(picks(distributor, list, count));
    return list.map((e) => counts.get(e.id) ?? 0);
  };
  assert.deepEqual(share([weighted("a", 1), weighted("b", 1)], 3), [2, 1]);
  // c joins with weight 2: from the next picks on, 1:1:2 over each 4.
  assert.deepEqual(
    share([weighted("a", 1), weighted("b", 1), weighted("c", 2)], 4_000),
    [1_000, 1_000, 2_000],
  );
  // a leaves.
  assert.deepEqual(share([weighted("b", 1), weighted("c", 2)], 3_000), [
    1_000,
    2_000,
  ]);
  // b's weight goes from 1 to 3.
  assert.deepEqual(share([weighted("b", 3), weighted("c", 2)], 5_000), [
    3_000,
    2_000,
  ]);
  // a comes back: it starts afresh, so it does not get a burst.
  const sequence = picks(
    distributor,
    [weighted("a", 1), weighted("b", 3), weighted("c", 2)],
    12,
  );
  assert.ok(!sequence.slice(0, 6).every((id) => id === "a"));
  assert.equal(tally(sequence.slice(6)).get("a"), 1);
});

Deno.test("weightedRoundRobin preferLocal sends every call to local endpoints while there is one, and fails over when not", () => {
  const distributor = weightedRoundRobin({ preferLocal: true });
  const near1 = weighted("near-1", 1, true);
  const near2 = weighted("near-2", 3, true);
  const far = weighted("far", 100);
  const farther = weighted("farther", 100);
  // Only local ones, weighted among themselves 1:3.
  const local = tally(picks(distributor, [far, near1, farther, near2], 4_000));
  assert.deepEqual(Object.fromEntries(local), {
    "near-1": 1_000,
    "near-2": 3_000,
  });
  // One local left: it takes everything.
  const one = tally(picks(distributor, [far, farther, near2], 1_000));
  assert.deepEqual(Object.fromEntries(one), { "near-2": 1_000 });
  // No local one: fail-over to all the others, weighted.
  const failover = tally(picks(distributor, [far, farther], 1_000));
  assert.deepEqual(Object.fromEntries(failover), { far: 500, farther: 500 });
  // A local one is back: every call goes there again.
  const back = tally(picks(distributor, [far, near1, farther], 1_000));
  assert.deepEqual(Object.fromEntries(back), { "near-1": 1_000 });
});

Deno.test("weightedRoundRobin without preferLocal ignores locality", () => {
  const list = [weighted("near", 1, true), weighted("far", 3)];
  const counts = tally(picks(weightedRoundRobin(), list, 400));
  assert.deepEqual([counts.get("near"), counts.get("far")], [100, 300]);
});

Deno.test("weightedRoundRobin returns undefined for an empty list and has no hooks", () => {
  const distributor = weightedRoundRobin({ preferLocal: true });
  assert.equal(distributor.choose([], callInfo()), undefined);
  assert.deepEqual(picks(distributor, candidates("a"), 2), ["a", "a"]);
  assert.equal(distributor.onError, undefined);
  assert.equal(distributor.onReturn, undefined);
});
