/**
 * A client's local view of which servers serve a name: filled by a lookup,
 * then kept current by a registry watch (new servers join, dead ones leave,
 * draining and unhealthy ones stop being picked, within one watch round
 * trip and without polling), and pruned when a call to a server fails.
 *
 * @module
 */

import {
  type Attributes,
  type Endpoint,
  type LookupResult,
  matchesQuery,
  parseName,
} from "../registry/protocol.ts";
import type { WatchUpdate } from "./watch.ts";

/** Where a {@link ClusterMap} learns its endpoints. */
export interface ClusterMapSource {
  /** Reads the name's endpoints (linearizable, not rotated). */
  lookup(): Promise<LookupResult>;
  /**
   * Follows changes of the name from `fromRevision` on; omit it for a map
   * that only looks up (e.g. in a runtime without background work).
   */
  watch?(
    fromRevision: number,
    onUpdate: (update: WatchUpdate) => void,
  ): { close(): void };
}

/** Settings of a {@link ClusterMap}. */
export interface ClusterMapOptions {
  /**
   * How long a server whose call failed stays out of the map even if the
   * registry still lists it, ms. @default 5_000
   */
  quarantineMs?: number;
  /** Clock in ms. @default Date.now */
  now?: () => number;
}

/**
 * The cluster map of one name. Lookups are shared: concurrent callers of
 * {@link endpoints} wait on one registry request.
 *
 * @example
 * ```ts
 * import { ClusterMap } from "./cluster_map.ts";
 * import { makeEndpoint } from "../registry/protocol.ts";
 * const endpoint = (id: string, port: number) =>
 *   makeEndpoint({ id, url: `tcp://127.0.0.1:${port}` });
 * const map = new ClusterMap("hello", {
 *   lookup: async () => ({
 *     name: "hello", query: {}, revision: 2,
 *     endpoints: [endpoint("a", 9001), endpoint("b", 9002)],
 *   }),
 * });
 * const endpoints = await map.endpoints();
 * map.evict(endpoints[0]);
 * console.log((await map.endpoints()).map((e) => e.id)); // ["b"]
 * ```
 */
export class ClusterMap {
  /** The base name this map follows. */
  readonly name: string;
  /** The attributes its endpoints must match (from the name's query). */
  readonly query: Attributes;
  readonly #source: ClusterMapSource;
  readonly #quarantineMs: number;
  readonly #now: () => number;
  /** Every endpoint the registry lists, by id, in binding order. */
  #all = new Map<string, Endpoint>();
  #usable: Endpoint[] | null = null;
  #usableUntil = Infinity;
  /** Endpoint key (id and URL) → time (ms) until which it stays out. */
  readonly #quarantine = new Map<string, number>();
  #revision = 0;
  #updatedAt: number | null = null;
  #pending: Promise<void> | null = null;
  #watch: { close(): void } | null = null;
  #closed = false;

  /**
   * Makes an empty map; the first {@link endpoints} call fills it and
   * starts the watch.
   *
   * @param name the service name (a query string filters: `db?version=1`).
   * @throws {TypeError} when the name or its query is malformed.
   * @param source lookups and the watch; a failing lookup's error reaches
   * the caller of {@link endpoints} when the map is empty.
   */
  constructor(
    name: string,
    source: ClusterMapSource,
    options: ClusterMapOptions = {},
  ) {
    const { base, query } = parseName(name);
    this.name = base;
    this.query = query;
    this.#source = source;
    this.#quarantineMs = options.quarantineMs ?? 5_000;
    this.#now = options.now ?? Date.now;
  }

  /** The registry revision the map reflects (0 before the first lookup). */
  get revision(): number {
    return this.#revision;
  }

  /** When the map last changed from the registry (ms), or null before the first lookup. */
  get updatedAt(): number | null {
    return this.#updatedAt;
  }

