import assert from "node:assert/strict";
import { random } from "./random.ts";
import {
  callInfo,
  candidates,
  picks,
  seeded,
  sequence,
  tally,
} from "./_test_util.ts";

Deno.test("random picks the endpoint at floor(r × size)", () => {
  const distributor = random({ random: sequence(0, 0.34, 0.99, 0.5) });
  assert.deepEqual(picks(distributor, candidates("a", "b", "c"), 4), [
    "a",
    "b",
    "c",
    "b",
  ]);
});

Deno.test("random clamps numbers out of [0, 1), NaN picks the first", () => {
  const distributor = random({ random: sequence(1, 7, -0.5, NaN, Infinity) });
  assert.deepEqual(picks(distributor, candidates("a", "b", "c"), 5), [
    "c",
    "c",
    "a",
    "a",
    "c",
  ]);
});

Deno.test("random spreads 30,000 calls within 2% of even over 3 endpoints", () => {
  const counts = tally(
    picks(random({ random: seeded(7) }), candidates("a", "b", "c"), 30_000),
  );
  for (const id of ["a", "b", "c"]) {
    const count = counts.get(id) ?? 0;
    assert.ok(Math.abs(count - 10_000) <= 200, `${id}: ${count}`);
  }
});

Deno.test("random returns the candidate object itself, Math.random by default", () => {
  const list = candidates("a", "b", "c");
  const distributor = random();
  for (let i = 0; i < 100; i++) {
    assert.ok(list.includes(distributor.choose(list, callInfo())!));
  }
});

Deno.test("random returns undefined for an empty list without drawing", () => {
  let draws = 0;
  const distributor = random({ random: () => (draws++, 0.5) });
  assert.equal(distributor.choose([], callInfo()), undefined);
  assert.equal(draws, 0);
  assert.equal(distributor.onError, undefined);
  assert.equal(distributor.onReturn, undefined);
});
