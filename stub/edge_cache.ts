/**
 * What an edge isolate keeps between requests, where a runtime allows no
 * socket and no timer to outlive the request that made it (Cloudflare
 * Workers): each name's stubs list as plain data with the time it was read,
 * and the client's verdicts of the servers (a {@link HealthBook}: counters
 * and timestamps, no I/O). A request's client reads both and opens its own
 * connections.
 *
 * @module
 */

import type { LookupResult } from "../protocol/registry.ts";
import {
  HealthBook,
  type HealthOptions,
} from "./cluster_map/endpoint_health.ts";

/** Settings of an {@link EdgeCache}. */
export interface EdgeCacheOptions {
  /**
   * How long a stubs list is used before a request looks the name up
   * again, ms. @default 10_000
   */
  ttlMs?: number;
  /** When a request's client ejects a server, and for how long. */
  health?: HealthOptions;
  /** Clock, ms. @default Date.now */
  now?: () => number;
}

/** The default {@link EdgeCacheOptions.ttlMs}: 10 s. */
export const DEFAULT_EDGE_TTL_MS = 10_000;

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
 * cache.store("hello", { name: "hello", query: {}, revision: 4, endpoints: [endpoint], total: 1 });
 * cache.health.of(endpoint.url).failed("refused");
 * assert.equal(cache.fresh("hello"), undefined); // it failed: look up again
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
  readonly #now: () => number;
  readonly #lists = new Map<string, { result: LookupResult; at: number }>();

  /**
   * Makes an empty cache (keep one per isolate, in module scope).
   *
   * @throws {RangeError} when `ttlMs` is not a positive number.
   */
  constructor(options: EdgeCacheOptions = {}) {
    this.ttlMs = options.ttlMs ?? DEFAULT_EDGE_TTL_MS;
    if (!(this.ttlMs > 0)) {
      throw new RangeError(
        `ttlMs must be a positive number of ms, got ${this.ttlMs}`,
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
    const kept = this.#lists.get(name);
    if (kept === undefined) return undefined;
    // A failure since the list was read: the registry may know better.
    // (One it already knew of does not count: the list read after it is as
    // fresh as the registry can make it; the ejection skips that server.)
    const failed = kept.result.endpoints.some((endpoint) => {
      const at = this.health.of(endpoint.url).lastFailureAt;
      return at !== null && at >= kept.at;
    });
    if (failed || this.#now() - kept.at >= this.ttlMs) return undefined;
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
}
