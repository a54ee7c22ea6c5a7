/**
 * The watches open on one registry node. Each watch is a cursor into the
 * state's history window: events go out as JSON-RPC notifications on the
 * watcher's own connection, in revision order, each revision whole, none
 * lost and none repeated; a watch that starts in the past first replays the
 * history, then follows live changes.
 *
 * A slow reader cannot make the node buffer without bound: while the
 * connection has more than `backlogBytes` unsent, nothing more is queued
 * for it (its cursor waits in the shared history); if that lasts
 * `stallMs`, or the history it still needs is dropped, the watch is
 * cancelled with a {@link WATCH_CANCELLED} notification carrying the
 * revision to resume from.
 *
 * @module
 */

import {
  INVALID_PARAMS,
  LIMIT_EXCEEDED,
  type LimitExceededData,
  RpcError,
} from "../rpc/errors.ts";
import type { RpcSession } from "../rpc/server/server_connection.ts";
import {
  COMPACTED,
  type CompactedData,
  type EndpointLoad,
  WATCH_CANCELLED,
  WATCH_CANCELLED_NOTIFICATION,
  WATCH_EVENTS_NOTIFICATION,
  WATCH_LOADS_NOTIFICATION,
  type WatchCancelledNotification,
  type WatchEvent,
  type WatchEventsNotification,
  type WatchLoadsNotification,
  type WatchResult,
} from "../protocol/registry.ts";
import type { HistoryItem } from "./state.ts";

/** What a {@link WatchHub} reads: the node's replicated state. */
export interface WatchSource {
  /** Current revision. */
  readonly revision: number;
  /** Oldest revision whose events are held. */
  readonly compactRevision: number;
  /** Held events from `fromRevision` under `prefix`, or null when compacted. */
  eventsFrom(fromRevision: number, prefix: string): HistoryItem[] | null;
}

/** Settings of a {@link WatchHub}. */
export interface WatchHubOptions {
  /**
   * Unsent bytes on a watcher's connection above which nothing more is
   * queued for it. @default 1_048_576 (1 MiB)
   */
  backlogBytes?: number;
  /**
   * How long a watcher may stay above `backlogBytes` before its watch is
   * cancelled, ms. @default 5_000
   */
  stallMs?: number;
  /**
   * How often a watcher whose prefix saw no change is told the revision it
   * has caught up to (an empty events notification), ms; 0 turns it off.
   * @default 1_000
   */
  progressIntervalMs?: number;
  /**
   * Most watches on one connection (LIMIT_EXCEEDED beyond, naming
   * `maxWatchesPerConnection`). @default 1_000
   */
  maxWatchesPerSession?: number;
  /** Most watches on the node (LIMIT_EXCEEDED beyond). @default 100_000 */
  maxWatches?: number;
  /**
   * Most events in one notification (a revision with more is still sent
   * whole). @default 1_000
   */
  maxEventsPerNotification?: number;
  /**
   * Monotonic clock, ms (how long a watcher has been stalled must not move
   * when the wall clock jumps). @default performance.now
   */
  now?: () => number;
  /**
   * The load last reported on a lease on this node, or null: put events
   * go out with their endpoint's current load (the history holds none,
   * loads not being replicated through the log). Default: none (null).
   */
  loadOf?: (leaseId: string) => number | null;
}

interface Watcher {
  readonly session: RpcSession;
  readonly watchId: string;
  readonly prefix: string;
  /** Whether it asked for load changes (`loads: true`). */
  readonly loads: boolean;
  /** What the watcher may see of a batch, or null: it may see nothing any more. */
  readonly view: WatchView | undefined;
  /** Next revision to deliver. */
  next: number;
  /** Highest revision the client was told it has seen. */
  told: number;
  stalledSince: number | null;
  retry: ReturnType<typeof setTimeout> | undefined;
  cancelled: boolean;
}

/**
 * What one watcher may see of the events of a delivery (lease ids hidden,
 * say), or null when it may see nothing any more (its token was revoked):
 * the watch is then cancelled.
 */
export type WatchView = (events: WatchEvent[]) => WatchEvent[] | null;

const WATCH_ID = /^[A-Za-z0-9_.:-]{1,64}$/;
const RETRY_MS = 20;

