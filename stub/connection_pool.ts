/**
 * The connections of one client, by endpoint URL: opened lazily on first
 * use, `size` multiplexed connections per endpoint at most (a call goes to
 * the one with the fewest calls under way), closed when idle, drained
 * gracefully when an endpoint leaves, and not redialed in a tight loop: a
 * URL that refused is not dialed again before a jittered, growing back-off.
 *
 * @module
 */

import type { RpcConnection } from "../rpc/client/connection.ts";
import { dial } from "../rpc/transport/dial.ts";
import { ConnectionError, messageOf } from "../rpc/errors.ts";
import { isNodeAnswer } from "../protocol/registry_failover.ts";
import type { Dialer } from "../rpc/transport/transport.ts";
import type { Codec } from "../rpc/codec/codec.ts";
import { backoffDelay } from "../internal/timing.ts";

/** Settings of a {@link ConnectionPool}. */
export interface ConnectionPoolOptions {
  /** Opens byte streams. Default: `defaultDialer()` (the runtime entries' `connect` pass theirs). */
  dialer?: Dialer;
  /** Time allowed to open a connection, ms. @default DEFAULT_CONNECT_TIMEOUT_MS (2_000) */
  connectTimeoutMs?: number;
  /**
   * Wire codec of every connection: `"json"` (NDJSON) or `"cbor"`
   * (length-prefixed CBOR; see `RpcConnectionOptions.codec`).
   * @default "json"
   */
  codec?: Codec;
  /**
   * Most connections per endpoint; calls are spread over them (fewest
   * calls under way first), a new one opened when all are busy.
   * @default 1
   */
  size?: number;
  /** Close a connection with no call for this long, ms; 0 never. @default 60_000 */
  idleCloseMs?: number;
  /** First wait before redialing a URL that failed, ms (jittered, doubling). @default 50 */
  minReconnectMs?: number;
  /** Longest wait before redialing a URL that failed, ms. @default 5_000 */
  maxReconnectMs?: number;
  /**
   * Send each request's time left (`timeoutMs`) and `rpc.cancel` for calls
   * given up on (see `RpcConnection`); turn off for servers that refuse
   * unknown members. @default true
   */
  propagateDeadlines?: boolean;
  /**
   * Monotonic clock, ms: reconnect back-offs and idle times must not move
   * when the wall clock jumps (stepped back an hour, a URL that failed
   * once would not be redialed for that hour). @default performance.now
   */
  now?: () => number;
  /**
   * Runs on each new connection before it takes a call (e.g.
   * `rpc.authenticate`, see `ConnectOptions.serverToken`): until it
   * resolves, callers of {@link ConnectionPool.get} wait. When the server
   * answers it with an error, the connection is closed and they get that
   * error (no reconnect back-off); when no answer comes (closed, timed
   * out), a ConnectionError (`written: false`), as a failed dial.
   */
  handshake?: (connection: RpcConnection, url: string) => Promise<void>;
}

interface Slot {
  opening: Promise<RpcConnection>;
  connection: RpcConnection | null;
  lastUsed: number;
}

interface Endpoint {
  slots: Slot[];
  failures: number;
  retryAt: number;
  lastError: string;
}

/**
 * Keeps up to `size` multiplexed connections per URL.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ConnectionPool } from "./connection_pool.ts";
 * import { serve } from "../adapter/deno/serve.ts";
 * const server = serve({ methods: {} });
 * const pool = new ConnectionPool({ size: 2 });
 * const connection = await pool.get(server.url);
 * assert.equal(await connection.call("rpc.ping"), "pong");
 * pool.close();
 * await server.close();
 * ```
 */
export class ConnectionPool {
  readonly #options: ConnectionPoolOptions;
  readonly #size: number;
  readonly #idleCloseMs: number;
  readonly #now: () => number;
  /** Whether `#now` is a clock the options gave (not performance.now). */
  readonly #ownClock: boolean;
  readonly #endpoints = new Map<string, Endpoint>();
  #idleTimer: ReturnType<typeof setInterval> | undefined;

