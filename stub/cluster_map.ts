/**
 * A client's local view of which servers serve a name: filled from the
 * registry, pruned when a server fails, refreshed now and then.
 *
 * @module
 */

import type { Endpoint } from "../registry/types.ts";

/** Settings of a {@link ClusterMap}. */
export interface ClusterMapOptions {
  /**
   * Re-read the stubs list in the background once the last lookup is older
   * than this, ms, so new servers are found. Default 10_000.
   */
  refreshMs?: number;
  /**
   * How long an evicted server stays out of the map even if the registry
   * still lists it, ms. Default 5_000.
   */
  quarantineMs?: number;
  /** Clock in ms; default `Date.now` (tests pass their own). */
  now?: () => number;
}

/**
 * The cluster map of one name. Lookups are shared: concurrent callers of
 * {@link endpoints} wait on one registry request.
 *
 * @example
 * ```ts
 * import { ClusterMap } from "./cluster_map.ts";
 * const map = new ClusterMap(async () => [
 *   { id: "a", url: "tcp://127.0.0.1:9001" },
 *   { id: "b", url: "tcp://127.0.0.1:9002" },
 * ]);
 * const endpoints = await map.endpoints();
 * map.evict(endpoints[0]);
 * console.log((await map.endpoints()).map((e) => e.id)); // ["b"]
 * ```
 */
export class ClusterMap {
  readonly #lookup: () => Promise<Endpoint[]>;
  readonly #refreshMs: number;
  readonly #quarantineMs: number;
  readonly #now: () => number;
  #endpoints: Endpoint[] = [];
  /** Endpoint key (id and URL) → time (ms) until which it stays out. */
  readonly #quarantine = new Map<string, number>();
  #lookedUpAt = -Infinity;
  #pending: Promise<void> | null = null;

  /**
   * Makes an empty map; the first {@link endpoints} call fills it.
   *
   * @param lookup reads the name's current endpoints from the registry;
   * may throw (the error reaches the caller of {@link endpoints} when the
   * map is empty, and is ignored by background refreshes).
   */
  constructor(
    lookup: () => Promise<Endpoint[]>,
    options: ClusterMapOptions = {},
  ) {
    this.#lookup = lookup;
    this.#refreshMs = options.refreshMs ?? 10_000;
    this.#quarantineMs = options.quarantineMs ?? 5_000;
    this.#now = options.now ?? Date.now;
  }

  /** The endpoints currently in the map (no lookup). */
  get current(): readonly Endpoint[] {
    return this.#endpoints;
  }

  /**
   * The endpoints to choose from. An empty map is filled by a lookup first
   * (which may still come back empty); a stale one is refreshed in the
   * background while the current list is returned.
   *
   * @throws whatever the lookup throws, when the map is empty.
   */
  async endpoints(): Promise<readonly Endpoint[]> {
    if (this.#endpoints.length === 0) {
      await this.refresh();
    } else if (this.#now() - this.#lookedUpAt >= this.#refreshMs) {
      this.refresh().catch(() => {
        // A failed background refresh keeps the current map.
      });
    }
    return this.#endpoints;
  }

  /**
   * Looks the name up now (joining a lookup already under way) and replaces
   * the map with the result minus quarantined servers. When every server
   * the registry lists is quarantined, they all come back: a retry beats
   * giving up.
   */
  refresh(): Promise<void> {
    if (this.#pending !== null) return this.#pending;
    const pending = this.#lookup().then((endpoints) => {
      const now = this.#now();
      for (const [key, until] of this.#quarantine) {
        if (until <= now) this.#quarantine.delete(key);
      }
      const healthy = endpoints.filter((e) => !this.#quarantine.has(keyOf(e)));
      if (healthy.length === 0 && endpoints.length > 0) {
        this.#quarantine.clear();
        this.#endpoints = endpoints;
      } else {
        this.#endpoints = healthy;
      }
      this.#lookedUpAt = now;
    }).finally(() => {
      this.#pending = null;
    });
    this.#pending = pending;
    return pending;
  }

  /** Removes a failed server from the map and quarantines it. */
  evict(endpoint: Endpoint): void {
    const key = keyOf(endpoint);
    this.#endpoints = this.#endpoints.filter((e) => keyOf(e) !== key);
    this.#quarantine.set(keyOf(endpoint), this.#now() + this.#quarantineMs);
  }
}

/**
 * Quarantine goes by id and URL: a server that binds the same id again at
 * a new address is a new server.
 */
function keyOf(endpoint: Endpoint): string {
  return `${endpoint.id} ${endpoint.url}`;
}
