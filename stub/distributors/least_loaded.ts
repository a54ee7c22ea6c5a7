/**
 * The least-loaded distributor.
 *
 * @module
 */

import type { Candidate, Distributor } from "./distributor.ts";
import { bestOf, cursor } from "./_pick.ts";

/** Options of {@link leastLoaded}. */
export interface LeastLoadedOptions {
  /**
   * Position of the first tie-break among equally ranked endpoints.
   * Default: random, so that many clients do not all start on the same
   * server.
   */
  start?: number;
}

/**
 * Sends each call to the endpoint whose server reported the lowest load
 * (`load`, sent with its lease keep-alives: the getload of the client /
 * distributed-server RPC paper), falling back to this client's calls under
 * way where no load is known. Endpoints rank by, in order:
 *
 * 1. whether a load is known: endpoints that report one (a finite number)
 *    come before those that do not, so in a mixed list an endpoint without
 *    a load is picked only when no listed endpoint reports one (a server
 *    just started, whose first report is on its way, is not flooded);
 * 2. the load, lowest first (any scale the servers agree on);
 * 3. `stats.inFlight`, fewest first: with no load reported anywhere this
 *    is all that ranks them, as {@link leastInFlight} does;
 * 4. ties are taken in turn (round-robin).
 *
 * Reported loads lag by up to one keep-alive interval, and every client
 * sees the same figures: many clients may pick the same server until its
 * next report. With many clients, {@link p2cEwma} spreads better.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { leastLoaded } from "./least_loaded.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = leastLoaded({ start: 0 });
 * const endpoint = (id: string, load: number | null, inFlight: number) =>
 *   makeCandidate({ id, url: `tcp://${id}:9001`, load, stats: { inFlight } });
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * const busy = endpoint("busy", 0.9, 0);
 * const idle = endpoint("idle", 0.2, 3);
 * const fresh = endpoint("fresh", null, 0);
 * // Nobody reports a load: the fewest calls under way.
 * const [x, y] = [endpoint("x", null, 2), endpoint("y", null, 1)];
 * assert.equal(distributor.choose([busy, idle, fresh], call), idle);
 * assert.equal(distributor.choose([x, y], call), y);
 * ```
 */
export function leastLoaded(options: LeastLoadedOptions = {}): Distributor {
  const next = cursor(options.start);
  const pick = (endpoints: readonly Candidate[]) =>
    bestOf(endpoints, compareLoad, next);
  return { choose: pick, pick };
}

/** Negative when `a` ranks before `b` (see {@link leastLoaded}). */
function compareLoad(a: Candidate, b: Candidate): number {
  const aKnown = reports(a);
  const bKnown = reports(b);
  if (aKnown !== bKnown) return aKnown ? -1 : 1;
  if (aKnown && a.load !== b.load) return a.load! - b.load!;
  return a.stats.inFlight - b.stats.inFlight;
}

function reports(candidate: Candidate): boolean {
  return typeof candidate.load === "number" && Number.isFinite(candidate.load);
}