  /**
   * Makes an empty pool; connections open on first use.
   *
   * @throws {RangeError} when `size` is not a positive integer.
   */
  constructor(options: ConnectionPoolOptions = {}) {
    this.#options = options;
    this.#size = options.size ?? 1;
    if (!Number.isSafeInteger(this.#size) || this.#size < 1) {
      throw new RangeError(
        `size must be a positive integer, got ${this.#size}`,
      );
    }
    this.#idleCloseMs = options.idleCloseMs ?? 60_000;
    this.#ownClock = options.now !== undefined;
    this.#now = options.now ?? (() => performance.now());
  }

  /**
   * An open connection to `url` that takes calls, without waiting (the
   * per-call fast path): the one with the fewest calls under way. When all
   * are busy and fewer than `size` exist, another is opened for the next
   * calls. Undefined when none is open: use {@link get}.
   *
   * @param at `performance.now()` as the caller just read it (saves a
   * read per call; ignored when the pool was given its own clock).
   */
  ready(url: string, at?: number): RpcConnection | undefined {
    const endpoint = this.#endpoints.get(url);
    if (endpoint === undefined) return undefined;
    let best: Slot | undefined;
    for (const slot of endpoint.slots) {
      const connection = slot.connection;
      if (connection === null || connection.isClosed) continue;
      if (
        best === undefined ||
        connection.pendingCalls < best.connection!.pendingCalls
      ) {
        best = slot;
      }
    }
    if (best === undefined) return undefined;
    if (
      best.connection!.pendingCalls > 0 && this.#live(endpoint) < this.#size &&
      this.#now() >= endpoint.retryAt
    ) {
      this.#open(url, endpoint).catch(() => {});
    }
    best.lastUsed = at === undefined || this.#ownClock ? this.#now() : at;
    return best.connection!;
  }

  /**
   * The connection to `url` with the fewest calls under way, opening one if
   * none is open. Concurrent callers share one attempt.
   *
   * @throws {ConnectionError} (`written: false`) when it cannot be opened,
   * or at once while the URL is in its reconnect back-off after a failure.
   */
  get(url: string): Promise<RpcConnection> {
    const open = this.ready(url);
    if (open !== undefined) return Promise.resolve(open);
    const endpoint = this.#endpoint(url);
    const opening = endpoint.slots.find((s) => s.connection === null);
    if (opening !== undefined) return opening.opening;
    const now = this.#now();
    if (now < endpoint.retryAt) {
      return Promise.reject(
        new ConnectionError(
          `cannot connect to ${url}: ${endpoint.lastError} (the last attempt; not redialing for another ${
            Math.ceil(endpoint.retryAt - now)
          } ms)`,
          false,
        ),
      );
    }
    return this.#open(url, endpoint);
  }

  /** Closes and forgets every connection to `url` now. */
  drop(url: string): void {
    const endpoint = this.#endpoints.get(url);
    this.#endpoints.delete(url);
    for (const slot of endpoint?.slots ?? []) {
      if (slot.connection !== null) slot.connection.close();
      else slot.opening.then((connection) => connection.close(), () => {});
    }
  }

  /**
   * Drains the connections to `url`: they take no new calls and close once
   * their calls are answered; the next use opens a fresh one.
   */
  drain(url: string): void {
    const endpoint = this.#endpoints.get(url);
    this.#endpoints.delete(url);
    for (const slot of endpoint?.slots ?? []) {
      if (slot.connection !== null) slot.connection.drain();
      else slot.opening.then((connection) => connection.drain(), () => {});
    }
  }

  /** Closes every connection; later calls open new ones. */
  close(): void {
    clearInterval(this.#idleTimer);
    this.#idleTimer = undefined;
    for (const url of [...this.#endpoints.keys()]) this.drop(url);
  }

  #endpoint(url: string): Endpoint {
    let endpoint = this.#endpoints.get(url);
    if (endpoint === undefined) {
      endpoint = { slots: [], failures: 0, retryAt: 0, lastError: "" };
      this.#endpoints.set(url, endpoint);
    }
    return endpoint;
  }

  #live(endpoint: Endpoint): number {
    // Counted, not filtered: ready() asks this on every call while busy.
    let live = 0;
    for (const slot of endpoint.slots) {
      if (slot.connection === null || !slot.connection.isClosed) live++;
    }
    return live;
  }

  #open(url: string, endpoint: Endpoint): Promise<RpcConnection> {
    const dialing = dial(url, {
      dialer: this.#options.dialer,
      connectTimeoutMs: this.#options.connectTimeoutMs,
      propagateDeadlines: this.#options.propagateDeadlines,
      codec: this.#options.codec,
    });
    const handshake = this.#options.handshake;
    let refused = false;
    const opening = handshake === undefined
      ? dialing
      : dialing.then(async (connection) => {
        try {
          await handshake(connection, url);
        } catch (error) {
          connection.close();
          // A refusal is the server's answer; no answer at all is a
          // connection that failed to open (no call of the caller was sent).
          refused = isNodeAnswer(error);
          if (refused) throw error;
          throw new ConnectionError(
            `cannot connect to ${url}: the handshake got no answer (${
              messageOf(error)
            })`,
            false,
          );
        }
        return connection;
      });
    const slot: Slot = { opening, connection: null, lastUsed: this.#now() };
    endpoint.slots.push(slot);
    const remove = () => {
      endpoint.slots = endpoint.slots.filter((s) => s !== slot);
      if (endpoint.slots.length === 0 && endpoint.failures === 0) {
        if (this.#endpoints.get(url) === endpoint) this.#endpoints.delete(url);
      }
    };
    opening.then(
      (connection) => {
        slot.connection = connection;
        endpoint.failures = 0;
        endpoint.retryAt = 0;
        connection.closed.then(remove);
        this.#armIdle();
      },
      (error) => {
        if (refused) return remove();
        endpoint.failures++;
        endpoint.lastError = error instanceof Error
          ? error.message.replace(/^cannot connect to \S+: /, "")
          : String(error);
        endpoint.retryAt = this.#now() +
          backoffDelay(
            endpoint.failures - 1,
            this.#options.minReconnectMs ?? 50,
            this.#options.maxReconnectMs ?? 5_000,
          );
        remove();
      },
    );
    return opening;
  }

  #armIdle(): void {
    if (this.#idleCloseMs <= 0 || this.#idleTimer !== undefined) return;
    // Runs only while connections are open (their sockets keep the
    // process alive anyway); it stops with the last one.
    this.#idleTimer = setInterval(
      () => this.#closeIdle(),
      this.#idleCloseMs / 2,
    );
  }

  #closeIdle(): void {
    const now = this.#now();
    let open = 0;
    for (const endpoint of this.#endpoints.values()) {
      for (const slot of endpoint.slots) {
        const connection = slot.connection;
        if (connection === null || connection.isClosed) continue;
        if (
          connection.pendingCalls === 0 &&
          now - slot.lastUsed >= this.#idleCloseMs
        ) {
          connection.close();
        } else {
          open++;
        }
      }
    }
    if (open === 0) {
      clearInterval(this.#idleTimer);
      this.#idleTimer = undefined;
    }
  }
}
