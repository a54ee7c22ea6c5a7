/**
 * A client's local view of which servers serve a name: filled by a lookup,
 * kept current by a registry watch (new servers join, dead ones leave,
 * draining and unhealthy ones stop being picked, within one watch round
 * trip and without polling), combined with what the client itself sees of
 * each server (its {@link HealthBook}: suspect, ejected as an outlier,
 * re-admitted after a probe).
 *
 * Each endpoint is in one state, with a reason: `serving`, `suspect` (a
 * recent failure), `ejected` (by this client as an outlier, or unhealthy
 * in the registry), `draining` (its server is shutting down), `removed`
 * (its lease is gone or it was unbound).
 *
 * @module
 */

import {
  type Attributes,
  type DeleteReason,
  type Endpoint,
  type EndpointLoad,
  type LookupResult,
  matchesQuery,
  parseName,
} from "../../protocol/registry.ts";
import type { Candidate } from "../distributors/distributor.ts";
import { HealthBook } from "./endpoint_health.ts";
import type { WatchUpdate } from "../registry_client/watch.ts";

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
    onLoads?: (loads: EndpointLoad[]) => void,
  ): { close(): void };
}

/** Settings of a {@link ClusterMap}. */
export interface ClusterMapOptions {
  /**
   * When fewer than this share of the registry's serving endpoints are in
   * play (the others ejected by this client), all of them are used again
   * (Envoy's panic threshold). Off by default: an ejected endpoint is
   * picked only when none is in play, since Rafter ejects on evidence (a
   * refused connection, failed attempts) and probes back in, and a dead
   * endpoint picked costs every call that lands on it an attempt (with
   * 6 dead of 9, most calls). A share such as 0.5 suits servers ejected
   * for slowness that would overload the rest.
   * @default 0
   */
  panicThreshold?: number;
  /** Clock in ms. @default Date.now */
  now?: () => number;
}

/** What {@link ClusterMap} needs from its client. */
export interface ClusterMapContext {
  /** The client's records of every server. */
  health: HealthBook;
  /** Whether an endpoint is local to the client (same zone or host). */
  isLocal?(endpoint: Endpoint): boolean;
  /**
   * Probes an ejected endpoint (e.g. with `rpc.ping`); resolves whether it
   * answered. Without it, an ejection just ends with its time.
   */
  probe?(url: string): Promise<boolean>;
  /** The endpoint at `url` left the map or is draining: finish and close its connections. */
  onLeave?(url: string): void;
}

/** An endpoint's state as the map sees it, with why. */
export type EndpointPhase =
  | "serving"
  | "suspect"
  | "ejected"
  | "draining"
  | "removed";

/** One endpoint's state, for diagnostics. */
export interface EndpointStatus {
  /** Instance id. */
  id: string;
  /** URL. */
  url: string;
  /** The combined state. */
  state: EndpointPhase;
  /** Why it is not serving, or null. */
  reason: string | null;
}

const REMOVED_KEPT_MS = 30_000;

/**
 * The cluster map of one name. Lookups are shared: concurrent callers of
 * {@link endpoints} wait on one registry request.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ClusterMap } from "./cluster_map.ts";
 * import { HealthBook } from "./endpoint_health.ts";
 * import { makeEndpoint } from "../../protocol/registry.ts";
 * const endpoint = (id: string, port: number) =>
 *   makeEndpoint({ id, url: `tcp://127.0.0.1:${port}` });
 * const health = new HealthBook();
 * const map = new ClusterMap("hello", {
 *   lookup: async () => ({
 *     name: "hello", query: {}, revision: 2,
 *     endpoints: [endpoint("a", 9001), endpoint("b", 9002)], total: 2,
 *   }),
 * }, { health });
 * assert.deepEqual((await map.endpoints()).map((e) => e.id), ["a", "b"]);
 * health.of("tcp://127.0.0.1:9001").failed("refused");
 * assert.deepEqual((await map.endpoints()).map((e) => e.id), ["b"]);
 * ```
 */
