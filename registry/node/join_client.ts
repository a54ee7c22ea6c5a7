/**
 * The registry's own client for `--join`: calls a leader method
 * (`registry.memberList`, `registry.memberAdd`) on the cluster through the
 * rpc layer's connections, following NOT_LEADER hints, moving on from a
 * node that refuses, times out or is unavailable, and backing off with
 * jitter after a round where none answered; it gives up with UNAVAILABLE
 * once no URL accepted a connection for `failFastRounds` rounds, or with
 * DEADLINE_EXCEEDED (quoting the last answer) at the deadline. The same
 * policy as the stubs' `RegistryClient` for leader methods, without the
 * stub layer (the registry reaches only raft, rpc, protocol, internal).
 * Given a `token`, it presents it (`registry.authenticate`) first on every
 * connection it opens, a leader's it was pointed to included; a refused
 * token is thrown at once (UNAUTHENTICATED or PERMISSION_DENIED).
 *
 * @module
 */

import type { RpcConnection } from "../../rpc/client/connection.ts";
import { dial } from "../../rpc/transport/dial.ts";
import {
  ConnectionError,
  METHOD_NOT_FOUND,
  RpcError,
} from "../../rpc/errors.ts";
import { AUTH_METHODS } from "../../protocol/auth.ts";
import {
  type Dialer,
  formatTcpUrl,
  parseTcpUrl,
} from "../../rpc/transport/transport.ts";
import type {
  ParamsOf,
  RegistryMethod,
  ResultOf,
} from "../../protocol/registry.ts";
import { abortableSleep, backoffDelay } from "../../internal/timing.ts";
import {
  isNodeAnswer,
  isRetryableAnswer,
  leaderHint,
  noRegistryError,
  noSuccessError,
} from "../../protocol/registry_failover.ts";

/** Settings of a {@link JoinClient}. */
interface JoinClientOptions {
  /** Opens connections (a TLS dialer for `tls://` members). @default the runtime's */
  dialer?: Dialer;
  /** Time one call may take, retries included, ms. @default 15_000 */
  deadlineMs?: number;
  /** Time one attempt on one node may take, ms. @default 4_000 */
  attemptTimeoutMs?: number;
  /** Rounds in which no URL accepted a connection before UNAVAILABLE. @default 2 */
  failFastRounds?: number;
  /**
   * A bearer token (`rft_<id>_<secret>`) presented with
   * `registry.authenticate` on each new connection before any other call.
   * A node that does not know the method (no access control) is called
   * without it. @default none
   */
  token?: string;
}

/** First and longest back-off after a round where no node answered, ms. */
const BACKOFF_MS = { min: 50, max: 1_000 };

/** Calls leader methods of a registry cluster, for a joining node. */
export class JoinClient {
  readonly #urls: string[];
  readonly #dialer: Dialer | undefined;
  readonly #deadlineMs: number;
  readonly #attemptTimeoutMs: number;
  readonly #failFastRounds: number;
  readonly #token: string | undefined;
  readonly #connections = new Map<string, Promise<RpcConnection>>();
  readonly #closing = new AbortController();
  /** Index of the node believed to lead. */
  #leader = 0;

  /** @param urls client URLs of members (`tcp://host:port`), at least one. */
  constructor(urls: readonly string[], options: JoinClientOptions = {}) {
    // One spelling per address, as the leader hints use.
    this.#urls = [
      ...new Set(urls.map((url) => formatTcpUrl(parseTcpUrl(url)))),
    ];
    this.#deadlineMs = options.deadlineMs ?? 15_000;
    this.#attemptTimeoutMs = options.attemptTimeoutMs ?? 4_000;
    this.#failFastRounds = options.failFastRounds ?? 2;
    this.#token = options.token;
    this.#dialer = options.dialer;
  }

  /**
   * Calls `method` on the leader.
   *
   * @throws {RpcError} UNAVAILABLE when no URL accepted a connection for
   * `failFastRounds` rounds; DEADLINE_EXCEEDED at the deadline; at once,
   * an answer a retry cannot change (bad params, a refused member…).
   */
  async call<M extends RegistryMethod>(
    method: M,
    params: ParamsOf<M>,
  ): Promise<ResultOf<M>> {
    const deadline = performance.now() + this.#deadlineMs;
    const signal = this.#closing.signal;
    const round = { tried: 0, refused: 0, refusedRounds: 0, count: 0 };
    let lastError: unknown = null;
    let lastAnswer: RpcError | null = null;
    let hops = 0;
    while (performance.now() < deadline && !signal.aborted) {
      const url = this.#urls[this.#leader];
      try {
        const connection = await this.#connection(url);
        return await connection.call<ResultOf<M>>(method, params as never, {
          timeoutMs: Math.min(
            deadline - performance.now(),
            this.#attemptTimeoutMs,
          ),
          signal,
        });
      } catch (error) {
        lastError = error;
        if (isNodeAnswer(error)) lastAnswer = error;
        const hint = leaderHint(error);
        if (hint !== null && hint !== url && hops++ <= this.#urls.length) {
          // Follow the hint at once, but not around a loop of stale hints.
          this.#leader = this.#indexOf(hint);
          continue;
        }
        if (error instanceof ConnectionError) {
          this.#drop(url);
          if (!error.written) round.refused++;
        } else if (!isRetryableAnswer(error)) {
          throw error;
        }
        round.tried++;
      }
      this.#leader = (this.#leader + 1) % this.#urls.length;
      if (round.tried < this.#urls.length) continue;
      // Every node failed once: give up if none even accepted a
      // connection, else wait before the next round.
      round.refusedRounds = round.refused >= round.tried
        ? round.refusedRounds + 1
        : 0;
      if (round.refusedRounds >= this.#failFastRounds) {
        throw noRegistryError(method, this.#urls, lastError);
      }
      round.tried = round.refused = 0;
      await abortableSleep(
        Math.min(
          backoffDelay(round.count++, BACKOFF_MS.min, BACKOFF_MS.max),
          Math.max(deadline - performance.now(), 0),
        ),
        signal,
      );
    }
    throw noSuccessError(method, this.#urls, lastAnswer ?? lastError);
  }

  /** Cancels the calls under way and closes the connections. */
  close(): void {
    this.#closing.abort();
    for (const url of [...this.#connections.keys()]) this.#drop(url);
  }

  #connection(url: string): Promise<RpcConnection> {
    let connection = this.#connections.get(url);
    if (connection === undefined) {
      connection = dial(url, { dialer: this.#dialer }).then((opened) =>
        this.#authenticate(opened)
      );
      // A failed dial is dialed again next time.
      connection.catch(() => this.#connections.delete(url));
      this.#connections.set(url, connection);
    }
    return connection;
  }

  /** Presents the token, if any; closes the connection when that fails. */
  async #authenticate(connection: RpcConnection): Promise<RpcConnection> {
    if (this.#token === undefined) return connection;
    try {
      await connection.call(
        AUTH_METHODS.authenticate,
        { token: this.#token },
        { timeoutMs: this.#attemptTimeoutMs, signal: this.#closing.signal },
      );
    } catch (error) {
      if (!(error instanceof RpcError && error.code === METHOD_NOT_FOUND)) {
        connection.close();
        throw error;
      }
    }
    return connection;
  }

  #drop(url: string): void {
    this.#connections.get(url)?.then((c) => c.close(), () => {});
    this.#connections.delete(url);
  }

  #indexOf(url: string): number {
    const index = this.#urls.indexOf(url);
    return index === -1 ? this.#urls.push(url) - 1 : index;
  }
}
