/**
 * The random distributor.
 *
 * @module
 */

import type { Candidate, Distributor } from "./distributor.ts";
import { randomIndex } from "./_pick.ts";

/** Options of {@link random}. */
export interface RandomOptions {
  /**
   * The source of numbers in [0, 1) (a number out of range is clamped to
   * the first or last endpoint, NaN picks the first); inject a seeded one
   * for repeatable tests.
   * @default Math.random
   */
  random?: () => number;
}

/**
 * Picks an endpoint uniformly at random for each call: no state to share or
 * warm up, and many clients spread without coordinating. Weights, zones and
 * stats are ignored.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { random } from "./random.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const values = [0.9, 0.1, 0.5];
 * const distributor = random({ random: () => values.shift() ?? 0 });
 * const endpoints = ["a", "b", "c"].map((id, i) =>
 *   makeCandidate({ id, url: `tcp://127.0.0.1:${9001 + i}` })
 * );
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * const picks = [1, 2, 3].map(() => distributor.choose(endpoints, call)?.id);
 * assert.deepEqual(picks, ["c", "a", "b"]);
 * ```
 */
export function random(options: RandomOptions = {}): Distributor {
  const next = options.random ?? Math.random;
  const pick = (endpoints: readonly Candidate[]) =>
    endpoints.length === 0
      ? undefined
      : endpoints[randomIndex(next, endpoints.length)];
  return { choose: pick, pick };
}
