/**
 * Property tests (fast-check) across every built-in distributor: random
 * candidate lists (weights, zones, local flags, stats, loads), random call
 * infos, the list changing between picks.
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  type CallInfo,
  type Candidate,
  type Distributor,
  type FailureInfo,
  makeCandidate,
} from "./distributor.ts";
import {
  consistentHash,
  firstAvailable,
  leastInFlight,
  leastLoaded,
  p2cEwma,
  random,
  roundRobin,
  sticky,
  weightedRoundRobin,
} from "./mod.ts";
import { callInfo, seeded } from "./_test_util.ts";
import { cursor } from "./_pick.ts";

const IDS = ["a", "b", "c", "d", "e", "f", "g", "h"];

const call0 = callInfo();
const keyed = (key: string): CallInfo => ({ ...call0, params: [key] });

const keyOf = (call: CallInfo) =>
  Array.isArray(call.params)
    ? String(call.params[0])
    : String((call.params as Record<string, unknown>).key);

/** Every built-in distributor, fresh, with a PRNG from `seed`. */
const DISTRIBUTORS: [string, (seed: number) => Distributor][] = [
  ["roundRobin", () => roundRobin()],
  ["random", (seed) => random({ random: seeded(seed) })],
  ["weightedRoundRobin", () => weightedRoundRobin()],
  [
    "weightedRoundRobin preferLocal",
    () => weightedRoundRobin({ preferLocal: true }),
  ],
  ["firstAvailable", () => firstAvailable()],
  ["leastLoaded", () => leastLoaded()],
  ["leastInFlight", () => leastInFlight()],
  ["p2cEwma", (seed) => p2cEwma({ random: seeded(seed) })],
  ["consistentHash", () => consistentHash(keyOf)],
  ["sticky", () => sticky()],
];

/** What a candidate holds besides its id, drawn at random. */
const fieldsArb = fc.record({
  weight: fc.oneof(
    fc.integer({ min: 1, max: 1_000_000 }),
    fc.constantFrom(0, -1, 0.5, NaN, Infinity),
  ),
  zone: fc.option(fc.constantFrom("eu-1", "eu-2", "us-1")),
  local: fc.boolean(),
  load: fc.option(
    fc.oneof(
      fc.integer({ min: -5, max: 100 }),
      fc.double({ noNaN: false }),
    ),
  ),
  attrs: fc.dictionary(fc.constantFrom("canary", "version"), fc.string()),
  stats: fc.record({
    inFlight: fc.nat(20),
    ewmaLatencyMs: fc.oneof(
      fc.constant(0),
      fc.double({ min: 0, max: 10_000, noNaN: true }),
    ),
    recentFailures: fc.nat(5),
    consecutiveFailures: fc.nat(5),
    lastFailureAt: fc.option(fc.nat()),
  }),
});

/** A list of candidates with distinct ids, in random order. */
const listArb = fc.uniqueArray(
  fc.tuple(fc.constantFrom(...IDS), fieldsArb),
  { selector: ([id]) => id, maxLength: IDS.length },
).map((entries) =>
  entries.map(([id, fields]) =>
    makeCandidate({
      id,
      url: `tcp://10.0.0.${id.charCodeAt(0)}:9000`,
      ...fields,
    })
  )
);

const callArb: fc.Arbitrary<CallInfo> = fc.record({
  name: fc.constantFrom("hello", "db"),
  method: fc.constantFrom("greet", "get", "put"),
  params: fc.oneof(
    fc.array(fc.oneof(fc.string(), fc.integer(), fc.constant(null))),
    fc.record({ key: fc.string() }),
  ),
  attempt: fc.nat(4),
  idempotent: fc.boolean(),
  tried: fc.uniqueArray(fc.constantFrom(...IDS, "gone"), { maxLength: 4 }),
  remainingMs: fc.nat(30_000),
});

/** One pick: the list as it is then, the call, and what happens after. */
const stepArb = fc.record({
  list: listArb,
  call: callArb,
  outcome: fc.constantFrom("none", "notSent", "ambiguous", "server", "ok"),
});