export class ClusterMap {
  /** The base name this map follows. */
  readonly name: string;
  /** The attributes its endpoints must match (from the name's query). */
  readonly query: Attributes;
  readonly #source: ClusterMapSource;
  readonly #context: ClusterMapContext;
  readonly #panicThreshold: number;
  readonly #now: () => number;
  /** Every endpoint the registry lists, by id, in binding order. */
  #all = new Map<string, Endpoint>();
  /** Endpoints the registry removed lately, for {@link states}. */
  readonly #removed = new Map<
    string,
    { endpoint: Endpoint; at: number; reason: DeleteReason | "not listed" }
  >();
  #revision = 0;
  #updatedAt: number | null = null;
  #pending: Promise<void> | null = null;
  #watch: { close(): void } | null = null;
  readonly #candidateOf = new WeakMap<Endpoint, Candidate>();
  /** This client's calls under way on a record's endpoint when its load arrived. */
  readonly #inFlightAtLoad = new WeakMap<Endpoint, number>();
  #closed = false;
  /** Bumped whenever {@link #all} changes. */
  #version = 0;
  /** Which endpoints are in play, kept while the map and the health book are unchanged. */
  #inPlay: InPlay | null = null;

  /**
   * Makes an empty map; the first {@link endpoints} call fills it and
   * starts the watch.
   *
   * @param name the service name (a query string filters: `db?version=1`).
   * @param source lookups and the watch; a failing lookup's error reaches
   * the caller of {@link endpoints} when nothing is in play.
   * @param context the client's health records and hooks.
   * @throws {TypeError} when the name or its query is malformed.
   */
  constructor(
    name: string,
    source: ClusterMapSource,
    context: ClusterMapContext = { health: new HealthBook() },
    options: ClusterMapOptions = {},
  ) {
    const { base, query } = parseName(name);
    this.name = base;
    this.query = query;
    this.#source = source;
    this.#context = context;
    this.#panicThreshold = options.panicThreshold ?? 0;
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

  /** Whether a registry watch keeps the map current (after the first lookup, if the source can watch). */
  get watched(): boolean {
    return this.#watch !== null;
  }

  /** Every endpoint the registry lists, whatever its state (no lookup). */
  get all(): readonly Endpoint[] {
    return [...this.#all.values()];
  }

  /**
   * The endpoints in play now (no lookup), with this client's stats:
   * those serving in the registry and not ejected by this client; all the
   * registry's serving ones when none of them is left (or fewer than
   * `panicThreshold`, if set); the draining ones when none serves (they
   * still answer). An ejected endpoint whose time is up is probed (once
   * at a time).
   */
  candidates(): readonly Candidate[] {
    const view = this.#view();
    for (const url of view.ejected) {
      if (this.#context.health.of(url).probeDue()) this.#probe(url);
    }
    return view.candidates;
  }

  /**
   * Which endpoints are in play: recomputed only when the map or a health
   * record's state changed since the last time (not per call: with
   * thousands of endpoints a call must not walk them all).
   */
  #view(): InPlay {
    const { health } = this.#context;
    const cached = this.#inPlay;
    if (
      cached !== null && cached.version === this.#version &&
      cached.changes === health.changes
    ) {
      return cached;
    }
    const inPlay: Candidate[] = [];
    const ejected: string[] = [];
    let serving = 0;
    for (const endpoint of this.#all.values()) {
      if (endpoint.state !== "serving") continue;
      serving++;
      if (health.of(endpoint.url).state === "ejected") {
        ejected.push(endpoint.url);
      } else inPlay.push(this.#candidate(endpoint));
    }
    let candidates: Candidate[] = inPlay;
    if (inPlay.length === 0 || inPlay.length < this.#panicThreshold * serving) {
      // None serving: the draining ones (they still answer). All (or,
      // with a panic threshold, too many) ejected: every serving one.
      const wanted = serving === 0 ? "draining" : "serving";
      candidates = [];
      for (const endpoint of this.#all.values()) {
        if (endpoint.state === wanted) {
          candidates.push(this.#candidate(endpoint));
        }
      }
    }
    const view: InPlay = {
      version: this.#version,
      changes: health.changes,
      candidates,
      healthy: inPlay.length,
      serving,
      ejected,
    };
    this.#inPlay = view;
    return view;
  }

  /**
   * How many endpoints the registry lists as serving (whatever this
   * client thinks of them), from the cached view: no walk of the map.
   */
  get servingCount(): number {
    return this.#view().serving;
  }

  /**
   * Whether {@link endpoints} would look the name up before answering:
   * never looked up yet, or no serving endpoint this client trusts.
   */
  needsLookup(): boolean {
    return this.#updatedAt === null || this.#view().healthy === 0;
  }

  /** Every endpoint's state with why, the recently removed included. */
  states(): EndpointStatus[] {
    const now = this.#now();
    const result: EndpointStatus[] = [];
    for (const endpoint of this.#all.values()) {
      const health = this.#context.health.of(endpoint.url);
      if (endpoint.state === "draining") {
        result.push({
          ...ids(endpoint),
          state: "draining",
          reason: "its server is shutting down",
        });
      } else if (endpoint.state === "unhealthy") {
        result.push({
          ...ids(endpoint),
          state: "ejected",
          reason: "its registry health check fails",
        });
      } else {
        result.push({
          ...ids(endpoint),
          state: health.state,
          reason: health.reason,
        });
      }
    }
    for (const [id, removed] of this.#removed) {
      if (now - removed.at > REMOVED_KEPT_MS) {
        this.#removed.delete(id);
      } else if (!this.#all.has(id)) {
        result.push({
          ...ids(removed.endpoint),
          state: "removed",
          reason: removed.reason === "leaseExpired"
            ? "its lease expired"
            : removed.reason === "leaseRevoked"
            ? "its lease was revoked"
            : removed.reason === "unbound"
            ? "it was unbound"
            : "the registry no longer lists it",
        });
      }
    }
    return result;
  }

  /**
   * The endpoints to choose from ({@link candidates}). The first call, and
   * any call while none is in play (or every one in play failed lately),
   * looks the name up first.
   *
   * @throws whatever the lookup throws, when none is in play after it.
   */
  async endpoints(): Promise<readonly Candidate[]> {
    if (this.needsLookup()) {
      // Empty, or every serving endpoint failed lately: the registry may
      // know of another by now (a watch event may still be on its way).
      try {
        await this.refresh();
      } catch (error) {
        if (this.candidates().length === 0) throw error;
      }
    }
    return this.candidates();
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
        this.#replace(
          result.endpoints.filter((e) => matchesQuery(e.attrs, this.query)),
          "not listed",
        );
        this.#revision = result.revision;
        this.#updatedAt = this.#now();
      }
      this.#startWatch();
    }).finally(() => {
      this.#pending = null;
    });
    this.#pending = pending;
    return pending;
  }

