/**
 * What an edge isolate keeps between requests, where a runtime allows no
 * socket and no timer to outlive the request that made it (Cloudflare
 * Workers): each name's stubs list as plain data with the time it was read,
 * the lookups under way (so that concurrent requests share one), and the
 * client's verdicts of the servers (a {@link HealthBook}: counters and
 * timestamps, no I/O). A request's client reads them and opens its own
 * connections.
 *
 * @module
 */

import type { LookupResult } from "../protocol/registry.ts";
import {
  HealthBook,
  type HealthOptions,
} from "./cluster_map/endpoint_health.ts";

/**
 * How the requests of one isolate share a lookup another request has under
 * way ({@link EdgeCacheOptions.share}).
 */
export type EdgeShare = "promise" | "poll" | "off";

/** Settings of an {@link EdgeCache}. */
export interface EdgeCacheOptions {
  /**
   * How long a stubs list is used before a request looks the name up
   * again, ms. @default 10_000
   */
  ttlMs?: number;
  /**
   * How long past `ttlMs` a list may still be served while one request
   * refreshes it in the background (stale-while-revalidate), ms; a list
   * older than `ttlMs + maxStaleMs` is looked up before the request goes
   * on. 0: never served stale (unless the registry cannot be reached).
   * @default 30_000
   */
  maxStaleMs?: number;
  /**
   * How concurrent requests of the isolate share one lookup of a name:
   * - `"promise"`: the others await the first one's lookup, a promise
   *   settled by that request's I/O (Deno, `deno serve`, Deno Deploy,
   *   Node, where a promise may cross requests);
   * - `"poll"`: the others read the cache (plain data) on timers of their
   *   own until the first one stores the list (workerd: `edgeClient()`'s
   *   default, see docs/runtimes.md);
   * - `"off"`: each request looks the name up itself.
   *
   * Either way a request waits at most `shareWaitMs` for another's lookup,
   * and looks up itself when that lookup fails or its request ends.
   * @default "promise"
   */
  share?: EdgeShare;
  /**
   * The longest a request waits for another request's lookup before it
   * looks the name up itself, ms. @default 3_000
   */
  shareWaitMs?: number;
  /** When a request's client ejects a server, and for how long. */
  health?: HealthOptions;
  /** Clock, ms. @default Date.now */
  now?: () => number;
}

/** The default {@link EdgeCacheOptions.ttlMs}: 10 s. */
export const DEFAULT_EDGE_TTL_MS = 10_000;
/** The default {@link EdgeCacheOptions.maxStaleMs}: 30 s. */
export const DEFAULT_EDGE_MAX_STALE_MS = 30_000;
/** The default {@link EdgeCacheOptions.shareWaitMs}: 3 s. */
export const DEFAULT_EDGE_SHARE_WAIT_MS = 3_000;

/** The longest pause between two reads of the cache in `"poll"` mode, ms. */
const MAX_POLL_MS = 10;

/** What a request gives {@link EdgeCache.read}: its own I/O. */
export interface EdgeRequestIo {
  /** Looks the name up on this request's connections. */
  lookup(): Promise<LookupResult>;
  /**
   * A background refresh of a stale list, when this request can run work
   * past its response: `lookup` on connections of its own (closed when it
   * ends), `keep` hands the whole refresh to the runtime (`ctx.waitUntil`
   * on workerd; on Deno and Node it runs detached). Without it a stale list
   * is looked up before the request goes on.
   */
  background?: {
    lookup(): Promise<LookupResult>;
    keep(work: Promise<void>): void;
  };
  /**
   * Aborts when the request's client closes: a lookup it had under way is
   * no longer waited for by other requests.
   */
  signal?: AbortSignal;
}

/** A lookup under way in some request of the isolate. */
interface Flight {
  /**
   * Resolves once the lookup settled (its list stored) or its request's
   * client closed (`"promise"` mode: awaited by other requests).
   */
  readonly ended: Promise<void>;
  /** Resolves {@link ended} and forgets the flight. */
  readonly end: () => void;
  /** When it started (`now()`), ms. */
  readonly since: number;
  /** A background refresh: a stale list may be served meanwhile. */
  readonly background: boolean;
}

