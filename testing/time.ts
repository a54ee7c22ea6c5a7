/**
 * Waiting in tests: a delay, a timeout around a promise, polling until a
 * condition holds.
 *
 * @module
 */

/** Resolves after `ms` milliseconds. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Races `promise` against a timer so a broken test fails instead of hanging.
 *
 * @throws {Error} naming `what` when `ms` milliseconds pass first.
 */
export async function within<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`timed out after ${ms} ms: ${what}`)),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Polls `condition` every `intervalMs` until it returns a truthy value and
 * returns that value.
 *
 * @throws {Error} naming `what` when `timeoutMs` passes first.
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  what: string,
  timeoutMs = 5_000,
  intervalMs = 10,
): Promise<NonNullable<T>> {
  // Monotonic, so a test that jumps the wall clock still times out.
  const deadline = performance.now() + timeoutMs;
  for (let round = 0; round < 100_000; round++) {
    const value = await condition();
    if (value) return value as NonNullable<T>;
    if (performance.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** This process's `Date.now()` moved by an offset a test changes: see {@link shiftableWallClock}. */
export interface ShiftableWallClock {
  /** How far `Date.now()` is moved from the real wall clock, ms (negative: back). */
  offsetMs: number;
  /** Puts the real `Date.now()` back. */
  restore(): void;
}

/**
 * Replaces this process's `Date.now()` with one the test can jump (set
 * `offsetMs`), as an NTP step or `date -s` jumps a real wall clock:
 * `performance.now()` and the timers go on unchanged, as they do then.
 * Install it before making what is tested, since code may keep a
 * reference to `Date.now`. (`new Date()` is not moved.)
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { shiftableWallClock } from "./time.ts";
 * const wall = shiftableWallClock();
 * const now = Date.now;
 * try {
 *   wall.offsetMs = -3_600_000;
 *   assert.ok(now() < new Date().getTime() - 3_500_000);
 * } finally {
 *   wall.restore();
 * }
 * assert.ok(Math.abs(Date.now() - new Date().getTime()) < 1_000);
 * ```
 */
export function shiftableWallClock(): ShiftableWallClock {
  const real = Date.now;
  const clock = {
    offsetMs: 0,
    restore: () => {
      Date.now = real;
    },
  };
  Date.now = () => real() + clock.offsetMs;
  return clock;
}
