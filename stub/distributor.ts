/**
 * The distributor contract: how a cluster stub picks a server for each call
 * and what it does when a call fails (after JOnAS CMI's distributors). A
 * distributor is a plain object of plain functions; write one in a few
 * lines.
 *
 * @module
 */

import type { Endpoint } from "../registry/protocol.ts";

/** What a distributor is told about the call it places. */
export interface CallInfo {
  /** Service name the stub serves (e.g. `"hello"`). */
  readonly name: string;
  /** JSON-RPC method called. */
  readonly method: string;
  /** Params by position (as a stub method received them), or by name. */
  readonly params: readonly unknown[] | Readonly<Record<string, unknown>>;
  /** 0 for the first try, then 1, 2, … for retries. */
  readonly attempt: number;
}

/** What a distributor is told about a failed attempt. */
export interface FailureInfo extends CallInfo {
  /** The endpoint the attempt went to. */
  readonly endpoint: Endpoint;
  /**
   * Whether retrying elsewhere cannot run the call twice: the request never
   * left this client, or the method was declared idempotent.
   */
  readonly safeToRetry: boolean;
}

/** What to do after a failed attempt. */
export type ErrorDecision = "retry" | "throw";

/**
 * Chooses endpoints for calls.
 *
 * @example A distributor that always prefers the first endpoint
 * ```ts
 * import type { Distributor } from "./distributor.ts";
 * const first: Distributor = { choose: (endpoints) => endpoints[0] };
 * ```
 */
export interface Distributor {
  /**
   * Picks the endpoint for one attempt. `endpoints` is the non-empty cluster
   * map (failed servers already evicted), in binding order.
   */
  choose(endpoints: readonly Endpoint[], call: CallInfo): Endpoint;
  /**
   * Decides after a failed attempt. Default: `"retry"` when the error is a
   * connection failure and `safeToRetry`, else `"throw"`. Retries stop at
   * the call's deadline and attempt limit whatever this returns.
   */
  onError?(error: unknown, failure: FailureInfo): ErrorDecision;
  /** Observes each successful call (e.g. for load tracking). */
  onReturn?(result: unknown, call: CallInfo & { endpoint: Endpoint }): void;
}