  /** Every endpoint the registry lists, whatever its state (no lookup). */
  get all(): readonly Endpoint[] {
    return [...this.#all.values()];
  }

  /**
   * The endpoints to choose from now (no lookup): those serving and not
   * quarantined; when every serving one is quarantined, all serving ones (a
   * retry beats giving up); when none serves, the draining ones (they still
   * answer).
   */
  get current(): readonly Endpoint[] {
    const now = this.#now();
    if (this.#usable !== null && now < this.#usableUntil) return this.#usable;
    for (const [key, until] of this.#quarantine) {
      if (until <= now) this.#quarantine.delete(key);
    }
    const all = [...this.#all.values()];
    const serving = all.filter((e) => e.state === "serving");
    const healthy = serving.filter((e) => !this.#quarantine.has(keyOf(e)));
    this.#usable = healthy.length > 0
      ? healthy
      : serving.length > 0
      ? serving
      : all.filter((e) => e.state === "draining");
    // Recompute once the first quarantine runs out.
    this.#usableUntil = Math.min(Infinity, ...this.#quarantine.values());
    return this.#usable;
  }

  /**
   * The endpoints to choose from. The first call, and any call while no
   * serving endpoint is left that did not fail lately, looks the name up
   * first.
   *
   * @throws whatever the lookup throws, when the map is empty.
   */
  async endpoints(): Promise<readonly Endpoint[]> {
    if (this.#updatedAt === null || this.#healthy() === 0) {
      // Empty, or every serving endpoint failed lately: the registry may
      // know of another by now (a watch event may still be on its way).
      await this.refresh();
    }
    return this.current;
  }

  /** How many serving endpoints are not quarantined. */
  #healthy(): number {
    const now = this.#now();
    let count = 0;
    for (const endpoint of this.#all.values()) {
      if (endpoint.state !== "serving") continue;
      const until = this.#quarantine.get(keyOf(endpoint));
      if (until === undefined || until <= now) count++;
    }
    return count;
  }

  /**
   * Looks the name up now (joining a lookup already under way) and replaces
   * the map with the result, unless a watch already brought it further;
   * then starts the watch if it is not running.
   */
  refresh(): Promise<void> {
    if (this.#pending !== null) return this.#pending;
    const pending = this.#source.lookup().then((result) => {
      if (result.revision >= this.#revision || this.#watch === null) {
        this.#all = new Map(result.endpoints.map((e) => [e.id, e]));
        this.#revision = result.revision;
        this.#changed();
      }
      this.#startWatch();
    }).finally(() => {
      this.#pending = null;
    });
    this.#pending = pending;
    return pending;
  }

  /** Removes a failed server from the choice and quarantines it. */
  evict(endpoint: Endpoint): void {
    this.#quarantine.set(keyOf(endpoint), this.#now() + this.#quarantineMs);
    this.#usable = null;
  }

  /** Stops the watch. The map keeps what it knows and can still look up. */
  close(): void {
    this.#closed = true;
    this.#watch?.close();
    this.#watch = null;
  }

  #startWatch(): void {
    if (
      this.#closed || this.#watch !== null || this.#source.watch === undefined
    ) {
      return;
    }
    this.#watch = this.#source.watch(
      this.#revision + 1,
      (update) => this.#apply(update),
    );
  }

  #apply(update: WatchUpdate): void {
    if (update.kind === "reset") {
      const listed = update.names.find((n) => n.name === this.name);
      this.#all = new Map(
        (listed?.endpoints ?? []).filter((e) =>
          matchesQuery(e.attrs, this.query)
        )
          .map((e) => [e.id, e]),
      );
    } else {
      let touched = false;
      for (const event of update.events) {
        if (event.name !== this.name) continue;
        touched = true;
        if (
          event.type === "put" && matchesQuery(event.endpoint.attrs, this.query)
        ) {
          this.#all.set(event.endpoint.id, event.endpoint);
        } else {
          this.#all.delete(event.endpoint.id);
        }
      }
      if (!touched) {
        this.#revision = Math.max(this.#revision, update.revision);
        return;
      }
    }
    this.#revision = Math.max(this.#revision, update.revision);
    this.#changed();
  }

  #changed(): void {
    this.#usable = null;
    this.#updatedAt = this.#now();
  }
}

/**
 * Quarantine goes by id and URL: a server that binds the same id again at
 * a new address is a new server.
 */
function keyOf(endpoint: Endpoint): string {
  return `${endpoint.id} ${endpoint.url}`;
}
