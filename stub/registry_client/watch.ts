/**
 * Watches of the registry that survive registry node failures: a
 * {@link WatchClient} keeps one connection to one registry node at a time
 * and carries every watch of its client over it. When the node goes away
 * (or cancels a watch), each watch resumes through the next node from the
 * revision after the last one it delivered, so no event is lost and none
 * is repeated; a watch whose revision the node no longer holds
 * (COMPACTED) lists its prefix again and carries on from the list's
 * revision.
 *
 * @module
 */

import type { RpcConnection } from "../../rpc/client/connection.ts";
import { dial } from "../../rpc/transport/dial.ts";
import type { Codec } from "../../rpc/codec/codec.ts";
import {
  INVALID_PARAMS,
  PERMISSION_DENIED,
  RpcError,
  UNAUTHENTICATED,
} from "../../rpc/errors.ts";
import { presentToken } from "../authenticate.ts";
import type { Params } from "../../rpc/message.ts";
import type { Dialer } from "../../rpc/transport/transport.ts";
import { abortableSleep, backoffDelay } from "../../internal/timing.ts";
import {
  COMPACTED,
  type EndpointLoad,
  type ListedName,
  REGISTRY_METHODS,
  WATCH_CANCELLED_NOTIFICATION,
  WATCH_EVENTS_NOTIFICATION,
  WATCH_LOADS_NOTIFICATION,
  type WatchCancelledNotification,
  type WatchEvent,
  type WatchEventsNotification,
  type WatchLoadsNotification,
  type WatchParams,
  type WatchResult,
} from "../../protocol/registry.ts";
import type { RegistryClient } from "./registry_client.ts";

/**
 * What a watch delivers: `events` (changes, in revision order, each
 * revision whole) or `reset` (the whole prefix as listed at `revision`:
 * replace what you knew; sent first when asked with `list: true`, and after
 * the watch fell out of a node's history). Load changes go to
 * {@link WatchOptions.onLoads} instead.
 */
export type WatchUpdate =
  | { kind: "events"; revision: number; events: WatchEvent[] }
  | { kind: "reset"; revision: number; names: ListedName[] };

/** Options of {@link WatchClient.watch}. */
export interface WatchOptions {
  /**
   * First revision to deliver (inclusive). Default: changes after the
   * revision current when the watch starts.
   */
  fromRevision?: number;
  /**
   * Start with a `reset` update listing the prefix (endpoints included),
   * then deliver changes after it. @default false
   */
  list?: boolean;
  /** Aborting it closes the watch. */
  signal?: AbortSignal;
  /**
   * Receives the loads servers report with their keep-alives, as they
   * change on the node (`registry.watch` with `loads: true`): between
   * revisions, with no revision of their own, never replayed. A registry
   * node too old to send them refuses the param; the watch then carries on
   * there without loads (lookups still return them). Default: no loads.
   */
  onLoads?: (loads: EndpointLoad[]) => void;
}

/** Settings of a {@link WatchClient}. */
export interface WatchClientOptions {
  /** Opens connections. Default: `defaultDialer()` (the runtime entries' `connect` pass theirs). */
  dialer?: Dialer;
  /** Time allowed to open a connection, ms. @default DEFAULT_CONNECT_TIMEOUT_MS (2_000) */
  connectTimeoutMs?: number;
  /** Wire codec of the watch connection (see `RpcConnectionOptions.codec`). @default "json" */
  codec?: Codec;
  /** Time allowed for a `registry.watch` call, ms. @default 4_000 */
  callTimeoutMs?: number;
  /** First reconnect delay after a failure, ms (jittered). @default 50 */
  minBackoffMs?: number;
  /** Longest reconnect delay, ms (jittered). @default 1_000 */
  maxBackoffMs?: number;
  /**
   * How often the watch connection is pinged, ms; a node that does not
   * answer within this long (stopped, partitioned) is left for the next
   * one. @default 1_000
   */
  pingIntervalMs?: number;
  /** Told of each connection failure and reconnect, for logs. */
  onReconnect?(url: string, error: unknown): void;
  /**
   * The registry token (see `RegistryClientOptions.token`): each watch
   * connection calls `registry.authenticate` with it before its first
   * watch. A refused token ends every watch with that error.
   */
  token?: string;
}

/**
 * One open watch: iterate it (`for await`), or pass `onUpdate`. Updates
 * the consumer has not taken yet are buffered in memory.
 */
