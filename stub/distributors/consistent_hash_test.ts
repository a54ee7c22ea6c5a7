import assert from "node:assert/strict";
import type { CallInfo, Candidate } from "./distributor.ts";
import { consistentHash } from "./consistent_hash.ts";
import { callInfo, candidate, candidates, tally } from "./_test_util.ts";
import { xxhash32 } from "./_xxhash32.ts";

const byFirstParam = (call: CallInfo) =>
  String((call.params as readonly unknown[])[0]);
const keyed = (key: string, overrides: Partial<CallInfo> = {}) =>
  callInfo({ params: [key], ...overrides });
const keys = (count: number) =>
  Array.from({ length: count }, (_, i) => `user-${i}`);

function owners(list: readonly Candidate[], all: readonly string[]) {
  const distributor = consistentHash(byFirstParam);
  return new Map(
    all.map((key) => [key, distributor.choose(list, keyed(key))!.id]),
  );
}

Deno.test("consistentHash sends the same key to the same endpoint, in any list order", () => {
  const list = candidates("a", "b", "c", "d");
  const distributor = consistentHash(byFirstParam);
  for (const key of keys(200)) {
    const owner = distributor.choose(list, keyed(key));
    assert.ok(owner !== undefined && list.includes(owner));
    assert.equal(distributor.choose(list, keyed(key)), owner);
    const reversed = [...list].reverse();
    assert.equal(distributor.choose(reversed, keyed(key)), owner);
    // Another distributor (another client) agrees.
    assert.equal(consistentHash(byFirstParam).choose(list, keyed(key)), owner);
  }
});

Deno.test("consistentHash spreads 30,000 keys within 3% of even over 3 endpoints", () => {
  const counts = tally([
    ...owners(candidates("a", "b", "c"), keys(30_000)).values(),
  ]);
  for (const id of ["a", "b", "c"]) {
    const count = counts.get(id) ?? 0;
    assert.ok(Math.abs(count - 10_000) <= 300, `${id}: ${count}`);
  }
});

Deno.test("consistentHash moves only the keys of an endpoint that leaves", () => {
  const all = keys(10_000);
  const before = owners(candidates("a", "b", "c", "d"), all);
  const after = owners(candidates("a", "b", "d"), all);
  let moved = 0;
  for (const key of all) {
    if (before.get(key) === "c") {
      assert.notEqual(after.get(key), "c");
      moved++;
    } else {
      assert.equal(after.get(key), before.get(key), key);
    }
  }
  assert.ok(Math.abs(moved - 2_500) <= 125, `moved ${moved}`);
});

Deno.test("consistentHash gives a joining endpoint only the keys it now owns, about 1/n", () => {
  const all = keys(10_000);
  const before = owners(candidates("a", "b", "c"), all);
  const after = owners(candidates("a", "b", "c", "e"), all);
  let taken = 0;
  for (const key of all) {
    if (after.get(key) === "e") taken++;
    else assert.equal(after.get(key), before.get(key), key);
  }
  assert.ok(Math.abs(taken - 2_500) <= 125, `taken ${taken}`);
});

Deno.test("consistentHash splits keys by weight: 1:3 within 5%", () => {
  const list = [candidate("a", { weight: 1 }), candidate("b", { weight: 3 })];
  const counts = tally([...owners(list, keys(40_000)).values()]);
  assert.ok(
    Math.abs(counts.get("a")! - 10_000) <= 500,
    `a: ${counts.get("a")}`,
  );
  assert.ok(
    Math.abs(counts.get("b")! - 30_000) <= 500,
    `b: ${counts.get("b")}`,
  );
});

Deno.test("consistentHash moves keys only to an endpoint whose weight grows", () => {
  const all = keys(10_000);
  const light = [candidate("a"), candidate("b"), candidate("c")];
  const heavy = [candidate("a"), candidate("b", { weight: 2 }), candidate("c")];
  const before = owners(light, all);
  const after = owners(heavy, all);
  let gained = 0;
  for (const key of all) {
    if (after.get(key) !== before.get(key)) {
      assert.equal(after.get(key), "b");
      gained++;
    }
  }
  // b's share goes from 1/3 to 2/4: it gains about 1/6 of the keys.
  assert.ok(Math.abs(gained - 10_000 / 6) <= 150, `gained ${gained}`);
});

