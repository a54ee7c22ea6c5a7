/**
 * A virtual clock for one simulated node: time is the simulator's step
 * number (1 ms of the driver's timeouts = 1 step), timers fire when the
 * simulator advances it, and the driver's deferred Ready loop runs when the
 * simulator says, so many drivers share one process deterministically.
 *
 * @module
 */

import type { RaftClock } from "../driver.ts";

interface Timer {
  at: number;
  callback: () => void;
  cancelled: boolean;
}

/**
 * A {@link RaftClock} driven by the simulator. Crashing a node discards its
 * clock: its timers and deferred work never run.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimClock } from "./clock.ts";
 * const clock = new SimClock(0);
 * let fired = 0;
 * clock.setTimeout(() => fired++, 5);
 * clock.advance(4);
 * assert.equal(fired, 0);
 * clock.advance(5);
 * assert.equal(fired, 1);
 * ```
 */
export class SimClock implements RaftClock {
  #now: number;
  readonly #rate: number;
  readonly #timers = new Map<number, Timer[]>();
  #deferred: (() => void)[] = [];

  /**
   * Makes a clock reading `now`.
   *
   * @param now the current step.
   * @param rate how fast the node's clock runs against the simulator's
   * steps: a timer of `ms` fires after `ms / rate` steps (default 1).
   * @throws {RangeError} when `rate` is not positive and finite.
   */
  constructor(now: number, rate = 1) {
    if (!(rate > 0 && Number.isFinite(rate))) {
      throw new RangeError(`a clock rate must be positive, got ${rate}`);
    }
    this.#now = now;
    this.#rate = rate;
  }

  /** Fires `callback` at step `now + ms / rate` (at least one step later). */
  setTimeout(callback: () => void, ms: number): unknown {
    const timer: Timer = {
      at: this.#now + Math.max(1, Math.ceil(ms / this.#rate)),
      callback,
      cancelled: false,
    };
    let bucket = this.#timers.get(timer.at);
    if (bucket === undefined) this.#timers.set(timer.at, bucket = []);
    bucket.push(timer);
    return timer;
  }

  /** Cancels a timer {@link setTimeout} returned. */
  clearTimeout(handle: unknown): void {
    (handle as Timer).cancelled = true;
  }

  /** Queues `callback` until {@link runDeferred}. */
  defer(callback: () => void): void {
    this.#deferred.push(callback);
  }

  /** True when deferred work is queued. */
  get hasDeferred(): boolean {
    return this.#deferred.length > 0;
  }

  /** Moves time to `now` and fires the timers due at that step, in order. */
  advance(now: number): void {
    this.#now = now;
    const due = this.#timers.get(now);
    if (due === undefined) return;
    this.#timers.delete(now);
    for (const timer of due) if (!timer.cancelled) timer.callback();
  }

  /** Runs the deferred work queued so far (and what it defers in turn). */
  runDeferred(): void {
    for (let round = 0; round < 100 && this.#deferred.length > 0; round++) {
      const work = this.#deferred;
      this.#deferred = [];
      for (const callback of work) callback();
    }
  }
}