export class RegistryWatch implements AsyncIterable<WatchUpdate> {
  /** The watched prefix. */
  readonly prefix: string;
  readonly #close: (watch: RegistryWatch) => void;
  readonly #queue: WatchUpdate[] = [];
  #waiter: (() => void) | null = null;
  #onUpdate: ((update: WatchUpdate) => void) | undefined;
  #closed = false;
  #error: RpcError | null = null;
  /** Next revision to deliver; null until the first node answered. */
  next: number | null;
  /** Whether the watch must list its prefix before watching again. */
  needsList: boolean;
  /** The id the watch has on the current connection. */
  watchId = "";
  /** Where its load changes go, if it asked for them. */
  readonly onLoads: ((loads: EndpointLoad[]) => void) | undefined;
  readonly #ended = Promise.withResolvers<void>();

  /** Use {@link WatchClient.watch}. */
  constructor(
    prefix: string,
    options: WatchOptions,
    close: (watch: RegistryWatch) => void,
    onUpdate?: (update: WatchUpdate) => void,
  ) {
    this.prefix = prefix;
    this.next = options.fromRevision ?? null;
    this.needsList = options.list ?? false;
    this.onLoads = options.onLoads;
    this.#close = close;
    this.#onUpdate = onUpdate;
  }

  /** The last revision delivered (0 before any). */
  get revision(): number {
    return this.next === null ? 0 : this.next - 1;
  }

  /** Whether {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Why the registry ended the watch (a refused token, a token without
   * `read` on the prefix), or null: an iteration throws it.
   */
  get error(): RpcError | null {
    return this.#error;
  }

