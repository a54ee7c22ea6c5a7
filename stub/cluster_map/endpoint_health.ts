/**
 * What a client knows of each server it calls, shared by all its stubs: the
 * calls under way, the latency (peak EWMA), the failures, and the client's
 * side of each endpoint's state machine: `serving`, `suspect` after a
 * failure, `ejected` as an outlier (after a refused connection, or
 * consecutive failed or timed-out attempts, as Envoy's outlier detection
 * does) until an `rpc.ping` probe succeeds after an exponential back-off.
 *
 * Pure: the clock is injected, probes are run by whoever asks
 * {@link EndpointHealth.probeDue}.
 *
 * @module
 */

import type {
  ClientState,
  EndpointStats,
} from "../distributors/distributor.ts";

/** How the client judges endpoints. */
export interface HealthOptions {
  /**
   * Consecutive failed attempts (connection reset after sending, attempt
   * timeout) after which an endpoint is ejected; a refused connection
   * ejects at once. @default 2
   */
  ejectAfterFailures?: number;
  /** First ejection time, ms; it doubles with each ejection in a row. @default 1_000 */
  baseEjectionMs?: number;
  /** Longest ejection time, ms. @default 30_000 */
  maxEjectionMs?: number;
  /**
   * An endpoint that stays serving this long is forgiven its past
   * ejections (the next one starts at `baseEjectionMs` again), ms.
   * @default 60_000
   */
  ejectionResetMs?: number;
  /** Time constant of the latency EWMA, ms (Finagle's decay time). @default 10_000 */
  ewmaDecayMs?: number;
  /**
   * Clock, ms. By default ejections, failure windows and the EWMA are
   * timed by `performance.now` (a wall-clock step must not keep a server
   * ejected for the hour it stepped back), and `lastFailureAt` is a
   * `Date.now()` time; a clock given here is used for both.
   */
  now?: () => number;
}

/** What went wrong in one attempt, as the health tracker counts it. */
export type AttemptFailure = "refused" | "broken" | "timeout";

const FAILURE_WINDOW_MS = 10_000;

/**
 * One endpoint (by URL) as this client sees it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { EndpointHealth } from "./endpoint_health.ts";
 * let now = 0;
 * const health = new EndpointHealth({ now: () => now });
 * health.failed("timeout");
 * health.failed("timeout");
 * assert.equal(health.state, "ejected");
 * assert.equal(health.ejectedUntil, 1000);
 * now = 1000;
 * assert.equal(health.probeDue(), true);
 * ```
 */
export class EndpointHealth implements EndpointStats {
  readonly #now: () => number;
  /** Whether `#now` is a clock the options gave (not performance.now). */
  readonly #ownClock: boolean;
  /** What stamps {@link lastFailureAt}. */
  readonly #wallNow: () => number;
  readonly #ejectAfter: number;
  readonly #baseEjectionMs: number;
  readonly #maxEjectionMs: number;
  readonly #resetMs: number;
  readonly #decayMs: number;
  #inFlight = 0;
  #ewma = 0;
  #ewmaAt = 0;
  #failures: number[] = [];
  #consecutive = 0;
  #lastFailureAt: number | null = null;
  #state: ClientState = "serving";
  #reason: string | null = null;
  #ejections = 0;
  #ejectedUntil = 0;
  #servingSince = 0;
  #probing = false;
  /** Why it was first ejected, before any failed probe. */
  #ejectedFor: string | null = null;
  #failedProbes = 0;

  readonly #onChange: (() => void) | undefined;

