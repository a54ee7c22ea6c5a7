/**
 * Seeded randomness for the simulator: the mulberry32 generator, a seed
 * mixer to derive independent streams ("node 2, incarnation 3 of seed 42"),
 * and {@link Prng} with the draws the simulator needs. Every random choice
 * of a run comes from here, so a seed replays exactly.
 *
 * @module
 */

/**
 * The mulberry32 generator: uniform numbers in [0, 1) from a 32-bit seed.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { mulberry32 } from "./prng.ts";
 * const a = mulberry32(7), b = mulberry32(7);
 * assert.equal(a(), b());
 * ```
 */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Hashes numbers into one 32-bit seed (murmur3's finalizer per part), to
 * derive independent streams such as "node 2, incarnation 3 of seed 42".
 */
export function mixSeed(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const part of parts) {
    h = Math.imul(h ^ (part >>> 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

/** A seeded random source with the helpers the simulator needs. */
export class Prng {
  readonly #next: () => number;

  /**
   * Makes a source (mulberry32) whose sequence depends only on `seed`.
   *
   * @param seed any 32-bit integer.
   */
  constructor(seed: number) {
    this.#next = mulberry32(seed);
  }

  /** A uniform number in [0, 1). */
  next(): number {
    return this.#next();
  }

  /** A uniform integer in [min, max], both inclusive. */
  int(min: number, max: number): number {
    return min + Math.floor(this.#next() * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return p > 0 && this.#next() < p;
  }

  /** A uniform element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.#next() * items.length)];
  }

  /** Shuffles `items` in place (Fisher–Yates) and returns it. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(this.#next() * (i + 1));
      [items[i], items[j]] = [items[j], items[i]];
    }
    return items;
  }

  /** How many events of expected count `rate` happen now (floor + Bernoulli). */
  count(rate: number): number {
    const whole = Math.floor(rate);
    return whole + (this.chance(rate - whole) ? 1 : 0);
  }
}
