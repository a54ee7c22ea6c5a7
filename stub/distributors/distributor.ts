/**
 * The distributor contract: how a cluster stub picks a server for each call
 * and what it does when a call fails or returns (after JOnAS CMI's
 * distributors: `choose`, `onException` deciding RETRY, RETURN or THROW,
 * `onReturn`). A distributor is a plain object of plain functions; write
 * one in a few lines.
 *
 * @module
 */

import { type Endpoint, makeEndpoint } from "../../protocol/registry.ts";

/** The client's view of an endpoint: see {@link EndpointStats.state}. */
export type ClientState = "serving" | "suspect" | "ejected";

/**
 * What this client measured of an endpoint: its calls under way, its
 * latency, its failures and its verdict. Shared by every stub of one
 * client.
 */
export interface EndpointStats {
  /** Calls this client has under way on the endpoint now. */
  readonly inFlight: number;
  /**
   * Peak EWMA of the latency of its answered calls, ms (Finagle's
   * PeakEwma: jumps up to a slow sample at once, decays towards fast ones
   * with a time constant); 0 before the first answer.
   */
  readonly ewmaLatencyMs: number;
  /** Failed attempts in the last 10 s (connection failures, timeouts). */
  readonly recentFailures: number;
  /** Failed attempts since its last success. */
  readonly consecutiveFailures: number;
  /** When its last attempt failed (`Date.now()` ms), or null. */
  readonly lastFailureAt: number | null;
  /**
   * This client's verdict (beside the registry's `state` of the endpoint):
   * serving, suspect (its last attempt failed) or ejected (only offered
   * when every serving endpoint is ejected, or a panic threshold set on
   * the client puts them back in play).
   */
  readonly state: ClientState;
}

/**
 * An endpoint in play for a call: what the registry says of it (id, URL,
 * attributes, weight, zone, state, reported load…) and what this client
 * measured.
 */
export interface Candidate extends Endpoint {
  /**
   * This client's measurements, live: read them when choosing (the same
   * candidate object is handed out again while its registry record stays
   * the same, and its stats change as calls start and end).
   */
  readonly stats: EndpointStats;
  /**
   * Whether it is local to this client: in the client's zone
   * (`connect({ zone })`), or on one of its hosts (`localHosts`).
   */
  readonly local: boolean;
  /**
   * This client's calls under way on it (`stats.inFlight`) when it learnt
   * `load` (by a lookup or the watch): the report does not count the
   * calls this client started since, and counts those that ended since,
   * so `load + stats.inFlight - inFlightAtLoad` estimates the load now
   * (in calls under way). 0 when made by hand.
   */
  readonly inFlightAtLoad: number;
}

/** What a distributor is told about the call it places. */
export interface CallInfo {
  /** Service name the stub serves (e.g. `"hello"`). */
  readonly name: string;
  /** JSON-RPC method called. */
  readonly method: string;
  /** Params by position (as a stub method received them), or by name. */
  readonly params: readonly unknown[] | Readonly<Record<string, unknown>>;
  /** 0 for the first try, then 1, 2, … for retries (and hedges). */
  readonly attempt: number;
  /** Whether the method was declared idempotent (safe to run twice). */
  readonly idempotent: boolean;
  /** Ids of the endpoints this call already tried, in order. */
  readonly tried: readonly string[];
  /** Time left before the call's deadline, ms. */
  readonly remainingMs: number;
}

/**
 * How an attempt failed, for deciding what to do:
 * - `notSent`: the request never left this client (refused connection,
 *   closed connection): another server can take it whatever the method;
 * - `ambiguous`: it was sent and then the connection broke or the attempt
 *   timed out: it may have run;
 * - `server`: the server answered with an error response.
 */
export type FailureKind = "notSent" | "ambiguous" | "server";

/** What a distributor is told about a failed attempt. */
export interface FailureInfo extends CallInfo {
  /** The endpoint the attempt went to. */
  readonly endpoint: Candidate;
  /** How it failed. */
  readonly kind: FailureKind;
  /**
   * Whether retrying elsewhere cannot run the call twice: the request
   * never left this client, or the method is idempotent (for `server`
   * failures: only when idempotent).
   */
  readonly safeToRetry: boolean;
}

/**
 * What to do after a failed attempt: `"retry"` on another endpoint (as far
 * as the deadline, attempt limit and retry budget allow), `"throw"` the
 * error to the caller, or `{ return: value }`: answer the caller with
 * `value` instead of an error (CMI's RETURN).
 */