  /** Stops the watch. The map keeps what it knows and can still look up. */
  close(): void {
    this.#closed = true;
    this.#watch?.close();
    this.#watch = null;
  }

  /**
   * The candidate of an endpoint record, made once per record (a registry
   * update brings a new one): its stats are the live health record.
   */
  #candidate(endpoint: Endpoint): Candidate {
    let candidate = this.#candidateOf.get(endpoint);
    if (candidate === undefined) {
      candidate = {
        ...endpoint,
        stats: this.#context.health.of(endpoint.url),
        local: this.#context.isLocal?.(endpoint) ?? false,
        inFlightAtLoad: this.#inFlightAtLoad.get(endpoint) ?? 0,
      };
      this.#candidateOf.set(endpoint, candidate);
    }
    return candidate;
  }

  /** Probes an ejected endpoint whose time is up (the caller checked `probeDue`). */
  #probe(url: string): void {
    const health = this.#context.health.of(url);
    const probe = this.#context.probe;
    if (probe === undefined) {
      // No way to probe: the ejection simply ends.
      health.probeStarted();
      health.probeEnded(true);
      return;
    }
    health.probeStarted();
    probe(url).then(
      (passed) => health.probeEnded(passed),
      () => health.probeEnded(false),
    );
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
      (loads) => this.#applyLoads(loads),
    );
  }

  #apply(update: WatchUpdate): void {
    if (update.kind === "reset") {
      const listed = update.names.find((n) => n.name === this.name);
      const endpoints = (listed?.endpoints ?? []).filter((e) =>
        matchesQuery(e.attrs, this.query)
      );
      this.#revision = Math.max(this.#revision, update.revision);
      if (!this.#confirmEmpty(endpoints)) {
        this.#replace(endpoints, "not listed");
      }
      this.#updatedAt = this.#now();
      return;
    }
    const next = new Map(this.#all);
    const reasons = new Map<string, DeleteReason>();
    let touched = false;
    for (const event of update.events) {
      if (event.name !== this.name) continue;
      touched = true;
      if (
        event.type === "put" && matchesQuery(event.endpoint.attrs, this.query)
      ) {
        next.set(event.endpoint.id, event.endpoint);
      } else {
        next.delete(event.endpoint.id);
        reasons.set(event.endpoint.id, event.reason ?? "unbound");
      }
    }
    this.#revision = Math.max(this.#revision, update.revision);
    if (!touched) return;
    if (this.#confirmEmpty([...next.values()])) return;
    this.#commit(next, (id) => reasons.get(id) ?? "unbound");
    this.#updatedAt = this.#now();
  }

  /**
   * Servers reported new loads (the watch's `onLoads`): their
   * endpoints' records get them, nothing else changes.
   */
  #applyLoads(loads: readonly EndpointLoad[]): void {
    let next: Map<string, Endpoint> | null = null;
    for (const { name, id, load } of loads) {
      if (name !== this.name) continue;
      const current = (next ?? this.#all).get(id);
      if (current === undefined || current.load === load) continue;
      next ??= new Map(this.#all);
      const record = { ...current, load };
      this.#noteLoad(record, undefined);
      next.set(id, record);
    }
    if (next === null) return;
    this.#all = next;
    this.#version++;
  }

  /**
   * Notes this client's calls under way on a new record's endpoint, as of
   * its load: now, unless the record before it had the same load.
   */
  #noteLoad(record: Endpoint, before: Endpoint | undefined): void {
    if (record.load === null) return;
    const kept = before !== undefined && before.url === record.url &&
        before.load === record.load
      ? this.#inFlightAtLoad.get(before)
      : undefined;
    this.#inFlightAtLoad.set(
      record,
      kept ?? this.#context.health.of(record.url).inFlight,
    );
  }

  /**
   * A watch would empty a map that has endpoints: keep them until a
   * lookup confirms it (a registry that lost its data, or a bad push, must
   * not cut off every working server).
   * @returns true when the change is held back for the lookup.
   */
  #confirmEmpty(endpoints: readonly Endpoint[]): boolean {
    if (endpoints.length > 0 || this.#all.size === 0) return false;
    this.refresh().catch(() => {
      // The map keeps what it has; the next call looks up again.
    });
    return true;
  }

  #replace(
    endpoints: readonly Endpoint[],
    reason: DeleteReason | "not listed",
  ): void {
    this.#commit(new Map(endpoints.map((e) => [e.id, e])), () => reason);
  }

  #commit(
    next: Map<string, Endpoint>,
    reasonOf: (id: string) => DeleteReason | "not listed",
  ): void {
    const now = this.#now();
    for (const [id, endpoint] of this.#all) {
      const after = next.get(id);
      if (after === undefined) {
        this.#removed.set(id, { endpoint, at: now, reason: reasonOf(id) });
      }
      // A new instance at the same URL (a server restarted there took
      // its binding over, with a new lease): what this client learnt of
      // the old one (failures, an ejection, a connection in back-off) is
      // not about it.
      const restarted = after !== undefined && after.url === endpoint.url &&
        after.createRevision !== endpoint.createRevision;
      if (restarted) this.#context.health.forget(endpoint.url);
      if (
        after === undefined || after.url !== endpoint.url || restarted ||
        (after.state === "draining" && endpoint.state !== "draining")
      ) {
        this.#context.onLeave?.(endpoint.url);
      }
    }
    for (const [id, record] of next) {
      const before = this.#all.get(id);
      if (record !== before) this.#noteLoad(record, before);
    }
    this.#all = next;
    this.#version++;
  }
}

/** {@link ClusterMap}'s view of which endpoints are in play. */
interface InPlay {
  /** The map's version it was computed at. */
  version: number;
  /** The health book's changes it was computed at. */
  changes: number;
  /** What {@link ClusterMap.candidates} returns. */
  candidates: readonly Candidate[];
  /** Serving endpoints this client has not ejected. */
  healthy: number;
  /** Endpoints the registry lists as serving (ejected ones included). */
  serving: number;
  /** URLs of serving endpoints this client ejected (probed when due). */
  ejected: readonly string[];
}

function ids(endpoint: Endpoint): { id: string; url: string } {
  return { id: endpoint.id, url: endpoint.url };
}
