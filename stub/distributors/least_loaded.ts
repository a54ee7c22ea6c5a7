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
  /**
   * Weigh each endpoint's load by the latency this client measured of it
   * (`stats.ewmaLatencyMs`): rank by the expected wait, (load + 1) ×
   * latency, as Finagle's PeakEwma cost does with a client's own calls,
   * so a server slower than its peers at the same load gets fewer calls.
   * false: rank by load alone. @default true
   */
  latency?: boolean;
}

/**
 * Sends each call to the endpoint whose server is least loaded, by the
 * `load` it reports with its lease keep-alives (the getload of the client /
 * distributed-server RPC paper; best in calls under way, any scale the
 * servers agree on works), falling back to this client's calls under way
 * where no load is known.
 *
 * A report is fresh to within one keep-alive interval: the cluster map's
 * watch brings each change (`watchLoads`, on by default), and between two
 * reports this client adds what it did since: its estimate of an
 * endpoint's load is `load + stats.inFlight - inFlightAtLoad` (the calls
 * it started there since the report, less those of the report that
 * ended), so one figure does not send every call to the lowest server
 * until the next report.
 *
 * Endpoints rank by, in order:
 *
 * 1. whether a load is known: endpoints that report one (a finite number)
 *    come before those that do not, so in a mixed list an endpoint without
 *    a load is picked only when no listed endpoint reports one (a server
 *    just started, whose first report is on its way, is not flooded);
 * 2. with `latency` (the default), the expected wait: (estimate, at least
 *    0, + 1) × `stats.ewmaLatencyMs`, lowest first (an endpoint not
 *    measured yet waits 0: it is tried, and measured, at once);
 * 3. the estimate, lowest first (with no load reported anywhere it is
 *    `stats.inFlight`, as {@link leastInFlight} ranks);
 * 4. ties are taken in turn (round-robin).
 *
 * Every client sees the same reports and adds only its own calls: with
 * many clients, {@link p2cEwma} spreads better.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { leastLoaded } from "./least_loaded.ts";
 * import { makeCandidate } from "./distributor.ts";
 * const distributor = leastLoaded({ start: 0 });
 * const endpoint = (id: string, load: number | null, inFlight: number, inFlightAtLoad = 0) =>
 *   makeCandidate({ id, url: `tcp://${id}:9001`, load, inFlightAtLoad, stats: { inFlight } });
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * const busy = endpoint("busy", 9, 0);
 * const idle = endpoint("idle", 2, 3, 3); // 3 calls under way, all in its report
 * const fresh = endpoint("fresh", null, 0);
 * assert.equal(distributor.choose([busy, idle, fresh], call), idle);
 * // Reported 2, and this client sent it 8 calls since: about 10 now.
 * const flooded = endpoint("flooded", 2, 8, 0);
 * assert.equal(distributor.choose([busy, flooded], call), busy);
 * // Nobody reports a load: the fewest calls under way.
 * const [x, y] = [endpoint("x", null, 2), endpoint("y", null, 1)];
 * assert.equal(distributor.choose([x, y], call), y);
 * ```
 */
export function leastLoaded(options: LeastLoadedOptions = {}): Distributor {
  const next = cursor(options.start);
  const compare = options.latency === false ? compareLoad : compareWait;
  const pick = (endpoints: readonly Candidate[]) =>
    bestOf(endpoints, compare, next);
  return { choose: pick, pick };
}

/** Negative when `a` ranks before `b`, by load alone. */
function compareLoad(a: Candidate, b: Candidate): number {
  const aKnown = reports(a);
  const bKnown = reports(b);
  if (aKnown !== bKnown) return aKnown ? -1 : 1;
  return estimate(a) - estimate(b);
}

/** Negative when `a` ranks before `b` (see {@link leastLoaded}). */
function compareWait(a: Candidate, b: Candidate): number {
  const aKnown = reports(a);
  const bKnown = reports(b);
  if (aKnown !== bKnown) return aKnown ? -1 : 1;
  const aLoad = estimate(a);
  const bLoad = estimate(b);
  const wait = (Math.max(0, aLoad) + 1) * a.stats.ewmaLatencyMs -
    (Math.max(0, bLoad) + 1) * b.stats.ewmaLatencyMs;
  return wait !== 0 ? wait : aLoad - bLoad;
}

/**
 * The endpoint's load now, as this client estimates it: the reported one
 * corrected by its own calls since, or its own calls under way.
 */
function estimate(candidate: Candidate): number {
  const { inFlight } = candidate.stats;
  if (!reports(candidate)) return inFlight;
  return candidate.load! + inFlight - (candidate.inFlightAtLoad ?? 0);
}

function reports(candidate: Candidate): boolean {
  return typeof candidate.load === "number" && Number.isFinite(candidate.load);
}