/** Runs `steps` on `distributor` as a stub would; returns the picks. */
function run(
  distributor: Distributor,
  steps: readonly { list: Candidate[]; call: CallInfo; outcome: string }[],
): (Candidate | undefined)[] {
  return steps.map(({ list, call, outcome }) => {
    const chosen = distributor.choose(list, call);
    if (list.length === 0) {
      assert.equal(chosen, undefined);
      return chosen;
    }
    assert.ok(
      chosen !== undefined && list.includes(chosen),
      `picked ${chosen?.id} from [${list.map((e) => e.id)}]`,
    );
    if (outcome === "ok") {
      distributor.onReturn?.({ ok: true }, { ...call, endpoint: chosen });
    } else if (outcome !== "none") {
      const failure: FailureInfo = {
        ...call,
        endpoint: chosen,
        kind: outcome as FailureInfo["kind"],
        safeToRetry: outcome === "notSent",
      };
      const decision = distributor.onError?.(new Error(outcome), failure);
      assert.ok(
        decision === undefined || decision === "retry" ||
          decision === "throw" ||
          (typeof decision === "object" && "return" in decision),
      );
    }
    return chosen;
  });
}

for (const [name, make] of DISTRIBUTORS) {
  Deno.test(`property: ${name} picks a member of the list, undefined only for an empty one, never throws`, () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.array(stepArb, { maxLength: 30 }),
        (seed, steps) => {
          run(make(seed), steps);
        },
      ),
    );
  });
}

Deno.test("property: weightedRoundRobin preferLocal never picks a non-local endpoint while a local one is listed", () => {
  fc.assert(
    fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => {
      const picked = run(weightedRoundRobin({ preferLocal: true }), steps);
      steps.forEach(({ list }, i) => {
        if (list.some((e) => e.local)) assert.ok(picked[i]!.local);
      });
    }),
  );
});

Deno.test("property: weightedRoundRobin gives each endpoint exactly its weight in W picks", () => {
  fc.assert(
    fc.property(
      listArb.filter((list) => list.length > 0),
      fc.array(fc.integer({ min: 1, max: 6 }), {
        minLength: IDS.length,
        maxLength: IDS.length,
      }),
      fc.boolean(),
      (list, weights, preferLocal) => {
        const weighted = list.map((e, i) => ({ ...e, weight: weights[i] }));
        const locals = weighted.filter((e) => e.local);
        const pool = preferLocal && locals.length > 0 ? locals : weighted;
        const total = pool.reduce((sum, e) => sum + e.weight, 0);
        const distributor = weightedRoundRobin({ preferLocal });
        const counts = new Map<string, number>();
        for (let i = 0; i < 2 * total; i++) {
          const id = distributor.choose(weighted, call0)!.id;
          counts.set(id, (counts.get(id) ?? 0) + 1);
        }
        for (const e of weighted) {
          const expected = pool.includes(e) ? 2 * e.weight : 0;
          assert.equal(counts.get(e.id) ?? 0, expected, e.id);
        }
      },
    ),
  );
});

Deno.test("property: leastInFlight never picks an endpoint with more calls under way than another", () => {
  fc.assert(
    fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => {
      const picked = run(leastInFlight(), steps);
      steps.forEach(({ list }, i) => {
        for (const e of list) {
          assert.ok(picked[i]!.stats.inFlight <= e.stats.inFlight);
        }
      });
    }),
  );
});

/** The ranking leastLoaded documents, as a tuple (lower is better). */
function loadRank(e: Candidate): [number, number, number] {
  const known = typeof e.load === "number" && Number.isFinite(e.load);
  const estimate = known
    ? e.load! + e.stats.inFlight - e.inFlightAtLoad
    : e.stats.inFlight;
  const wait = (Math.max(0, estimate) + 1) * e.stats.ewmaLatencyMs;
  return [known ? 0 : 1, wait, estimate];
}