  /**
   * Makes the record of an endpoint not called yet: serving, no stats.
   *
   * @param onChange called when its state or probing changes (what decides
   * whether it is in play), never per call.
   */
  constructor(options: HealthOptions = {}, onChange?: () => void) {
    this.#onChange = onChange;
    this.#ownClock = options.now !== undefined;
    this.#now = options.now ?? (() => performance.now());
    this.#wallNow = options.now ?? Date.now;
    this.#ejectAfter = options.ejectAfterFailures ?? 2;
    this.#baseEjectionMs = options.baseEjectionMs ?? 1_000;
    this.#maxEjectionMs = options.maxEjectionMs ?? 30_000;
    this.#resetMs = options.ejectionResetMs ?? 60_000;
    this.#decayMs = options.ewmaDecayMs ?? 10_000;
    this.#servingSince = this.#now();
  }

  /** Calls under way. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * Peak EWMA latency of answered calls, ms (0 before the first answer),
   * decayed towards 0 for the time since the last answer, as Finagle's
   * PeakEwma does on read: an endpoint left alone after one slow answer
   * becomes cheap again and is tried, instead of being starved forever.
   */
  get ewmaLatencyMs(): number {
    if (this.#ewma === 0) return 0;
    const idleMs = Math.max(0, this.#now() - this.#ewmaAt);
    return idleMs === 0
      ? this.#ewma
      : this.#ewma * Math.exp(-idleMs / this.#decayMs);
  }

  /** Failures in the last 10 s. */
  get recentFailures(): number {
    this.#prune();
    return this.#failures.length;
  }

  /** Failures since the last success. */
  get consecutiveFailures(): number {
    return this.#consecutive;
  }

  /** When the last failure happened, or null. */
  get lastFailureAt(): number | null {
    return this.#lastFailureAt;
  }

  /** The client's view: serving, suspect, or ejected. */
  get state(): ClientState {
    return this.#state;
  }

  /** Why it is suspect or ejected (e.g. "2 attempts timed out in a row"), or null. */
  get reason(): string | null {
    return this.#reason;
  }

  /** Until when it stays ejected before a probe may re-admit it (ms), 0 if not ejected. */
  get ejectedUntil(): number {
    return this.#state === "ejected" ? this.#ejectedUntil : 0;
  }

  /** The stats as a plain value, for a distributor. */
  snapshot(): EndpointStats {
    return {
      inFlight: this.inFlight,
      ewmaLatencyMs: this.ewmaLatencyMs,
      recentFailures: this.recentFailures,
      consecutiveFailures: this.consecutiveFailures,
      lastFailureAt: this.lastFailureAt,
      state: this.state,
    };
  }

  /** An attempt starts on this endpoint. */
  started(): void {
    this.#inFlight++;
  }

  /** An attempt ended, whatever its outcome (pairs with {@link started}). */
  ended(): void {
    this.#inFlight = Math.max(0, this.#inFlight - 1);
  }

  /**
   * The server answered (a result, or an error response: it is alive) after
   * `latencyMs`: serving again, failures in a row reset, latency sampled
   * (peak EWMA: a slower sample is taken at once, a faster one decays in
   * with time constant `ewmaDecayMs`). `at`: when it answered, on
   * `performance.now()`'s clock, if the caller just read it (saves a read;
   * ignored when the record was given its own clock).
   */
  answered(latencyMs: number, at?: number): void {
    const now = at === undefined || this.#ownClock ? this.#now() : at;
    if (this.#ewma === 0 || latencyMs > this.#ewma) {
      this.#ewma = latencyMs;
    } else if (now > this.#ewmaAt) {
      // In the same ms the weight is 1: no change, and no exp() to pay.
      const weight = Math.exp(-(now - this.#ewmaAt) / this.#decayMs);
      this.#ewma = this.#ewma * weight + latencyMs * (1 - weight);
    }
    this.#ewmaAt = now;
    this.#consecutive = 0;
    if (this.#state !== "serving") this.#serve(now);
    else if (now - this.#servingSince >= this.#resetMs) this.#ejections = 0;
  }

  /**
   * An attempt failed: a refused (or already closed) connection ejects at
   * once; a connection that broke after sending, or an attempt that timed
   * out, makes it suspect, and ejected after `ejectAfterFailures` in a row.
   */
  failed(kind: AttemptFailure): void {
    const now = this.#now();
    this.#failures.push(now);
    this.#lastFailureAt = this.#wallNow();
    this.#consecutive++;
    if (this.#state === "ejected") return;
    if (kind === "refused") {
      this.#eject(now, "the connection was refused or closed");
    } else if (this.#consecutive >= this.#ejectAfter) {
      this.#eject(
        now,
        `${this.#consecutive} attempts in a row ${
          kind === "timeout" ? "timed out" : "lost their connection"
        }`,
      );
    } else {
      if (this.#state !== "suspect") this.#onChange?.();
      this.#state = "suspect";
      this.#reason = kind === "timeout"
        ? "an attempt timed out"
        : "an attempt lost its connection";
    }
  }

  /** Whether its ejection time is over and no probe runs: the caller should probe it now. */
  probeDue(): boolean {
    return this.#state === "ejected" && !this.#probing &&
      this.#now() >= this.#ejectedUntil;
  }

  /** A probe starts (so no other does meanwhile). */
  probeStarted(): void {
    this.#probing = true;
    this.#onChange?.();
  }

  /** The probe ended: re-admitted when it passed, ejected for twice as long when not. */
  probeEnded(passed: boolean): void {
    this.#probing = false;
    this.#onChange?.();
    if (this.#state !== "ejected") return;
    const now = this.#now();
    if (passed) {
      this.#consecutive = 0;
      this.#serve(now);
    } else {
      this.#failedProbes++;
      const base = this.#ejectedFor ?? "ejected";
      this.#eject(
        now,
        `${base}; ${
          this.#failedProbes === 1
            ? "a probe failed too"
            : `${this.#failedProbes} probes failed too`
        }`,
        base,
      );
    }
  }

  #eject(now: number, reason: string, base = reason): void {
    if (base === reason) this.#failedProbes = 0;
    this.#ejectedFor = base;
    this.#ejections++;
    this.#state = "ejected";
    this.#onChange?.();
    this.#reason = reason;
    this.#ejectedUntil = now +
      Math.min(
        this.#maxEjectionMs,
        this.#baseEjectionMs * 2 ** Math.min(this.#ejections - 1, 20),
      );
  }

  #serve(now: number): void {
    this.#state = "serving";
    this.#onChange?.();
    this.#reason = null;
    this.#servingSince = now;
  }

  #prune(): void {
    const since = this.#now() - FAILURE_WINDOW_MS;
    let drop = 0;
    while (drop < this.#failures.length && this.#failures[drop] < since) drop++;
    if (drop > 0) this.#failures.splice(0, drop);
  }
}

/**
 * The health records of one client, by endpoint URL: a server bound under
 * several names is judged once.
 */
export class HealthBook {
  readonly #options: HealthOptions;
  readonly #byUrl = new Map<string, EndpointHealth>();
  #changes = 0;
  readonly #changed = () => {
    this.#changes++;
  };

  /** Makes an empty book; records are made on first use. */
  constructor(options: HealthOptions = {}) {
    this.#options = options;
  }

  /**
   * Counts changes of the records' states, probes and the records kept: a
   * view of which endpoints are in play is current while it is unchanged.
   */
  get changes(): number {
    return this.#changes;
  }

  /** The record of `url`, made serving on first use. */
  of(url: string): EndpointHealth {
    let health = this.#byUrl.get(url);
    if (health === undefined) {
      health = new EndpointHealth(this.#options, this.#changed);
      this.#byUrl.set(url, health);
      this.#changes++;
    }
    return health;
  }

  /** Forgets `url` (it left every map), unless calls are under way. */
  forget(url: string): void {
    const health = this.#byUrl.get(url);
    if (health !== undefined && health.inFlight === 0) {
      this.#byUrl.delete(url);
      this.#changes++;
    }
  }
}