/**
 * The stubs lists and server verdicts an edge isolate keeps between
 * requests. A list is used while it is younger than `ttlMs` and none of
 * its endpoints failed since it was read: after a failure the next request
 * asks the registry again, which may know of new servers.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { EdgeCache } from "./edge_cache.ts";
 * import { makeEndpoint } from "../protocol/registry.ts";
 * let time = 0;
 * const cache = new EdgeCache({ ttlMs: 1_000, now: () => time });
 * const endpoint = makeEndpoint({ id: "a", url: "tcp://127.0.0.1:9001" });
 * cache.store("hello", { name: "hello", query: {}, revision: 3, endpoints: [endpoint], total: 1 });
 * assert.equal(cache.fresh("hello")?.revision, 3);
 * time = 999;
 * assert.equal(cache.fresh("hello")?.revision, 3);
 * time = 1_000;
 * assert.equal(cache.fresh("hello"), undefined); // older than the TTL
 * assert.equal(cache.stale("hello")?.revision, 3); // servable while refreshed
 * cache.store("hello", { name: "hello", query: {}, revision: 4, endpoints: [endpoint], total: 1 });
 * cache.health.of(endpoint.url).failed("refused");
 * assert.equal(cache.fresh("hello"), undefined); // it failed: look up again
 * assert.equal(cache.stale("hello"), undefined); // and not in the background
 * time = 1_200; // the registry still lists it (its lease has not run out)
 * cache.store("hello", { name: "hello", query: {}, revision: 4, endpoints: [endpoint], total: 1 });
 * assert.equal(cache.fresh("hello")?.revision, 4); // fresh; a is skipped while ejected
 * assert.equal(cache.health.of(endpoint.url).state, "ejected");
 * ```
 */
export class EdgeCache {
  /** The servers' health records, shared by every request's client. */
  readonly health: HealthBook;
  /** How long a stubs list is used, ms. */
  readonly ttlMs: number;
  /** How long past the TTL a list is served while refreshed, ms. */
  readonly maxStaleMs: number;
  /** How requests share a lookup under way. */
  readonly share: EdgeShare;
  /** The longest a request waits for another's lookup, ms. */
  readonly shareWaitMs: number;
  readonly #now: () => number;
  readonly #lists = new Map<string, { result: LookupResult; at: number }>();
  readonly #flights = new Map<string, Flight>();