  /** Ends the watch with `error` (used by the {@link WatchClient}). */
  fail(error: RpcError): void {
    if (this.#closed) return;
    this.#error = error;
    this.close();
  }

  /** Stops the watch; an iteration under way ends. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#close(this);
    this.#wake();
    this.#ended.resolve();
  }

  /** Resolves once the watch is closed (then {@link error} says why, if it failed). */
  get ended(): Promise<void> {
    return this.#ended.promise;
  }

  /** Delivers an update (used by the {@link WatchClient}). */
  deliver(update: WatchUpdate): void {
    if (this.#closed) return;
    if (this.#onUpdate !== undefined) {
      try {
        this.#onUpdate(update);
      } catch {
        // A failing callback must not stop the watch.
      }
      return;
    }
    this.#queue.push(update);
    this.#wake();
  }

  /** The updates, in order, until the watch is closed. */
  async *[Symbol.asyncIterator](): AsyncIterator<WatchUpdate> {
    try {
      while (!this.#closed) {
        const update = this.#queue.shift();
        if (update !== undefined) {
          yield update;
          continue;
        }
        await new Promise<void>((resolve) => this.#waiter = resolve);
      }
      if (this.#error !== null) throw this.#error;
    } finally {
      this.close();
    }
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.();
  }
}

/**
 * Carries the watches of one client to the registry, over one connection at
 * a time, moving to the next registry URL when a node fails.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ConnectionPool } from "../connection_pool.ts";
 * import { RegistryClient } from "./registry_client.ts";
 * import { WatchClient } from "./watch.ts";
 * import { startRegistryNode } from "../../registry/mod.ts";
 * // A one-node registry in this process (fast ticks, so it elects at once).
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 *   tickMs: 10,
 * });
 * const pool = new ConnectionPool();
 * const registry = new RegistryClient([node.url], pool);
 * const watches = new WatchClient(registry);
 * const kinds: string[] = [];
 * for await (const update of watches.watch("hello", { list: true })) {
 *   kinds.push(update.kind);
 *   if (update.kind === "reset") { // the listing: bind something now
 *     await registry.bind("hello", { id: "h1", url: "tcp://127.0.0.1:9001" });
 *   } else if (update.events.length > 0) {
 *     assert.equal(update.events[0].endpoint.id, "h1");
 *     break; // closes the watch
 *   }
 * }
 * assert.equal(kinds[0], "reset");
 * watches.close();
 * registry.close();
 * pool.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 */
export class WatchClient {
  readonly #registry: RegistryClient;
  readonly #options: WatchClientOptions;
  readonly #watches = new Set<RegistryWatch>();
  #connection: RpcConnection | null = null;
  #running = false;
  #closed = false;
  #wakeRun: (() => void) | null = null;
  #sequence = 0;
  /** Connections whose node refused the `loads` param (an older node). */
  readonly #noLoads = new WeakSet<RpcConnection>();
  #urlIndex = Math.floor(Math.random() * 1024);

  /**
   * Makes an idle client; the first watch connects.
   *
   * @param registry lists prefixes after a COMPACTED answer, and gives the URLs.
   */
  constructor(registry: RegistryClient, options: WatchClientOptions = {}) {
    this.#registry = registry;
    this.#options = options;
  }

  /** How many watches are open. */
  get size(): number {
    return this.#watches.size;
  }

  /** The registry node the watches are carried by now, or null while reconnecting. */
  get url(): string | null {
    const connection = this.#connection;
    return connection === null || connection.isClosed ? null : connection.url;
  }

  /**
   * Opens a watch of every name under `prefix` ("" for all names).
   *
   * @param onUpdate receives the updates instead of an iterator.
   */
  watch(
    prefix: string,
    options: WatchOptions = {},
    onUpdate?: (update: WatchUpdate) => void,
  ): RegistryWatch {
    if (this.#closed) {
      throw new RpcError(
        -32005,
        "Cancelled: the client is closed; make a new one to watch",
      );
    }
    const watch = new RegistryWatch(
      prefix,
      options,
      (w) => this.#remove(w),
      onUpdate,
    );
    this.#watches.add(watch);
    options.signal?.addEventListener("abort", () => watch.close(), {
      once: true,
    });
    if (options.signal?.aborted) watch.close();
    if (this.#connection !== null && !this.#connection.isClosed) {
      this.#start(this.#connection, watch).catch(() => {
        this.#connection?.close();
      });
    }
    this.#run();
    return watch;
  }

  /** Closes every watch and the connection. */
  close(): void {
    this.#closed = true;
    for (const watch of [...this.#watches]) watch.close();
    this.#connection?.close();
    this.#wakeRun?.();
  }

  #remove(watch: RegistryWatch): void {
    this.#watches.delete(watch);
    const connection = this.#connection;
    if (connection !== null && !connection.isClosed && watch.watchId !== "") {
      connection.call(REGISTRY_METHODS.unwatch, { watchId: watch.watchId }, {
        timeoutMs: 2_000,
      }).catch(() => {});
    }
    if (this.#watches.size === 0) connection?.close();
  }

  /** Keeps a connection open while there are watches. */
  async #run(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    let failures = 0;
    try {
      while (!this.#closed && this.#watches.size > 0) {
        const urls = this.#registry.urls;
        const url = urls[this.#urlIndex++ % urls.length];
        let connection: RpcConnection;
        try {
          connection = await dial(url, {
            dialer: this.#options.dialer,
            connectTimeoutMs: this.#options.connectTimeoutMs,
            codec: this.#options.codec,
            onNotification: (method, params) =>
              this.#notification(method, params),
          });
        } catch (error) {
          this.#options.onReconnect?.(url, error);
          await this.#pause(failures++);
          continue;
        }
        const token = this.#options.token;
        if (token !== undefined) {
          // Before the connection is shared (a new watch starts on it at
          // once) or pinged: authenticate is its first call.
          try {
            await presentToken(
              connection,
              "registry",
              token,
              this.#options.callTimeoutMs ?? 4_000,
            );
          } catch (error) {
            // Another node would refuse it too: the watches end with it.
            if (refusesAccess(error)) {
              for (const watch of [...this.#watches]) watch.fail(error);
            }
            this.#options.onReconnect?.(url, error);
            await this.#pause(failures++);
            continue;
          }
        }
        if (this.#closed || this.#watches.size === 0) {
          // Closed, or every watch ended, while it was opening.
          connection.close();
          continue;
        }
        this.#connection = connection;
        const pinger = this.#ping(connection);
        try {
          await Promise.all(
            [...this.#watches].map((watch) => this.#start(connection, watch)),
          );
          failures = 0;
          await connection.closed;
        } catch (error) {
          this.#options.onReconnect?.(url, error);
          connection.close();
          await this.#pause(failures++);
        } finally {
          clearInterval(pinger);
          this.#connection = null;
        }
      }
    } finally {
      this.#running = false;
    }
  }

  /**
   * Pings the connection now and then: a node that stopped answering (its
   * process paused, its host cut off) keeps the TCP connection open, and
   * the watches would hear nothing more.
   */
  #ping(connection: RpcConnection): ReturnType<typeof setInterval> {
    const everyMs = this.#options.pingIntervalMs ?? 1_000;
    let waiting = false;
    return setInterval(() => {
      if (waiting || connection.isClosed) return;
      waiting = true;
      connection.call("rpc.ping", undefined, { timeoutMs: everyMs }).then(
        () => {
          waiting = false;
        },
        (error) => {
          waiting = false;
          this.#options.onReconnect?.(connection.url, error);
          connection.close();
        },
      );
    }, everyMs);
  }

  async #pause(failures: number): Promise<void> {
    const ms = backoffDelay(
      failures,
      this.#options.minBackoffMs ?? 50,
      this.#options.maxBackoffMs ?? 1_000,
    );
    const stop = new AbortController();
    this.#wakeRun = () => stop.abort();
    await abortableSleep(ms, stop.signal);
    this.#wakeRun = null;
  }

  /** Opens `watch` on `connection`, listing its prefix first when needed. */
  async #start(connection: RpcConnection, watch: RegistryWatch): Promise<void> {
    for (let tries = 0; tries < 5 && !watch.closed; tries++) {
      if (watch.needsList) {
        try {
          await this.#list(watch);
        } catch (error) {
          if (!refusesAccess(error)) throw error;
          watch.fail(error);
          return;
        }
      }
      const watchId = `c${++this.#sequence}`;
      watch.watchId = watchId;
      const params: WatchParams = { prefix: watch.prefix, watchId };
      if (watch.next !== null) params.fromRevision = watch.next;
      const askLoads = watch.onLoads !== undefined &&
        !this.#noLoads.has(connection);
      if (askLoads) params.loads = true;
      try {
        const result = await connection.call<WatchResult>(
          REGISTRY_METHODS.watch,
          params as unknown as Params,
          { timeoutMs: this.#options.callTimeoutMs ?? 4_000 },
        );
        watch.next ??= result.revision + 1;
        if (watch.closed) this.#remove(watch);
        return;
      } catch (error) {
        watch.watchId = "";
        if (error instanceof RpcError && error.code === COMPACTED) {
          watch.needsList = true;
          continue;
        }
        if (askLoads && refusesLoads(error)) {
          // A node from before load notifications: watch without them.
          this.#noLoads.add(connection);
          continue;
        }
        if (refusesAccess(error)) {
          // This watch only: the others on the connection carry on.
          watch.fail(error);
          return;
        }
        throw error;
      }
    }
  }

  async #list(watch: RegistryWatch): Promise<void> {
    const listed = await this.#registry.list(watch.prefix, {
      endpoints: true,
    });
    watch.needsList = false;
    watch.next = listed.revision + 1;
    watch.deliver({
      kind: "reset",
      revision: listed.revision,
      names: listed.names,
    });
  }

  #notification(method: string, params: Params | undefined): void {
    if (method === WATCH_EVENTS_NOTIFICATION) {
      const update = params as unknown as WatchEventsNotification;
      const watch = this.#byId(update?.watchId);
      if (watch === undefined) return;
      if (
        !Array.isArray(update.events) || typeof update.revision !== "number"
      ) {
        return;
      }
      // Events a previous node already delivered are skipped. `next` is
      // null only for a new watch whose first events arrived in the same
      // read as the response to registry.watch: all of them are new.
      const from = watch.next ?? 0;
      const fresh = update.events.filter((e) => e.revision >= from);
      if (fresh.length > 0) {
        watch.deliver({
          kind: "events",
          revision: update.revision,
          events: fresh,
        });
      }
      if (update.revision + 1 > from) watch.next = update.revision + 1;
    } else if (method === WATCH_LOADS_NOTIFICATION) {
      const update = params as unknown as WatchLoadsNotification;
      const watch = this.#byId(update?.watchId);
      if (watch === undefined || watch.closed || !watch.onLoads) return;
      const loads = Array.isArray(update.loads)
        ? update.loads.filter(isEndpointLoad)
        : [];
      if (loads.length === 0) return;
      try {
        watch.onLoads(loads);
      } catch {
        // A failing callback must not stop the watch.
      }
    } else if (method === WATCH_CANCELLED_NOTIFICATION) {
      const cancelled = params as unknown as WatchCancelledNotification;
      const watch = this.#byId(cancelled?.watchId);
      if (watch === undefined) return;
      watch.watchId = "";
      // Resume on a fresh connection (to the next node) from `next`.
      this.#connection?.close();
    }
  }

  #byId(watchId: unknown): RegistryWatch | undefined {
    if (typeof watchId !== "string") return undefined;
    for (const watch of this.#watches) {
      if (watch.watchId === watchId) return watch;
    }
    return undefined;
  }
}

/** A node's refusal of the `loads` param: it is older than load notifications. */
function refusesLoads(error: unknown): boolean {
  return error instanceof RpcError && error.code === INVALID_PARAMS &&
    error.message.includes('"loads"');
}

function isEndpointLoad(value: unknown): value is EndpointLoad {
  const item = value as EndpointLoad | null;
  return typeof item === "object" && item !== null &&
    typeof item.name === "string" && typeof item.id === "string" &&
    (item.load === null ||
      (typeof item.load === "number" && Number.isFinite(item.load)));
}

/** An answer that says this client may not watch (and will not, elsewhere). */
function refusesAccess(error: unknown): error is RpcError {
  return error instanceof RpcError &&
    (error.code === UNAUTHENTICATED || error.code === PERMISSION_DENIED);
}