/**
 * Serves `registry.watch` and `registry.unwatch` for one node: call
 * {@link changed} after every applied change.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { serve } from "../adapter/deno/serve.ts";
 * import type { WatchEventsNotification, WatchParams } from "../protocol/registry.ts";
 * import { dial } from "../rpc/transport/dial.ts";
 * import { encodeCommand, RegistryState } from "./state.ts";
 * import { WatchHub } from "./watch_hub.ts";
 * const state = new RegistryState();
 * const hub = new WatchHub(state);
 * const server = serve({
 *   methods: (session) => ({
 *     "registry.watch": (params: WatchParams) => hub.watch(session, params),
 *   }),
 * });
 * const notified = Promise.withResolvers<unknown>();
 * const connection = await dial(server.url, {
 *   onNotification: (_method, params) => notified.resolve(params),
 * });
 * await connection.call("registry.watch", { prefix: "hello", watchId: "w1" });
 * state.apply(encodeCommand({
 *   op: "bind", name: "hello", endpoint: { id: "h1", url: "tcp://127.0.0.1:9001" },
 * }));
 * hub.changed(); // after each applied entry
 * const { watchId, revision, events } = await notified.promise as WatchEventsNotification;
 * assert.deepEqual([watchId, revision], ["w1", 1]);
 * assert.deepEqual(events.map((event) => [event.type, event.endpoint.id]), [["put", "h1"]]);
 * hub.close();
 * connection.close();
 * await server.close();
 * ```
 */
export class WatchHub {
  readonly #source: WatchSource;
  readonly #backlogBytes: number;
  readonly #stallMs: number;
  readonly #maxPerSession: number;
  readonly #maxWatches: number;
  readonly #maxEvents: number;
  readonly #now: () => number;
  readonly #loadOf: ((leaseId: string) => number | null) | undefined;
  readonly #sessions = new Map<number, Map<string, Watcher>>();
  readonly #progress: ReturnType<typeof setInterval> | undefined;
  #count = 0;
  #nextId = 1;
  #closed = false;

  /**
   * Starts the hub (and its progress timer, if enabled).
   *
   * @param source the node's state.
   */
  constructor(source: WatchSource, options: WatchHubOptions = {}) {
    this.#source = source;
    this.#backlogBytes = options.backlogBytes ?? 1_048_576;
    this.#stallMs = options.stallMs ?? 5_000;
    this.#maxPerSession = options.maxWatchesPerSession ?? 1_000;
    this.#maxWatches = options.maxWatches ?? 100_000;
    this.#maxEvents = options.maxEventsPerNotification ?? 1_000;
    this.#now = options.now ?? (() => performance.now());
    this.#loadOf = options.loadOf;
    const progressMs = options.progressIntervalMs ?? 1_000;
    if (progressMs > 0) {
      this.#progress = setInterval(() => this.#tellProgress(), progressMs);
    }
  }

  /** How many watches are open. */
  get count(): number {
    return this.#count;
  }

