/**
 * What hedged requests and attempt timeouts are told (their options) and
 * what they measure: the recent latencies of each method of a cluster,
 * from which a hedge delay is a quantile and an idempotent attempt's
 * timeout is a multiple of one. Apart from `hedge.ts` so that an attempt
 * can record its latency without importing the hedging that sends
 * attempts.
 *
 * @module
 */

/** Hedged requests (for idempotent methods only). */
export interface HedgeOptions {
  /**
   * Send a second attempt to another server when the first has not
   * answered within this long, ms. Default: the `percentile` of the
   * method's recent latencies on the cluster (no hedge before 20 calls
   * were measured).
   */
  delayMs?: number;
  /**
   * The latency quantile that triggers a hedge (Finagle's backup requests
   * at 1 % extra load). @default 0.99
   */
  percentile?: number;
}

/** The hedge of a stub that names none: at the p99 of the method's latency. */
export const DEFAULT_HEDGE: Readonly<HedgeOptions> = Object.freeze({});

/**
 * How an idempotent attempt is timed when neither the call nor the stub
 * gives `attemptTimeoutMs`: `max(floorMs, factor × p99)` of the method's
 * latency on the cluster, capped by the time left (see
 * {@link latencyTimeoutMs}).
 */
export const LATENCY_TIMEOUT = Object.freeze({
  /** The latency quantile the timeout follows. */
  quantile: 0.99,
  /** The timeout is this many times that quantile… */
  factor: 3,
  /** …and never shorter than this, ms. */
  floorMs: 100,
});

/**
 * How an idempotent attempt is timed while its method has answered fewer
 * than {@link MIN_LATENCY_SAMPLES} times (but at least once): `max(floorMs,
 * factor × the slowest answer so far)`, capped by the time left split over
 * the attempts left (the rule with no answer yet), so that a fresh client
 * does not give a frozen server a share of the deadline.
 */
export const WARMUP_TIMEOUT = Object.freeze({
  /** The timeout is this many times the slowest answer so far… */
  factor: 10,
  /** …and never shorter than this, ms. */
  floorMs: 1_000,
});

/**
 * Why `hedge` is not a stub's hedge option (`false`, `{ delayMs }` with a
 * positive delay, or `{ percentile }` strictly between 0 and 1), or null.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { hedgeProblem } from "./latencies.ts";
 * assert.equal(hedgeProblem({ delayMs: 20 }), null);
 * assert.match(hedgeProblem({ percentile: 2 })!, /between 0 and 1/);
 * ```
 */
export function hedgeProblem(hedge: unknown): string | null {
  if (hedge === undefined || hedge === false) return null;
  if (typeof hedge !== "object" || hedge === null || Array.isArray(hedge)) {
    return `hedge must be false or an object such as { percentile: 0.99 } or { delayMs: 20 }, got ${
      JSON.stringify(hedge)
    }`;
  }
  const { delayMs, percentile } = hedge as HedgeOptions;
  if (
    delayMs !== undefined &&
    !(typeof delayMs === "number" && Number.isFinite(delayMs) && delayMs > 0)
  ) {
    return `hedge.delayMs must be a positive number of ms (a hedge after that long), got ${delayMs}`;
  }
  if (
    percentile !== undefined &&
    !(typeof percentile === "number" && percentile > 0 && percentile < 1)
  ) {
    return `hedge.percentile must be between 0 and 1, exclusive (0.99: hedge the slowest 1 %), got ${percentile}`;
  }
  return null;
}

/** Samples each method keeps (the latest answered attempts). */
export const LATENCY_SAMPLES = 512;
/** Samples a method needs before its quantiles are used. */
export const MIN_LATENCY_SAMPLES = 20;
/** New samples after which a quantile is read from a fresh sort. */
const RESORT_EVERY = 32;
/** Methods a cluster keeps latencies of (callers may make up method names). */
const MAX_METHODS = 256;

