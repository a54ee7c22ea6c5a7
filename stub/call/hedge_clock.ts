/**
 * The timer of hedged requests: one for all the hedged calls of a method
 * under way, instead of a timer (and a promise race) per call, so that
 * arming a hedge costs a call about what awaiting its answer does.
 *
 * @module
 */

/** What wakes a hedged call: its attempt's outcome, or `"hedge"` once its delay passed. */
export type Wake<T> = (value: T | "hedge") => void;

/**
 * Wakes calls at the times they were armed for, in the order they were
 * armed (a method's hedge delay changes slowly, so that is the order of
 * their times, or close to it), with one timer set for the oldest one;
 * the timer is cleared once no armed call is under way.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { HedgeClock } from "./hedge_clock.ts";
 * const clock = new HedgeClock();
 * const woken = await new Promise((wake) => clock.arm(5, wake));
 * clock.ended();
 * assert.equal(woken, "hedge");
 * ```
 */
export class HedgeClock {
  /** When each armed call is due, performance.now() ms. */
  #ats: number[] = [];
  #wakes: (Wake<never> | undefined)[] = [];
  #head = 0;
  /** Armed calls not ended yet. */
  #live = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Arms a call: `wake("hedge")` in `delayMs` (if it is still under way;
   * waking a settled promise's resolver does nothing). Pair with
   * {@link ended}.
   */
  arm(delayMs: number, wake: Wake<never>): void {
    this.#live++;
    this.#ats.push(performance.now() + delayMs);
    this.#wakes.push(wake);
    if (this.#timer === undefined) this.#schedule(delayMs);
  }

  /** An armed call ended; the last one clears the timer and what it holds. */
  ended(): void {
    if (--this.#live > 0) return;
    this.#live = 0;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#ats.length = 0;
    this.#wakes.length = 0;
    this.#head = 0;
  }

  #schedule(delayMs: number): void {
    this.#timer = setTimeout(this.#fire, Math.max(0, delayMs));
  }

  readonly #fire = (): void => {
    this.#timer = undefined;
    const ats = this.#ats;
    const wakes = this.#wakes;
    // Timers fire in whole ms: what is due within half a ms goes now.
    const now = performance.now() + 0.5;
    let head = this.#head;
    while (head < ats.length && ats[head] <= now) {
      const wake = wakes[head];
      wakes[head] = undefined;
      head++;
      wake?.("hedge");
    }
    if (head === ats.length) {
      ats.length = 0;
      wakes.length = 0;
      head = 0;
    } else if (head >= 1024 && 2 * head >= ats.length) {
      ats.splice(0, head);
      wakes.splice(0, head);
      head = 0;
    }
    this.#head = head;
    if (head < ats.length) this.#schedule(ats[head] - performance.now());
  };
}