Deno.test("consistentHash sends a retry to the next-highest endpoint the call has not tried", () => {
  const list = candidates("a", "b", "c", "d");
  const distributor = consistentHash(byFirstParam);
  for (const key of keys(100)) {
    const first = distributor.choose(list, keyed(key))!;
    const retry = distributor.choose(
      list,
      keyed(key, { attempt: 1, tried: [first.id] }),
    )!;
    // Where the key would go if its owner left.
    const without = list.filter((e) => e !== first);
    assert.notEqual(retry, first);
    assert.equal(retry, distributor.choose(without, keyed(key)));
    // Every endpoint tried: the owner again.
    const all = keyed(key, { attempt: 4, tried: list.map((e) => e.id) });
    assert.equal(distributor.choose(list, all), first);
  }
});

Deno.test("consistentHash turns the key into a string; what keyOf throws, choose throws", () => {
  const list = candidates("a", "b", "c");
  const loose = consistentHash((call) =>
    (call.params as unknown[])[0] as string
  );
  const strict = consistentHash(byFirstParam);
  assert.equal(
    loose.choose(list, callInfo({ params: [42] })),
    strict.choose(list, keyed("42")),
  );
  assert.equal(
    loose.choose(list, callInfo({ params: [] })),
    strict.choose(list, keyed("undefined")),
  );
  const broken = consistentHash(() => {
    throw new Error("no key");
  });
  assert.throws(() => broken.choose(list, callInfo()), /no key/);
});

Deno.test("consistentHash gives keyOf the call, and reads it once per pick", () => {
  const seen: CallInfo[] = [];
  const distributor = consistentHash((call) => (seen.push(call), call.method));
  const call = callInfo({ method: "get" });
  distributor.choose(candidates("a", "b"), call);
  assert.deepEqual(seen, [call]);
});

Deno.test("consistentHash returns undefined for an empty list without a key, and has no hooks", () => {
  let asked = 0;
  const distributor = consistentHash(() => (asked++, "k"));
  assert.equal(distributor.choose([], callInfo()), undefined);
  assert.equal(asked, 0);
  assert.equal(distributor.onError, undefined);
  assert.equal(distributor.onReturn, undefined);
});

Deno.test("consistentHash hashes long and non-ASCII keys as their UTF-8 bytes, whatever key came before", () => {
  const encoder = new TextEncoder();
  const list = candidates("a", "b", "c", "d", "e");
  /** The rendezvous owner of `key`, computed from scratch. */
  const reference = (key: string) => {
    const bytes = encoder.encode(key);
    let best: Candidate | undefined;
    let bestScore = -Infinity;
    for (const endpoint of list) {
      const seed = xxhash32(encoder.encode(endpoint.id));
      const h = (xxhash32(bytes, seed) + 0.5) / 2 ** 32;
      const score = -1 / Math.log(h);
      if (best === undefined || score > bestScore) {
        best = endpoint;
        bestScore = score;
      }
    }
    return best!.id;
  };
  const distributor = consistentHash(byFirstParam);
  const texts = [
    "user-1",
    "x".repeat(300),
    "ü",
    "user-1",
    "ünïcødé ✓ ".repeat(40),
    "",
    "y".repeat(70) + "✓",
    "a",
  ];
  for (let round = 0; round < 2; round++) {
    for (const text of [...texts, ...keys(100)]) {
      assert.equal(
        distributor.choose(list, keyed(text))?.id,
        reference(text),
        JSON.stringify(text.slice(0, 20)),
      );
    }
  }
});

Deno.test("consistentHash with one endpoint still asks keyOf, and what it throws, choose throws", () => {
  let asked = 0;
  const only = candidates("a");
  const distributor = consistentHash(() => (asked++, "k"));
  assert.equal(distributor.choose(only, callInfo()), only[0]);
  assert.equal(asked, 1);
  const throwing = consistentHash(() => {
    throw new Error("no key");
  });
  assert.throws(() => throwing.choose(only, callInfo()), /no key/);
});
