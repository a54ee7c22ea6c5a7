import assert from "node:assert/strict";
import { p2cEwma } from "./p2c_ewma.ts";
import {
  callInfo,
  candidate,
  candidates,
  picks,
  seeded,
  sequence,
  tally,
} from "./_test_util.ts";

const measured = (id: string, ewmaLatencyMs: number, inFlight = 0) =>
  candidate(id, { stats: { ewmaLatencyMs, inFlight } });

Deno.test("p2cEwma draws two distinct endpoints and takes the cheaper", () => {
  const list = [measured("a", 10), measured("b", 4), measured("c", 1)];
  const draws: number[] = [];
  const distributor = p2cEwma({
    random: () => {
      const value = [0, 0, 0.99, 0.99, 0.5, 0.1][draws.length % 6];
      draws.push(value);
      return value;
    },
  });
  // (0, 0): a, then b (the second draw skips the first one): b is cheaper.
  // (0.99, 0.99): c (2 of 3), then b (1 of the 2 others): c is cheaper.
  // (0.5, 0.1): b, then a: b is cheaper.
  assert.deepEqual(picks(distributor, list, 3), ["b", "c", "b"]);
  assert.equal(draws.length, 6);
});

Deno.test("p2cEwma cost is the peak EWMA latency × (calls under way + 1)", () => {
  const distributor = p2cEwma({ random: sequence(0, 0) });
  const call = callInfo();
  // 5 ms × 2 = 10 against 9 ms × 1 = 9.
  const pair = [measured("a", 5, 1), measured("b", 9, 0)];
  assert.equal(distributor.choose(pair, call)?.id, "b");
  // 5 ms × 1 = 5 against 9.
  const idle = [measured("a", 5, 0), measured("b", 9, 0)];
  assert.equal(distributor.choose(idle, call)?.id, "a");
  // A tie goes to the first drawn.
  const tie = [measured("a", 4, 1), measured("b", 8, 0)];
  assert.equal(distributor.choose(tie, call)?.id, "a");
  assert.equal(distributor.choose([tie[1], tie[0]], call)?.id, "b");
});

Deno.test("p2cEwma tries an endpoint never measured, but does not flood it before its first answer", () => {
  const distributor = p2cEwma({ random: sequence(0, 0) });
  const call = callInfo();
  const slow = measured("slow", 10_000, 100); // cost 1,010,000
  // Never measured and idle: cost 0.
  assert.equal(
    distributor.choose([slow, measured("new", 0, 0)], call)?.id,
    "new",
  );
  // Never measured with a call under way: Finagle's penalty, 2^47 - 1 + 1.
  assert.equal(
    distributor.choose([measured("new", 0, 1), slow], call)?.id,
    "slow",
  );
  // Two such: the one with fewer calls under way.
  const waiting = [measured("x", 0, 3), measured("y", 0, 2)];
  assert.equal(distributor.choose(waiting, call)?.id, "y");
});

Deno.test("p2cEwma never picks the strictly costliest endpoint of 2 or more", () => {
  const list = [measured("a", 2), measured("b", 2), measured("c", 50)];
  const counts = tally(picks(p2cEwma({ random: seeded(11) }), list, 9_000));
  assert.equal(counts.get("c"), undefined);
  // a and b cost the same: each wins 3 of the 6 ordered pairs (against c,
  // and against the other when drawn first), so 4,500 each, ± 5%.
  for (const id of ["a", "b"]) {
    assert.ok(
      Math.abs(counts.get(id)! - 4_500) <= 225,
      `${id}: ${counts.get(id)}`,
    );
  }
});

Deno.test("p2cEwma spreads idle, unmeasured endpoints evenly", () => {
  const counts = tally(
    picks(p2cEwma({ random: seeded(3) }), candidates("a", "b", "c"), 30_000),
  );
  for (const id of ["a", "b", "c"]) {
    assert.ok(
      Math.abs(counts.get(id)! - 10_000) <= 300,
      `${id}: ${counts.get(id)}`,
    );
  }
});

Deno.test("p2cEwma with one endpoint picks it without drawing; an empty list gives undefined", () => {
  let draws = 0;
  const distributor = p2cEwma({ random: () => (draws++, 0.5) });
  const only = candidates("a");
  assert.equal(distributor.choose(only, callInfo()), only[0]);
  assert.equal(distributor.choose([], callInfo()), undefined);
  assert.equal(draws, 0);
  assert.equal(distributor.onError, undefined);
  assert.equal(distributor.onReturn, undefined);
});

Deno.test("p2cEwma copes with a PRNG out of range", () => {
  const list = candidates("a", "b", "c");
  const distributor = p2cEwma({ random: sequence(1, 1, -1, NaN, 0.5, 7) });
  for (let i = 0; i < 9; i++) {
    assert.ok(list.includes(distributor.choose(list, callInfo())!));
  }
});
