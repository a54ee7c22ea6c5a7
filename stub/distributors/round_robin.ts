/**
 * The round-robin distributor.
 *
 * @module
 */

import type { Candidate, Distributor } from "./distributor.ts";
import { cursor } from "./_pick.ts";

/** Options of {@link roundRobin}. */
export interface RoundRobinOptions {
  /**
   * Position of the first pick. Default: random, so that many clients do
   * not all start on the same server (as gRPC's round_robin policy does).
   */
  start?: number;
}

/**
 * Cycles through the cluster map: each call goes to the endpoint after the
 * previous one. When the map shrinks or grows, the cycle continues from the
 * same position modulo the new size. Weights, zones and stats are ignored
 * (`weightedRoundRobin` weighs them and prefers local endpoints).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { roundRobin } from "./round_robin.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = roundRobin({ start: 0 });
 * const endpoints = [
 *   makeCandidate({ id: "a", url: "tcp://127.0.0.1:9001" }),
 *   makeCandidate({ id: "b", url: "tcp://127.0.0.1:9002" }),
 * ];
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * const picks = [1, 2, 3].map(() => distributor.choose(endpoints, call)?.id);
 * assert.deepEqual(picks, ["a", "b", "a"]);
 * ```
 */
export function roundRobin(options: RoundRobinOptions = {}): Distributor {
  const next = cursor(options.start);
  const pick = (endpoints: readonly Candidate[]) =>
    endpoints.length === 0 ? undefined : endpoints[next(endpoints.length)];
  return { choose: pick, pick };
}