function lexicographic(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return 0;
}

Deno.test("property: leastLoaded never picks an endpoint ranked strictly worse than another", () => {
  fc.assert(
    fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => {
      const picked = run(leastLoaded(), steps);
      steps.forEach(({ list }, i) => {
        for (const e of list) {
          assert.ok(lexicographic(loadRank(picked[i]!), loadRank(e)) <= 0);
        }
      });
    }),
  );
});

/** Finagle's PeakEwma cost, as p2cEwma documents it. */
function peakEwmaCost(e: Candidate): number {
  const { ewmaLatencyMs, inFlight } = e.stats;
  if (ewmaLatencyMs > 0) return ewmaLatencyMs * (inFlight + 1);
  return inFlight > 0 ? 2 ** 47 - 1 + inFlight : 0;
}

Deno.test("property: p2cEwma never picks the one endpoint costlier than all the others", () => {
  fc.assert(
    fc.property(
      fc.integer(),
      fc.array(stepArb, { maxLength: 30 }),
      (seed, steps) => {
        const picked = run(p2cEwma({ random: seeded(seed) }), steps);
        steps.forEach(({ list }, i) => {
          if (list.length < 2) return;
          const cost = peakEwmaCost(picked[i]!);
          assert.ok(
            list.some((e) => e !== picked[i] && peakEwmaCost(e) >= cost),
          );
        });
      },
    ),
  );
});

Deno.test("property: firstAvailable picks the first endpoint the call has not tried", () => {
  fc.assert(
    fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => {
      const picked = run(firstAvailable(), steps);
      steps.forEach(({ list, call }, i) => {
        const fresh = list.filter((e) => !call.tried.includes(e.id));
        assert.equal(picked[i], fresh[0] ?? list[0]);
      });
    }),
  );
});

Deno.test("property: roundRobin picks each endpoint once in every run of n picks", () => {
  fc.assert(
    fc.property(listArb, fc.integer(), (list, start) => {
      const distributor = roundRobin({ start });
      const ids = list.map(() => distributor.choose(list, call0)!.id);
      assert.deepEqual([...ids].sort(), list.map((e) => e.id).sort());
    }),
  );
});

/** A copy of `list` in random order (Fisher-Yates). */
function shuffle<T>(list: readonly T[], random: () => number): T[] {
  const copy = [...list];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j], copy[i]];
  }
  return copy;
}

Deno.test("property: consistentHash sends a key to the same endpoint while the list holds the same endpoints, in any order", () => {
  fc.assert(
    fc.property(
      listArb.filter((list) => list.length > 0),
      fc.array(fc.string(), { minLength: 1, maxLength: 20 }),
      fc.integer(),
      (list, keys, seed) => {
        const distributor = consistentHash(keyOf);
        const shuffled = shuffle(list, seeded(seed));
        for (const key of keys) {
          const owner = distributor.choose(list, keyed(key))!;
          assert.equal(distributor.choose(list, keyed(key)), owner);
          assert.equal(distributor.choose(shuffled, keyed(key)), owner);
          assert.equal(consistentHash(keyOf).choose(list, keyed(key)), owner);
        }
      },
    ),
  );
});

Deno.test("property: consistentHash remaps only the keys of an endpoint removed", () => {
  fc.assert(
    fc.property(
      listArb.filter((list) => list.length > 1),
      fc.nat(),
      fc.array(fc.string(), { minLength: 1, maxLength: 40 }),
      (list, which, keys) => {
        const removed = list[which % list.length];
        const rest = list.filter((e) => e !== removed);
        const distributor = consistentHash(keyOf);
        for (const key of keys) {
          const before = distributor.choose(list, keyed(key))!;
          const after = distributor.choose(rest, keyed(key))!;
          if (before !== removed) assert.equal(after, before);
        }
      },
    ),
  );
});

