/**
 * The options of one stub call, which the stub's defaults and each call's
 * own override. Apart from `cluster_stub.ts` so that the retry loop reads
 * them without importing the stub that runs it.
 *
 * @module
 */

/** Options of one call. */
export interface StubCallOptions {
  /** Aborting it rejects the call with CANCELLED (-32005) at once. */
  signal?: AbortSignal;
  /** Overrides the stub's deadline, ms. */
  deadlineMs?: number;
  /** Overrides the stub's attempt timeout, ms. */
  attemptTimeoutMs?: number;
  /** Overrides whether the method is idempotent, for this call. */
  idempotent?: boolean;
}