  /**
   * Opens a watch for `session`. Events from `fromRevision` on (or after the
   * current revision) follow as notifications once the response is sent.
   *
   * @throws {RpcError} COMPACTED (-32008, data {@link CompactedData}) when
   * `fromRevision` is older than the history window; INVALID_PARAMS when
   * the watch id is malformed or in use on this connection; LIMIT_EXCEEDED
   * (-32014, data `{ limit, value }`) when the connection or node has too
   * many watches.
   */
  watch(
    session: RpcSession,
    params: {
      prefix: string;
      fromRevision?: number;
      watchId?: string;
      loads?: boolean;
    },
    view?: WatchView,
  ): WatchResult {
    if (this.#closed) {
      throw new RpcError(
        WATCH_CANCELLED,
        "Watch cancelled: this registry node is shutting down; watch through another node",
      );
    }
    const revision = this.#source.revision;
    const compactRevision = this.#source.compactRevision;
    if (
      params.fromRevision !== undefined && params.fromRevision < compactRevision
    ) {
      const data: CompactedData = { compactRevision, revision };
      throw new RpcError(
        COMPACTED,
        `Compacted: revision ${params.fromRevision} is older than this node's history, which starts at revision ${compactRevision}; list the prefix (registry.list) and watch from the listed revision + 1`,
        data,
      );
    }
    let watchers = this.#sessions.get(session.id);
    const watchId = params.watchId ?? `w${this.#nextId++}`;
    if (!WATCH_ID.test(watchId)) {
      throw new RpcError(
        INVALID_PARAMS,
        'Invalid params: "watchId" must be 1..64 characters of A-Z a-z 0-9 _ . : -',
      );
    }
    if (watchers?.has(watchId)) {
      throw new RpcError(
        INVALID_PARAMS,
        `Invalid params: watch ${
          JSON.stringify(watchId)
        } is already open on this connection; pick another watchId`,
      );
    }
    if ((watchers?.size ?? 0) >= this.#maxPerSession) {
      throw limitExceeded(
        `Limit exceeded: this connection has ${this.#maxPerSession} watches open, the most a registry node allows one connection (maxWatchesPerConnection, --max-watches-per-connection); unwatch some, watch a wider prefix, or open another connection`,
        "maxWatchesPerConnection",
        this.#maxPerSession,
      );
    }
    if (this.#count >= this.#maxWatches) {
      throw limitExceeded(
        `Limit exceeded: this node serves ${this.#maxWatches} watches, the most allowed (maxWatches); watch through another node`,
        "maxWatches",
        this.#maxWatches,
      );
    }
    if (watchers === undefined) {
      watchers = new Map();
      this.#sessions.set(session.id, watchers);
      session.signal.addEventListener("abort", () => this.#drop(session), {
        once: true,
      });
    }
    const next = params.fromRevision ?? revision + 1;
    const watcher: Watcher = {
      session,
      watchId,
      prefix: params.prefix,
      loads: params.loads ?? false,
      view,
      next,
      told: next - 1,
      stalledSince: null,
      retry: undefined,
      cancelled: false,
    };
    watchers.set(watchId, watcher);
    this.#count++;
    // After the response: the response is queued within this turn's
    // microtasks, a timer runs after them.
    watcher.retry = setTimeout(() => {
      watcher.retry = undefined;
      this.#pump(watcher);
    }, 0);
    return { watchId, revision, compactRevision };
  }

  /** Closes a watch of `session`. @returns whether it was open. */
  unwatch(session: RpcSession, watchId: string): boolean {
    const watcher = this.#sessions.get(session.id)?.get(watchId);
    if (watcher === undefined) return false;
    this.#remove(watcher);
    return true;
  }

  /**
   * The state changed: deliver what each watcher has not seen, and cancel
   * the watches whose view lets them see nothing any more (a token
   * revoked, even when no binding changed).
   */
  changed(): void {
    for (const watchers of [...this.#sessions.values()]) {
      for (const watcher of [...watchers.values()]) {
        if (watcher.view !== undefined && watcher.view([]) === null) {
          this.#send(watcher, watcher.told, []);
        } else if (watcher.retry === undefined) this.#pump(watcher);
      }
    }
  }

  /**
   * Loads changed on this node (keep-alives, a leader's sync): tell each
   * watcher that asked for loads those under its prefix, in one
   * {@link WATCH_LOADS_NOTIFICATION}. Volatile: a watcher whose connection
   * is backed up, or that may see nothing any more, gets none (a later
   * report supersedes it).
   */
  loadsChanged(loads: readonly EndpointLoad[]): void {
    if (loads.length === 0) return;
    for (const watchers of this.#sessions.values()) {
      for (const watcher of watchers.values()) {
        if (
          !watcher.loads || watcher.cancelled ||
          watcher.session.queuedBytes > this.#backlogBytes ||
          (watcher.view !== undefined && watcher.view([]) === null)
        ) {
          continue;
        }
        const mine = watcher.prefix === ""
          ? loads
          : loads.filter((l) => l.name.startsWith(watcher.prefix));
        if (mine.length === 0) continue;
        const params: WatchLoadsNotification = {
          watchId: watcher.watchId,
          loads: mine as EndpointLoad[],
        };
        watcher.session.notify(
          WATCH_LOADS_NOTIFICATION,
          params as unknown as Record<string, unknown>,
        );
      }
    }
  }

  /** Cancels every watch (the node is stopping) and stops the progress timer. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#progress);
    for (const watchers of [...this.#sessions.values()]) {
      for (const watcher of [...watchers.values()]) {
        this.#cancel(
          watcher,
          "Watch cancelled: this registry node is shutting down; watch through another node",
        );
      }
    }
  }

  #pump(watcher: Watcher): void {
    if (watcher.cancelled) return;
    if (watcher.next < this.#source.compactRevision) {
      this.#cancel(
        watcher,
        `Watch cancelled: the watcher fell behind this node's history (it needs revision ${watcher.next}, the oldest held is ${this.#source.compactRevision}); watch again from revision ${watcher.next} (a COMPACTED answer means: list, then watch)`,
      );
      return;
    }
    if (this.#throttled(watcher)) return;
    const items = this.#source.eventsFrom(watcher.next, watcher.prefix);
    if (items === null) return this.#pump(watcher);
    let batch: WatchEvent[] = [];
    let batchRevision = 0;
    const flush = () => {
      if (batch.length === 0) return;
      this.#send(watcher, batchRevision, batch);
      watcher.next = batchRevision + 1;
      batch = [];
    };
    for (const item of items) {
      if (watcher.cancelled) return;
      if (
        batch.length > 0 && batch.length + item.events.length > this.#maxEvents
      ) {
        flush();
        if (this.#throttled(watcher)) return;
      }
      batch.push(...item.events);
      batchRevision = item.revision;
    }
    flush();
    if (watcher.cancelled) return;
    // Revisions with no event under the prefix are seen too; a node behind
    // the client (resumed here from a node ahead) leaves `next` as it is.
    watcher.next = Math.max(watcher.next, this.#source.revision + 1);
  }

  /** Whether the watcher's connection is too backed up to queue more; schedules a retry. */
  #throttled(watcher: Watcher): boolean {
    if (watcher.session.queuedBytes <= this.#backlogBytes) {
      watcher.stalledSince = null;
      return false;
    }
    const now = this.#now();
    watcher.stalledSince ??= now;
    if (now - watcher.stalledSince >= this.#stallMs) {
      this.#cancel(
        watcher,
        `Watch cancelled: the watcher read too slowly (more than ${this.#backlogBytes} bytes unsent for ${this.#stallMs} ms); watch again from revision ${watcher.next} and read faster, or watch a narrower prefix`,
      );
      return true;
    }
    watcher.retry ??= setTimeout(() => {
      watcher.retry = undefined;
      this.#pump(watcher);
    }, RETRY_MS);
    return true;
  }

  #send(watcher: Watcher, revision: number, sent: WatchEvent[]): void {
    if (watcher.cancelled) return;
    const loaded = this.#withLoads(sent);
    const events = watcher.view === undefined ? loaded : watcher.view(loaded);
    if (events === null) {
      this.#cancel(
        watcher,
        `Watch cancelled: this connection's token no longer permits read on ${
          JSON.stringify(watcher.prefix)
        } (revoked, or auth was turned on); authenticate with a token that does and watch again from revision ${watcher.next}`,
      );
      return;
    }
    const params: WatchEventsNotification = {
      watchId: watcher.watchId,
      revision,
      events,
    };
    if (
      !watcher.session.notify(
        WATCH_EVENTS_NOTIFICATION,
        params as unknown as Record<string, unknown>,
      )
    ) {
      this.#drop(watcher.session);
      return;
    }
    watcher.told = revision;
  }

  /** Put events with their endpoint's current load (copies; the history is not touched). */
  #withLoads(events: WatchEvent[]): WatchEvent[] {
    const loadOf = this.#loadOf;
    if (loadOf === undefined) return events;
    return events.map((event) => {
      const leaseId = event.endpoint.leaseId;
      if (event.type !== "put" || leaseId === null) return event;
      const load = loadOf(leaseId);
      return load === event.endpoint.load
        ? event
        : { ...event, endpoint: { ...event.endpoint, load } };
    });
  }

  #tellProgress(): void {
    const current = this.#source.revision;
    for (const watchers of this.#sessions.values()) {
      for (const watcher of watchers.values()) {
        const seen = Math.min(watcher.next - 1, current);
        if (
          watcher.cancelled || watcher.retry !== undefined ||
          seen <= watcher.told ||
          watcher.session.queuedBytes > this.#backlogBytes
        ) {
          continue;
        }
        this.#send(watcher, seen, []);
      }
    }
  }

  #cancel(watcher: Watcher, message: string): void {
    const params: WatchCancelledNotification = {
      watchId: watcher.watchId,
      code: WATCH_CANCELLED,
      message,
      resumeRevision: watcher.next,
    };
    watcher.session.notify(
      WATCH_CANCELLED_NOTIFICATION,
      params as unknown as Record<string, unknown>,
    );
    this.#remove(watcher);
  }

  #remove(watcher: Watcher): void {
    if (watcher.cancelled) return;
    watcher.cancelled = true;
    clearTimeout(watcher.retry);
    watcher.retry = undefined;
    const watchers = this.#sessions.get(watcher.session.id);
    if (watchers?.get(watcher.watchId) === watcher) {
      watchers.delete(watcher.watchId);
      this.#count--;
    }
  }

  #drop(session: RpcSession): void {
    const watchers = this.#sessions.get(session.id);
    if (watchers === undefined) return;
    for (const watcher of [...watchers.values()]) this.#remove(watcher);
    this.#sessions.delete(session.id);
  }
}

function limitExceeded(
  message: string,
  limit: string,
  value: number,
): RpcError {
  const data: LimitExceededData = { limit, value };
  return new RpcError(LIMIT_EXCEEDED, message, data);
}
