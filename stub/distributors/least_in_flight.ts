/**
 * The least-in-flight distributor.
 *
 * @module
 */

import type { Candidate, Distributor } from "./distributor.ts";
import { bestOf, cursor } from "./_pick.ts";

/** Options of {@link leastInFlight}. */
export interface LeastInFlightOptions {
  /**
   * Position of the first tie-break among endpoints with as few calls
   * under way. Default: random, so that many clients do not all start on
   * the same server.
   */
  start?: number;
}

/**
 * Sends each call to the endpoint with the fewest calls under way from
 * this client (`stats.inFlight`), as nginx's `least_conn`; endpoints tied
 * on the fewest are taken in turn (round-robin), so an idle cluster is not
 * always served by its first endpoint. It reacts at once to a slow server
 * (its calls pile up) but sees only this client's calls.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { leastInFlight } from "./least_in_flight.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = leastInFlight({ start: 0 });
 * const endpoints = [4, 1, 1].map((inFlight, i) =>
 *   makeCandidate({ id: "abc"[i], url: `tcp://127.0.0.1:${9001 + i}`, stats: { inFlight } })
 * );
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * const picks = [1, 2, 3].map(() => distributor.choose(endpoints, call)?.id);
 * assert.deepEqual(picks, ["b", "c", "b"]);
 * ```
 */
export function leastInFlight(
  options: LeastInFlightOptions = {},
): Distributor {
  const next = cursor(options.start);
  const pick = (endpoints: readonly Candidate[]) =>
    bestOf(endpoints, fewerInFlight, next);
  return { choose: pick, pick };
}

/** Negative when `a` has fewer calls under way than `b`. */
function fewerInFlight(a: Candidate, b: Candidate): number {
  return a.stats.inFlight - b.stats.inFlight;
}
