/**
 * The smooth weighted round-robin distributor, with an optional preference
 * for local endpoints.
 *
 * @module
 */

import type { Candidate, Distributor } from "./distributor.ts";
import { weightOf } from "./_pick.ts";

/** Options of {@link weightedRoundRobin}. */
export interface WeightedRoundRobinOptions {
  /**
   * Send calls only to `local` candidates (in the client's zone, or on one
   * of its hosts) while there is at least one in the list, weighted among
   * themselves; when none is left, to all of them (fail-over), and back to
   * the local ones as soon as one is listed again.
   * @default false
   */
  preferLocal?: boolean;
}

/**
 * Smooth weighted round-robin, as nginx's upstream module does it (nginx
 * commit 52327e0627f4 by Maxim Dounin, "Upstream: smooth weighted
 * round-robin balancing"). For each pick, every endpoint's current
 * value grows by its weight, the endpoint with the largest value is picked
 * (the first in list order on a tie) and loses the total of the weights.
 * It is deterministic and exact: from a fresh start, every run of W picks
 * (W the sum of the weights) gives each endpoint exactly its weight, evenly
 * interleaved (weights 5, 1, 1 give a a b a c a a, not a a a a a b c).
 *
 * The current values are kept per endpoint id, so the sequence carries on
 * when endpoints join (a new one starts at 0), leave (their value is
 * forgotten) or change weight (the next picks use the new one). A weight
 * that is not a positive number counts as 1 (the registry binds only
 * 1..1_000_000). Every client starts from the same state, so clients that
 * start together make the same first picks (the heaviest endpoint first);
 * the split evens out within W picks.
 *
 * @example Weights 5, 1, 1
 * ```ts
 * import assert from "node:assert/strict";
 * import { weightedRoundRobin } from "./weighted_round_robin.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = weightedRoundRobin();
 * const endpoints = [
 *   makeCandidate({ id: "a", url: "tcp://127.0.0.1:9001", weight: 5 }),
 *   makeCandidate({ id: "b", url: "tcp://127.0.0.1:9002" }),
 *   makeCandidate({ id: "c", url: "tcp://127.0.0.1:9003" }),
 * ];
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * const picks = Array.from({ length: 7 }, () => distributor.choose(endpoints, call)?.id);
 * assert.equal(picks.join(" "), "a a b a c a a");
 * ```
 *
 * @example Local endpoints first, the others when no local one is left
 * ```ts
 * import assert from "node:assert/strict";
 * import { weightedRoundRobin } from "./weighted_round_robin.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = weightedRoundRobin({ preferLocal: true });
 * const near = makeCandidate({ id: "near", url: "tcp://10.0.0.1:9001", local: true });
 * const far = makeCandidate({ id: "far", url: "tcp://10.9.0.1:9001", weight: 10 });
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * assert.equal(distributor.choose([near, far], call), near);
 * assert.equal(distributor.choose([far], call), far);
 * ```
 */
export function weightedRoundRobin(
  options: WeightedRoundRobinOptions = {},
): Distributor {
  const preferLocal = options.preferLocal ?? false;
  /** Endpoint id → its current value. */
  const current = new Map<string, number>();
  const pick = (endpoints: readonly Candidate[]) => {
    const pool = preferLocal && endpoints.some((e) => e.local)
      ? endpoints.filter((e) => e.local)
      : endpoints;
    let total = 0;
    let best: Candidate | undefined;
    let bestValue = -Infinity;
    for (const endpoint of pool) {
      const weight = weightOf(endpoint);
      const value = (current.get(endpoint.id) ?? 0) + weight;
      current.set(endpoint.id, value);
      total += weight;
      if (best === undefined || value > bestValue) {
        best = endpoint;
        bestValue = value;
      }
    }
    if (best === undefined) return undefined;
    current.set(best.id, bestValue - total);
    // Forget endpoints that left: more ids known than listed means at
    // least one is gone (a returning one starts afresh at 0).
    if (current.size > endpoints.length) {
      const listed = new Set(endpoints.map((e) => e.id));
      for (const id of current.keys()) {
        if (!listed.has(id)) current.delete(id);
      }
    }
    return best;
  };
  return { choose: pick, pick };
}