  /**
   * Makes an empty cache (keep one per isolate, in module scope).
   *
   * @throws {RangeError} when `ttlMs` is not a positive number, or
   * `maxStaleMs` or `shareWaitMs` is negative; {TypeError} for an unknown
   * `share`.
   */
  constructor(options: EdgeCacheOptions = {}) {
    this.ttlMs = options.ttlMs ?? DEFAULT_EDGE_TTL_MS;
    if (!(this.ttlMs > 0)) {
      throw new RangeError(
        `ttlMs must be a positive number of ms, got ${this.ttlMs}`,
      );
    }
    this.maxStaleMs = nonNegative(
      "maxStaleMs",
      options.maxStaleMs ?? DEFAULT_EDGE_MAX_STALE_MS,
    );
    this.shareWaitMs = nonNegative(
      "shareWaitMs",
      options.shareWaitMs ?? DEFAULT_EDGE_SHARE_WAIT_MS,
    );
    this.share = options.share ?? "promise";
    if (!["promise", "poll", "off"].includes(this.share)) {
      throw new TypeError(
        `share must be "promise", "poll" or "off", got ${
          JSON.stringify(this.share)
        }`,
      );
    }
    this.#now = options.now ?? Date.now;
    this.health = new HealthBook({ now: this.#now, ...options.health });
  }

  /**
   * The stubs list of `name` (a name with its query), if it is younger
   * than `ttlMs` and none of its endpoints failed since it was read.
   */
  fresh(name: string): LookupResult | undefined {
    const kept = this.#kept(name);
    if (kept === undefined || this.#now() - kept.at >= this.ttlMs) {
      return undefined;
    }
    return kept.result;
  }

  /**
   * The stubs list of `name` past its TTL but within `maxStaleMs` of it,
   * none of its endpoints failed since it was read: what a request serves
   * while the list is refreshed in the background.
   */
  stale(name: string): LookupResult | undefined {
    const kept = this.#kept(name);
    if (kept === undefined) return undefined;
    const age = this.#now() - kept.at;
    if (age < this.ttlMs || age >= this.ttlMs + this.maxStaleMs) {
      return undefined;
    }
    return kept.result;
  }

  /**
   * The last stubs list of `name` read, however old: what a request uses
   * when the registry cannot be reached (a stale list beats none).
   */
  last(name: string): LookupResult | undefined {
    return this.#lists.get(name)?.result;
  }

  /** Keeps `result` as the stubs list of `name`, read now. */
  store(name: string, result: LookupResult): void {
    this.#lists.set(name, { result, at: this.#now() });
  }

  /** Whether a lookup of `name` is under way in some request. */
  lookingUp(name: string): boolean {
    return this.#flights.has(name);
  }

  /**
   * The stubs list of `name` for a request: the fresh one; else a stale
   * one while a background refresh runs (started by this request when it
   * can, see {@link EdgeRequestIo.background}); else the result of a
   * lookup another request has under way (see `share`, at most
   * `shareWaitMs`); else this request's own lookup, stored. When the
   * registry cannot be reached, the last list read.
   *
   * @throws the lookup's error, when no list was ever read.
   */
  async read(name: string, io: EdgeRequestIo): Promise<LookupResult> {
    let waitedMs = 0;
    let pauseMs = 1;
    // Bounded: each round waits, and the waits add up to shareWaitMs.
    while (true) {
      const fresh = this.fresh(name);
      if (fresh !== undefined) return fresh;
      let flight = this.#flights.get(name);
      if (
        flight !== undefined && this.#now() - flight.since >= this.shareWaitMs
      ) {
        // Its request ended without a word, or it hangs: not waited for.
        flight.end();
        flight = undefined;
      }
      const stale = this.stale(name);
      if (stale !== undefined) {
        if (flight?.background) return stale;
        if (flight === undefined && io.background !== undefined) {
          this.#refresh(name, io.background);
          return stale;
        }
      }
      if (
        flight === undefined || this.share === "off" ||
        waitedMs >= this.shareWaitMs
      ) {
        return await this.lookUp(name, io);
      }
      const leftMs = this.shareWaitMs - waitedMs;
      if (this.share === "promise") {
        const started = this.#now();
        await settledWithin(flight.ended, leftMs);
        waitedMs += Math.max(this.#now() - started, 1);
      } else {
        // Plain data only: this request's own timer, then read again.
        const ms = Math.min(pauseMs, leftMs);
        await new Promise((resolve) => setTimeout(resolve, ms));
        waitedMs += ms;
        pauseMs = Math.min(pauseMs * 2, MAX_POLL_MS);
      }
    }
  }

  /**
   * Looks `name` up now with `io.lookup` (other requests may share it) and
   * stores the result; when the registry cannot be reached, the last list
   * read.
   *
   * @throws the lookup's error, when no list was ever read.
   */
  async lookUp(name: string, io: EdgeRequestIo): Promise<LookupResult> {
    const promise = io.lookup();
    const release = this.#fly(name, false);
    // The request's client closes: nobody waits on its lookup any more.
    io.signal?.addEventListener("abort", release, { once: true });
    try {
      const result = await promise;
      this.store(name, result);
      return result;
    } catch (error) {
      // The registry cannot be reached: the last list, if any.
      const stale = this.last(name);
      if (stale === undefined) throw error;
      return stale;
    } finally {
      release();
      io.signal?.removeEventListener("abort", release);
    }
  }

  /** Starts a background refresh of `name`. */
  #refresh(
    name: string,
    background: NonNullable<EdgeRequestIo["background"]>,
  ): void {
    let promise: Promise<LookupResult>;
    try {
      promise = background.lookup();
    } catch (error) {
      promise = Promise.reject(error);
    }
    const release = this.#fly(name, true);
    const work = promise.then(
      (result) => this.store(name, result),
      // The stale list stays; a request past maxStaleMs looks up itself.
      () => {},
    ).finally(release);
    background.keep(work);
  }

  /** Records a lookup of `name` under way; returns what ends it. */
  #fly(name: string, background: boolean): () => void {
    let end!: () => void;
    const ended = new Promise<void>((resolve) => {
      end = () => {
        if (this.#flights.get(name) === flight) this.#flights.delete(name);
        resolve();
      };
    });
    const flight: Flight = { ended, end, since: this.#now(), background };
    this.#flights.set(name, flight);
    return end;
  }

  /** The list of `name` unless one of its endpoints failed since it was read. */
  #kept(name: string): { result: LookupResult; at: number } | undefined {
    const kept = this.#lists.get(name);
    if (kept === undefined) return undefined;
    // A failure since the list was read: the registry may know better.
    // (One it already knew of does not count: the list read after it is as
    // fresh as the registry can make it; the ejection skips that server.)
    const failed = kept.result.endpoints.some((endpoint) => {
      const at = this.health.of(endpoint.url).lastFailureAt;
      return at !== null && at >= kept.at;
    });
    return failed ? undefined : kept;
  }
}

/** `value` when it is a number ≥ 0. @throws {RangeError} otherwise. */
function nonNegative(option: string, value: number): number {
  if (!(value >= 0)) {
    throw new RangeError(
      `${option} must be a number of ms ≥ 0, got ${value}`,
    );
  }
  return value;
}

/**
 * Waits until `promise` settles or `ms` pass. (workerd rejects a promise
 * whose request ended before it settled: that ends the wait too.)
 */
async function settledWithin(
  promise: Promise<void>,
  ms: number,
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      promise.catch(() => {}),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