Deno.test("property: sticky stays on its endpoint while it is listed, and moves only when it is not", () => {
  fc.assert(
    fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => {
      const distributor = sticky();
      let current: string | undefined;
      for (const { list, call } of steps) {
        const chosen = distributor.choose(list, call);
        if (list.length === 0) continue;
        if (current !== undefined && list.some((e) => e.id === current)) {
          assert.equal(chosen!.id, current);
        } else if (current !== undefined) {
          assert.notEqual(chosen!.id, current);
        }
        current = chosen!.id;
      }
    }),
  );
});

/** Every built-in distributor with a pick, the same for the same seed. */
const TWINS: [string, (seed: number) => Distributor][] = [
  ["roundRobin", (seed) => roundRobin({ start: seed })],
  ["random", (seed) => random({ random: seeded(seed) })],
  ["weightedRoundRobin", () => weightedRoundRobin()],
  [
    "weightedRoundRobin preferLocal",
    () => weightedRoundRobin({ preferLocal: true }),
  ],
  ["firstAvailable", () => firstAvailable()],
  ["leastLoaded", (seed) => leastLoaded({ start: seed })],
  ["leastInFlight", (seed) => leastInFlight({ start: seed })],
  ["p2cEwma", (seed) => p2cEwma({ random: seeded(seed) })],
  ["sticky", (seed) => sticky({ start: seed })],
];

for (const [name, make] of TWINS) {
  Deno.test(`property: ${name}'s pick picks as its choose does for first attempts, the list changing and failures between picks`, () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.array(stepArb, { maxLength: 30 }),
        (seed, steps) => {
          const picker = make(seed);
          const chooser = make(seed);
          assert.equal(typeof picker.pick, "function");
          for (const { list, outcome } of steps) {
            const first = { ...call0, tried: [] };
            const picked = picker.pick!(list);
            assert.equal(picked?.id, chooser.choose(list, first)?.id);
            if (
              picked === undefined || outcome === "none" || outcome === "ok"
            ) {
              continue;
            }
            for (const distributor of [picker, chooser]) {
              const endpoint = list.find((e) => e.id === picked.id)!;
              distributor.onError?.(new Error(outcome), {
                ...first,
                endpoint,
                kind: outcome as FailureInfo["kind"],
                safeToRetry: outcome === "notSent",
              });
            }
          }
        },
      ),
    );
  });
}

Deno.test("consistentHash has no pick: its choice depends on the call", () => {
  assert.equal(consistentHash(keyOf).pick, undefined);
});

/** bestOf as it was, with a list of the ties: the reference order. */
function bestOfReference(
  endpoints: readonly Candidate[],
  compare: (a: Candidate, b: Candidate) => number,
  next: (size: number) => number,
): Candidate | undefined {
  let ties: Candidate[] = [];
  for (const endpoint of endpoints) {
    const order = ties.length === 0 ? -1 : compare(endpoint, ties[0]);
    if (order < 0) ties = [endpoint];
    else if (order === 0) ties.push(endpoint);
  }
  return ties.length === 0 ? undefined : ties[next(ties.length)];
}

Deno.test("property: leastInFlight and leastLoaded take ties in the same turn as a list of the ties would", () => {
  const byInFlight = (a: Candidate, b: Candidate) =>
    a.stats.inFlight - b.stats.inFlight;
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 1000 }),
      fc.array(listArb, { maxLength: 30 }),
      (start, lists) => {
        const next = cursor(start);
        const distributor = leastInFlight({ start });
        for (const list of lists) {
          assert.equal(
            distributor.choose(list, call0)?.id,
            bestOfReference(list, byInFlight, next)?.id,
          );
        }
      },
    ),
  );
  // Many ties: every endpoint idle.
  const idle = IDS.map((id) => makeCandidate({ id, url: `tcp://h:${id}` }));
  const next = cursor(3);
  const distributor = leastLoaded({ start: 3 });
  for (let i = 0; i < 20; i++) {
    assert.equal(
      distributor.choose(idle, call0),
      bestOfReference(idle, () => 0, next),
    );
  }
});