export type ErrorDecision = "retry" | "throw" | { return: unknown };

/**
 * Chooses endpoints for calls, and optionally decides about failures and
 * post-processes results.
 *
 * @example A distributor that always prefers the first endpoint
 * ```ts
 * import assert from "node:assert/strict";
 * import { makeCandidate, type Distributor } from "./distributor.ts";
 * const first: Distributor = { choose: (endpoints) => endpoints[0] };
 * const a = makeCandidate({ id: "a", url: "tcp://127.0.0.1:9001" });
 * const b = makeCandidate({ id: "b", url: "tcp://127.0.0.1:9002" });
 * const call = {
 *   name: "hello", method: "greet", params: [], attempt: 0,
 *   idempotent: false, tried: [], remainingMs: 30_000,
 * };
 * assert.equal(first.choose([a, b], call), a);
 * ```
 */
export interface Distributor {
  /**
   * Picks the endpoint for one attempt among `endpoints` (never empty: the
   * serving endpoints in play, in binding order). Returning undefined, or
   * an endpoint not in the list, is an error.
   */
  choose(
    endpoints: readonly Candidate[],
    call: CallInfo,
  ): Candidate | undefined;
  /**
   * Optional fast path for a call's first attempt: picks among `endpoints`
   * as `choose` would, without a {@link CallInfo}. When a distributor has
   * it, the stub calls `pick(endpoints)` instead of `choose(endpoints,
   * call)` for every first attempt (`call.attempt` 0, nothing tried), and
   * makes no `CallInfo` for it unless `onReturn` or a failure needs one;
   * retries and hedges still go through `choose`. Give it only when the
   * choice does not depend on the call (its method, params, deadline): the
   * built-in distributors do, except `consistentHash`. Same rules as
   * `choose`: an endpoint of the list, never undefined for a non-empty one.
   */
  pick?(endpoints: readonly Candidate[]): Candidate | undefined;
  /**
   * Whether the stub hedges the idempotent calls this distributor places
   * by default (a second attempt on another endpoint when the first is
   * slow; see the stub's `hedge` option). `false` for a distributor whose
   * choice is where a call belongs (a session, a key's owner): a hedge
   * would run it elsewhere, and would move a distributor that follows its
   * last pick. `sticky` and `consistentHash` say `false`; a stub given an
   * explicit `hedge` option hedges anyway. @default true
   */
  readonly hedge?: boolean;
  /**
   * Decides after a failed attempt. Default (or when it returns
   * undefined): `"retry"` when `safeToRetry` and the failure is not a
   * server's error answer, else `"throw"`.
   */
  onError?(error: unknown, failure: FailureInfo): ErrorDecision | undefined;
  /**
   * Sees each successful result; what it returns (unless undefined)
   * replaces the result the caller gets.
   */
  onReturn?(
    result: unknown,
    call: CallInfo & { endpoint: Candidate },
  ): unknown;
}

/** Stats of an endpoint nobody called yet. */
export const NO_STATS: EndpointStats = Object.freeze({
  inFlight: 0,
  ewmaLatencyMs: 0,
  recentFailures: 0,
  consecutiveFailures: 0,
  lastFailureAt: null,
  state: "serving",
});

/**
 * A candidate with the fields given and defaults for the rest (a serving
 * global endpoint, no stats, not local): for tests and distributors
 * written by hand.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { makeCandidate } from "./distributor.ts";
 * const c = makeCandidate({ id: "a", url: "tcp://127.0.0.1:9001", weight: 3 });
 * assert.equal(c.weight, 3);
 * assert.equal(c.stats.inFlight, 0);
 * assert.equal(c.local, false);
 * ```
 */
export function makeCandidate(
  fields:
    & Pick<Endpoint, "id" | "url">
    & Partial<Omit<Candidate, "stats">>
    & { stats?: Partial<EndpointStats> },
): Candidate {
  const { stats, local, inFlightAtLoad, ...endpoint } = fields;
  return {
    ...makeEndpoint(endpoint),
    stats: { ...NO_STATS, ...stats },
    local: local ?? false,
    inFlightAtLoad: inFlightAtLoad ?? 0,
  };
}

/**
 * The default decision after a failure (what the stub does when the
 * distributor has no `onError`, or it returns undefined).
 */
export function defaultDecision(failure: FailureInfo): ErrorDecision {
  return failure.safeToRetry && failure.kind !== "server" ? "retry" : "throw";
}
