/**
 * Timing helpers shared by the client side (private: not part of the
 * public API): sleeping that an `AbortSignal` cuts short, jittered
 * exponential back-off, and bounding a promise by a deadline and a signal.
 *
 * @module
 */

/** Largest delay `setTimeout` honours (about 24.8 days), in ms. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Resolves after `ms`, or as soon as `signal` aborts (never rejects: the
 * caller checks `signal.aborted`).
 */
export function abortableSleep(
  ms: number,
  signal?: AbortSignal,
): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, Math.min(ms, MAX_TIMER_MS)));
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * The delay before retry number `attempt` (0-based): "full jitter"
 * (uniform in [0, min(maxMs, minMs × 2^attempt)]), so clients that failed
 * together do not retry together (AWS Architecture Blog, "Exponential
 * Backoff And Jitter", 2015).
 */
export function backoffDelay(
  attempt: number,
  minMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 30));
  return Math.round(random() * ceiling);
}

/**
 * `promise`, unless `deadline` (a `Date.now()` time, ms) passes or `signal`
 * aborts first: then it rejects with `timedOut()` or `aborted()`. The
 * promise itself runs on (it may be shared).
 */
export function withDeadline<T>(
  promise: Promise<T>,
  deadline: number,
  signal: AbortSignal | undefined,
  timedOut: () => unknown,
  aborted: () => unknown,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const finish = (settle: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      settle();
    };
    const onAbort = () => finish(() => reject(aborted()));
    const timer = setTimeout(
      () => finish(() => reject(timedOut())),
      Math.max(0, Math.min(deadline - Date.now(), MAX_TIMER_MS)),
    );
    promise.then(
      (value) => finish(() => resolve(value)),
      (error) => finish(() => reject(error)),
    );
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
}
