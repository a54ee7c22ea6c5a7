/**
 * Distributors (`@rafter/rpc/distributors`): the `Distributor` contract
 * (what a cluster stub asks when it picks a server for a call, and when a
 * call failed) with `defaultDecision` and `makeCandidate` for writing one,
 * and the built-in distributors, plain functions that return a
 * `Distributor` for a cluster stub (`client.stub(name, { distributor })`).
 * Each built-in one picks only among the endpoints it is given, returns the
 * candidate object itself, and returns undefined only for an empty list.
 * `roundRobin` (the default) and `p2cEwma` are in `@rafter/rpc` too.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { makeCandidate, roundRobin } from "./mod.ts";
 * const distributor = roundRobin({ start: 1 });
 * const [a, b] = ["a", "b"].map((id, i) =>
 *   makeCandidate({ id, url: `tcp://127.0.0.1:${9001 + i}` })
 * );
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * const picks = [1, 2].map(() => distributor.choose([a, b], call)?.id);
 * assert.deepEqual(picks, ["b", "a"]);
 * ```
 *
 * @module
 */

export {
  type CallInfo,
  type Candidate,
  type ClientState,
  defaultDecision,
  type Distributor,
  type EndpointStats,
  type ErrorDecision,
  type FailureInfo,
  type FailureKind,
  makeCandidate,
} from "./distributor.ts";
// The method name a distributor sees for a batch (`CallInfo.method`).
export { BATCH_METHOD } from "../call/cluster_stub.ts";
export { consistentHash } from "./consistent_hash.ts";
export { firstAvailable } from "./first_available.ts";
export {
  leader,
  type LeaderDistributor,
  type LeaderOptions,
} from "./leader.ts";
export { leastInFlight, type LeastInFlightOptions } from "./least_in_flight.ts";
export { leastLoaded, type LeastLoadedOptions } from "./least_loaded.ts";
export { p2cEwma, type P2cEwmaOptions } from "./p2c_ewma.ts";
export { random, type RandomOptions } from "./random.ts";
export { roundRobin, type RoundRobinOptions } from "./round_robin.ts";
export {
  session,
  type SessionDistributor,
  type SessionOptions,
  type SessionPlacement,
} from "./session.ts";
export { sticky, type StickyOptions } from "./sticky.ts";
export {
  weightedRoundRobin,
  type WeightedRoundRobinOptions,
} from "./weighted_round_robin.ts";
