/**
 * A retry budget (Finagle's RetryBudget): retries may add at most a set
 * fraction of extra calls over a sliding window, plus a small reserve per
 * second, so a failing cluster gets no retry storm: when every call fails,
 * each is tried about `1 + percentCanRetry` times instead of
 * `maxAttempts` times.
 *
 * @module
 */

/** Settings of a {@link RetryBudget}. */
export interface RetryBudgetOptions {
  /** The window deposits and retries are counted over, ms. @default 10_000 */
  ttlMs?: number;
  /** Retries allowed per second whatever the traffic (the reserve). @default 10 */
  minRetriesPerSecond?: number;
  /** Retries allowed as a fraction of calls in the window. @default 0.2 */
  percentCanRetry?: number;
  /** Clock, ms. @default Date.now */
  now?: () => number;
}

const BUCKETS = 10;

/** A count over a sliding window, in buckets. */
class WindowedCount {
  readonly #bucketMs: number;
  readonly #counts = new Array<number>(BUCKETS).fill(0);
  #bucketAt = 0;

  constructor(ttlMs: number, now: number) {
    this.#bucketMs = Math.max(1, ttlMs / BUCKETS);
    this.#bucketAt = Math.floor(now / this.#bucketMs);
  }

  add(now: number): void {
    this.#advance(now);
    this.#counts[this.#bucketAt % BUCKETS]++;
  }

  sum(now: number): number {
    this.#advance(now);
    return this.#counts.reduce((a, b) => a + b, 0);
  }

  #advance(now: number): void {
    const bucket = Math.floor(now / this.#bucketMs);
    const steps = Math.min(BUCKETS, bucket - this.#bucketAt);
    for (let i = 1; i <= steps; i++) {
      this.#counts[(this.#bucketAt + i) % BUCKETS] = 0;
    }
    if (bucket > this.#bucketAt) this.#bucketAt = bucket;
  }
}

/**
 * Counts calls (deposits) and retries (withdrawals) over a sliding window.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RetryBudget } from "./retry_budget.ts";
 * const budget = new RetryBudget({ minRetriesPerSecond: 0, percentCanRetry: 0.5 });
 * for (let i = 0; i < 4; i++) budget.deposit();
 * // Half of the 4 calls may be retried: 2 withdrawals, then no more.
 * assert.deepEqual(
 *   [budget.tryWithdraw(), budget.tryWithdraw(), budget.tryWithdraw()],
 *   [true, true, false],
 * );
 * ```
 */
export class RetryBudget {
  readonly #now: () => number;
  readonly #percent: number;
  readonly #reserve: number;
  readonly #deposits: WindowedCount;
  readonly #withdrawals: WindowedCount;

  /**
   * Makes an empty budget.
   *
   * @throws {RangeError} for a negative reserve, a percentage outside
   * 0..1000 % or a window that is not positive.
   */
  constructor(options: RetryBudgetOptions = {}) {
    this.#now = options.now ?? Date.now;
    const ttlMs = options.ttlMs ?? 10_000;
    const min = options.minRetriesPerSecond ?? 10;
    const percent = options.percentCanRetry ?? 0.2;
    if (!(ttlMs > 0) || !(min >= 0) || !(percent >= 0 && percent <= 10)) {
      throw new RangeError(
        "a retry budget needs ttlMs > 0, minRetriesPerSecond >= 0 and percentCanRetry in 0..10",
      );
    }
    this.#percent = percent;
    this.#reserve = min * (ttlMs / 1000);
    const now = this.#now();
    this.#deposits = new WindowedCount(ttlMs, now);
    this.#withdrawals = new WindowedCount(ttlMs, now);
  }

  /**
   * A call was made (its first attempt): it adds `percentCanRetry` retries.
   *
   * @param now the time of the call, ms (default: the budget's clock).
   */
  deposit(now: number = this.#now()): void {
    this.#deposits.add(now);
  }

  /** Spends one retry if the budget has one. @returns whether the retry may go. */
  tryWithdraw(): boolean {
    const now = this.#now();
    const balance = this.#reserve +
      this.#deposits.sum(now) * this.#percent - this.#withdrawals.sum(now);
    if (balance < 1) return false;
    this.#withdrawals.add(now);
    return true;
  }

  /** Retries left now (may be fractional). */
  get balance(): number {
    const now = this.#now();
    return this.#reserve + this.#deposits.sum(now) * this.#percent -
      this.#withdrawals.sum(now);
  }
}
