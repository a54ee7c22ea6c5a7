/**
 * The power-of-two-choices distributor on peak EWMA latency.
 *
 * @module
 */

import type { Candidate, Distributor } from "./distributor.ts";
import { randomIndex } from "./_pick.ts";

/** Options of {@link p2cEwma}. */
export interface P2cEwmaOptions {
  /**
   * The source of numbers in [0, 1) for drawing the two endpoints; inject
   * a seeded one for repeatable tests.
   * @default Math.random
   */
  random?: () => number;
}

/**
 * The cost of an endpoint that has calls under way but no latency measured
 * yet: Finagle's `Long.MaxValue >> 16` (2^47 − 1), plus its calls under way.
 */
const PENALTY = 2 ** 47 - 1;

/**
 * Power of two choices on peak EWMA latency, as Finagle's `P2CPeakEwma`
 * balancer (Finagle user guide, Clients, "Load Balancing":
 * twitter.github.io/finagle/guide/Clients.html; the cost and its penalty
 * are those of its `PeakEwma.scala`): for each call, draw two
 * distinct endpoints at random and take the one with the lower cost
 * (the first drawn on a tie), where
 *
 * - cost = `stats.ewmaLatencyMs` × (`stats.inFlight` + 1) once a latency
 *   is measured;
 * - an endpoint never measured costs 0 while it has no call under way, so
 *   a new server gets tried at once; with calls under way and still no
 *   answer it costs 2^47 − 1 + its calls under way (Finagle's penalty), so
 *   it is not flooded before its first answer.
 *
 * Two random choices instead of the best of all (Michael Mitzenmacher, "The
 * Power of Two Choices in Randomized Load Balancing", IEEE TPDS 12(10),
 * 2001) keep many clients from herding onto the one server they all see as
 * best, and still leave the busiest ones alone: the endpoint picked is
 * never the costliest of the two drawn, so with two or more endpoints the
 * one strictly costliest of all is never picked. The latencies and calls
 * under way are this client's own; weights, zones and loads are ignored.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { p2cEwma } from "./p2c_ewma.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = p2cEwma();
 * const fast = makeCandidate({ id: "fast", url: "tcp://127.0.0.1:9001",
 *   stats: { ewmaLatencyMs: 2, inFlight: 1 } }); // cost 4
 * const slow = makeCandidate({ id: "slow", url: "tcp://127.0.0.1:9002",
 *   stats: { ewmaLatencyMs: 40, inFlight: 0 } }); // cost 40
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * // With two endpoints, both are drawn every time.
 * assert.equal(distributor.choose([fast, slow], call), fast);
 * assert.equal(distributor.choose([slow, fast], call), fast);
 * ```
 */
export function p2cEwma(options: P2cEwmaOptions = {}): Distributor {
  const random = options.random ?? Math.random;
  const pick = (endpoints: readonly Candidate[]) => {
    const size = endpoints.length;
    if (size < 2) return endpoints[0];
    const first = randomIndex(random, size);
    let second = randomIndex(random, size - 1);
    if (second >= first) second++;
    const a = endpoints[first];
    const b = endpoints[second];
    return cost(b) < cost(a) ? b : a;
  };
  return { choose: pick, pick };
}

/** Finagle's PeakEwma load of an endpoint (see {@link p2cEwma}). */
function cost(candidate: Candidate): number {
  const { ewmaLatencyMs, inFlight } = candidate.stats;
  if (ewmaLatencyMs > 0) return ewmaLatencyMs * (inFlight + 1);
  return inFlight > 0 ? PENALTY + inFlight : 0;
}
