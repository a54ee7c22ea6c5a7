/**
 * One shared, lazily opened connection per endpoint URL.
 *
 * @module
 */

import type { RpcConnection } from "../rpc/connection.ts";
import { dial } from "../rpc/dial.ts";
import type { Dialer } from "../rpc/transport.ts";

/** Settings of a {@link ConnectionPool}. */
export interface ConnectionPoolOptions {
  /** Opens byte streams; default Deno TCP. */
  dialer?: Dialer;
  /** Time allowed to open a connection, ms. @default DEFAULT_CONNECT_TIMEOUT_MS (2_000) */
  connectTimeoutMs?: number;
}

/**
 * Keeps one multiplexed connection per URL, opened on first use and
 * forgotten when it closes, so the next use opens a fresh one.
 *
 * @example
 * ```ts ignore
 * import { ConnectionPool } from "./connection_pool.ts";
 * const pool = new ConnectionPool();
 * const connection = await pool.get("tcp://127.0.0.1:7001");
 * console.log(await connection.call("rpc.ping"));
 * pool.close();
 * ```
 */
export class ConnectionPool {
  readonly #options: ConnectionPoolOptions;
  readonly #connections = new Map<string, Promise<RpcConnection>>();
  /** The connections of `#connections` that are open, for the fast path. */
  readonly #openByUrl = new Map<string, RpcConnection>();

  /**
   * Makes an empty pool; connections open on first use.
   *
   * @param options dialer and connect timeout.
   */
  constructor(options: ConnectionPoolOptions = {}) {
    this.#options = options;
  }

  /**
   * The connection to `url` if it is open and takes calls, without waiting:
   * the per-call fast path. Otherwise undefined: use {@link get}.
   */
  ready(url: string): RpcConnection | undefined {
    const connection = this.#openByUrl.get(url);
    return connection === undefined || connection.isClosed
      ? undefined
      : connection;
  }

  /**
   * The open connection to `url`, opening one if needed. Concurrent callers
   * share one attempt.
   *
   * @throws {ConnectionError} (`written: false`) when it cannot be opened.
   */
  get(url: string): Promise<RpcConnection> {
    const existing = this.#connections.get(url);
    if (existing === undefined) return this.#open(url);
    return existing.then((connection) => {
      if (!connection.isClosed) return connection;
      // Closed but not yet forgotten: the first caller to notice opens the
      // replacement, the others share it (one connection per URL).
      return this.#connections.get(url) === existing
        ? this.#open(url)
        : this.get(url);
    });
  }

  /** Closes and forgets the connection to `url`, if any. */
  drop(url: string): void {
    const existing = this.#connections.get(url);
    this.#connections.delete(url);
    this.#openByUrl.delete(url);
    existing?.then((connection) => connection.close(), () => {});
  }

  /** Closes every connection; later `get` calls open new ones. */
  close(): void {
    for (const url of [...this.#connections.keys()]) this.drop(url);
  }

  #open(url: string): Promise<RpcConnection> {
    const opening = dial(url, {
      dialer: this.#options.dialer,
      connectTimeoutMs: this.#options.connectTimeoutMs,
    });
    this.#connections.set(url, opening);
    opening.then(
      (connection) => {
        if (this.#connections.get(url) === opening) {
          this.#openByUrl.set(url, connection);
        }
        connection.closed.then(() => {
          if (this.#connections.get(url) === opening) {
            this.#connections.delete(url);
          }
          if (this.#openByUrl.get(url) === connection) {
            this.#openByUrl.delete(url);
          }
        });
      },
      () => {
        if (this.#connections.get(url) === opening) {
          this.#connections.delete(url);
        }
      },
    );
    return opening;
  }
}
