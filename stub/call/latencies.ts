/**
 * What hedged requests are told (their options) and what they measure:
 * the stub's recent latencies, from which a hedge delay is a percentile.
 * Apart from `hedge.ts` so that an attempt can record its latency without
 * importing the hedging that sends attempts.
 *
 * @module
 */

/** Hedged requests (for idempotent methods only). */
export interface HedgeOptions {
  /**
   * Send a second attempt to another server when the first has not
   * answered within this long, ms. Default: the `percentile` of the
   * stub's recent latencies (no hedge before 20 calls were measured).
   */
  delayMs?: number;
  /** The latency percentile that triggers a hedge. @default 0.95 */
  percentile?: number;
}

const LATENCY_SAMPLES = 512;
const MIN_HEDGE_SAMPLES = 20;

/** The latest answered calls' latencies (a ring of 512), ms. */
export class Latencies {
  readonly #samples: number[] = [];
  #cursor = 0;

  /** Records one latency, replacing the oldest once the ring is full. */
  add(latency: number): void {
    if (this.#samples.length < LATENCY_SAMPLES) {
      this.#samples.push(latency);
    } else {
      this.#samples[this.#cursor] = latency;
      this.#cursor = (this.#cursor + 1) % LATENCY_SAMPLES;
    }
  }

  /** The hedge delay `options` give: theirs, or the percentile (null before 20 samples). */
  hedgeDelay(options: HedgeOptions): number | null {
    if (options.delayMs !== undefined) return options.delayMs;
    if (this.#samples.length < MIN_HEDGE_SAMPLES) return null;
    const sorted = [...this.#samples].sort((a, b) => a - b);
    const p = options.percentile ?? 0.95;
    return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  }
}
