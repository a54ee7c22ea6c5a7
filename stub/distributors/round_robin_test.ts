import assert from "node:assert/strict";
import { roundRobin } from "./round_robin.ts";
import { callInfo, candidates as endpoints, picks } from "./_test_util.ts";

const call = callInfo();

Deno.test("roundRobin cycles through the endpoints in order", () => {
  const distributor = roundRobin({ start: 0 });
  assert.deepEqual(picks(distributor, endpoints("a", "b", "c"), 7), [
    "a",
    "b",
    "c",
    "a",
    "b",
    "c",
    "a",
  ]);
});

Deno.test("roundRobin start picks the first position, modulo the size", () => {
  assert.deepEqual(
    picks(roundRobin({ start: 1 }), endpoints("a", "b", "c"), 4),
    [
      "b",
      "c",
      "a",
      "b",
    ],
  );
  assert.deepEqual(
    picks(roundRobin({ start: 5 }), endpoints("a", "b", "c"), 3),
    [
      "c",
      "a",
      "b",
    ],
  );
});

Deno.test("roundRobin without start begins anywhere but still cycles", () => {
  const list = endpoints("a", "b", "c");
  const distributor = roundRobin();
  const first = picks(distributor, list, 6);
  const offset = ["a", "b", "c"].indexOf(first[0]);
  assert.notEqual(offset, -1);
  assert.deepEqual(
    first,
    Array.from({ length: 6 }, (_, i) => ["a", "b", "c"][(offset + i) % 3]),
  );
});

Deno.test("roundRobin with one endpoint always picks it", () => {
  assert.deepEqual(picks(roundRobin({ start: 3 }), endpoints("a"), 3), [
    "a",
    "a",
    "a",
  ]);
});

Deno.test("roundRobin continues from the same position when the map shrinks", () => {
  const distributor = roundRobin({ start: 0 });
  const three = endpoints("a", "b", "c");
  assert.deepEqual(picks(distributor, three, 2), ["a", "b"]);
  // Position 2 of [a, c] is 2 % 2 = 0.
  const two = [three[0], three[2]];
  assert.deepEqual(picks(distributor, two, 3), ["a", "c", "a"]);
});

Deno.test("roundRobin continues from the same position when the map grows", () => {
  const distributor = roundRobin({ start: 0 });
  assert.deepEqual(picks(distributor, endpoints("a", "b"), 3), ["a", "b", "a"]);
  // Next position is 3: d in [a, b, c, d].
  assert.deepEqual(picks(distributor, endpoints("a", "b", "c", "d"), 5), [
    "d",
    "a",
    "b",
    "c",
    "d",
  ]);
});

Deno.test("roundRobin distributors keep separate positions", () => {
  const list = endpoints("a", "b");
  const one = roundRobin({ start: 0 });
  const two = roundRobin({ start: 0 });
  assert.equal(one.choose(list, call)!.id, "a");
  assert.equal(one.choose(list, call)!.id, "b");
  assert.equal(two.choose(list, call)!.id, "a");
});

Deno.test("roundRobin has no onError or onReturn: the stub's defaults apply", () => {
  const distributor = roundRobin({ start: 0 });
  assert.equal(distributor.onError, undefined);
  assert.equal(distributor.onReturn, undefined);
});

Deno.test("roundRobin takes any start: negative counts from the end, fractions are truncated", () => {
  const list = endpoints("a", "b", "c");
  assert.deepEqual(picks(roundRobin({ start: -1 }), list, 4), [
    "c",
    "a",
    "b",
    "c",
  ]);
  assert.deepEqual(picks(roundRobin({ start: -5 }), list, 2), ["b", "c"]);
  assert.deepEqual(picks(roundRobin({ start: 1.7 }), list, 2), ["b", "c"]);
  assert.deepEqual(picks(roundRobin({ start: NaN }), list, 2), ["a", "b"]);
});