/**
 * The attempt timeout that latency `p99Ms` gives, before the cap by the
 * time left: `max(100, 3 × p99Ms)` ms.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { latencyTimeoutMs } from "./latencies.ts";
 * assert.equal(latencyTimeoutMs(8), 100); // a fast method: the floor
 * assert.equal(latencyTimeoutMs(250), 750); // a slow one: 3 × its p99
 * ```
 */
export function latencyTimeoutMs(p99Ms: number): number {
  return Math.max(LATENCY_TIMEOUT.floorMs, LATENCY_TIMEOUT.factor * p99Ms);
}

/**
 * The latest answered attempts' latencies of one method (a ring of 512),
 * ms. Recording allocates nothing; a quantile is read from a sorted copy
 * made again after every 32 new samples, so no call sorts or allocates.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { Latencies } from "./latencies.ts";
 * const latencies = new Latencies();
 * for (let i = 1; i <= 19; i++) latencies.add(i);
 * assert.equal(latencies.quantile(0.99), null); // too few samples
 * latencies.add(20);
 * assert.equal(latencies.quantile(0.5), 11);
 * assert.equal(latencies.quantile(0.99), 20);
 * ```
 */
export class Latencies {
  readonly #ring = new Float64Array(LATENCY_SAMPLES);
  #count = 0;
  #cursor = 0;
  /** The samples sorted (the unused tail +Infinity), made on first read. */
  #sorted: Float64Array | null = null;
  #sortedCount = 0;
  #sinceSort = 0;

  /** Samples held (at most 512). */
  get count(): number {
    return this.#count;
  }

  /** The slowest sample held, ms (0 with none). */
  get max(): number {
    let max = 0;
    for (let i = 0; i < this.#count; i++) {
      if (this.#ring[i] > max) max = this.#ring[i];
    }
    return max;
  }

  /** Records one latency, replacing the oldest once the ring is full. */
  add(latencyMs: number): void {
    this.#ring[this.#cursor] = latencyMs;
    this.#cursor = (this.#cursor + 1) % LATENCY_SAMPLES;
    if (this.#count < LATENCY_SAMPLES) this.#count++;
    this.#sinceSort++;
  }

  /**
   * The `p` quantile (0…1) of the samples, ms, as of at most 31 samples
   * ago; null before 20 samples.
   */
  quantile(p: number): number | null {
    if (this.#count < MIN_LATENCY_SAMPLES) return null;
    if (this.#sorted === null || this.#sinceSort >= RESORT_EVERY) this.#sort();
    const n = this.#sortedCount;
    return this.#sorted![Math.min(n - 1, Math.max(0, Math.floor(p * n)))];
  }

  #sort(): void {
    const sorted = this.#sorted ??= new Float64Array(LATENCY_SAMPLES);
    const count = this.#count;
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      sorted[i] = i < count ? this.#ring[i] : Infinity;
    }
    sorted.sort();
    this.#sortedCount = count;
    this.#sinceSort = 0;
  }
}

/** The latencies of each method of one cluster, shared by its stubs. */
export class LatencyBook {
  readonly #byMethod = new Map<string, Latencies>();

  /** The record of `method`, made on first use; null past 256 methods. */
  of(method: string): Latencies | null {
    let latencies = this.#byMethod.get(method);
    if (latencies === undefined) {
      if (this.#byMethod.size >= MAX_METHODS) return null;
      latencies = new Latencies();
      this.#byMethod.set(method, latencies);
    }
    return latencies;
  }
}

const BOOKS = new WeakMap<object, LatencyBook>();

/**
 * The latency book of `cluster` (any object standing for one name's
 * endpoints, e.g. its cluster map): every stub of the name shares it.
 */
export function latencyBook(cluster: object): LatencyBook {
  let book = BOOKS.get(cluster);
  if (book === undefined) {
    book = new LatencyBook();
    BOOKS.set(cluster, book);
  }
  return book;
}
