/**
 * A client of the registry cluster: tries its registry URLs in turn, follows
 * not-leader hints to the leader, and retries while the registry elects a
 * leader, until the call's deadline.
 *
 * @module
 */

import {
  CANCELLED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  NOT_LEADER,
  RpcError,
  UNAVAILABLE,
} from "../rpc/errors.ts";
import type { Params } from "../rpc/message.ts";
import { formatTcpUrl, parseTcpUrl } from "../rpc/transport.ts";
import type {
  Consistency,
  Endpoint,
  LookupResult,
  NotLeaderData,
  RegistryStatus,
  WriteResult,
} from "../registry/types.ts";
import type { ConnectionPool } from "./connection_pool.ts";

/** Settings of a {@link RegistryClient}. */
export interface RegistryClientOptions {
  /** Total time one registry operation may take, retries included, ms. Default 15_000. */
  deadlineMs?: number;
  /** Time one attempt on one registry node may take, ms. Default 4_000. */
  attemptTimeoutMs?: number;
}

/** Options of one registry operation. */
export interface RegistryCallOptions {
  /** Overrides the client's `deadlineMs`. */
  deadlineMs?: number;
  /** Aborts the operation (rejects with CANCELLED). */
  signal?: AbortSignal;
}

/**
 * Talks to whichever registry node can answer. Every registry operation is
 * safe to repeat (a bind replaces the same id, an unbind of a missing id
 * removes nothing), so a call that may have reached a node that then died
 * is retried on the next one.
 *
 * @example
 * ```ts ignore
 * import { ConnectionPool } from "./connection_pool.ts";
 * import { RegistryClient } from "./registry_client.ts";
 * const registry = new RegistryClient(
 *   ["tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"],
 *   new ConnectionPool(),
 * );
 * await registry.bind("hello", { id: "h1", url: "tcp://127.0.0.1:9001" });
 * console.log(await registry.lookup("hello"));
 * ```
 */
export class RegistryClient {
  readonly #urls: string[];
  readonly #pool: ConnectionPool;
  readonly #deadlineMs: number;
  readonly #attemptTimeoutMs: number;
  #current = 0;

  /**
   * Makes a client; nothing is connected until the first operation.
   *
   * @param urls registry node URLs (`tcp://host:port`); list two or three so
   * the client survives a node's death.
   * @param pool connections, shared with the stubs.
   * @throws {TypeError} when `urls` is empty or a URL is not
   * `tcp://host:port` (a bare `host:port` is taken as tcp).
   */
  constructor(
    urls: readonly string[],
    pool: ConnectionPool,
    options: RegistryClientOptions = {},
  ) {
    if (urls.length === 0) {
      throw new TypeError("give at least one registry URL (tcp://host:port)");
    }
    // One spelling per address, as the registry's leader hints use.
    this.#urls = [
      ...new Set(urls.map((url) => formatTcpUrl(parseTcpUrl(url)))),
    ];
    this.#pool = pool;
    this.#deadlineMs = options.deadlineMs ?? 15_000;
    this.#attemptTimeoutMs = options.attemptTimeoutMs ?? 4_000;
  }

  /** The registry URLs known, including leaders learned from hints. */
  get urls(): readonly string[] {
    return this.#urls;
  }

  /**
   * Binds `endpoint` under `name` (replacing an endpoint with the same id).
   * @throws {RpcError} INVALID_PARAMS for a bad name or URL; DEADLINE_EXCEEDED
   * when no leader accepted the write in time.
   */
  bind(
    name: string,
    endpoint: { id?: string; url: string },
    options?: RegistryCallOptions,
  ): Promise<WriteResult> {
    return this.call("registry.bind", { name, endpoint }, options);
  }

  /** Removes endpoint `id` from `name`; `removed` is 0 if it was not bound. */
  unbind(
    name: string,
    id: string,
    options?: RegistryCallOptions,
  ): Promise<WriteResult> {
    return this.call("registry.unbind", { name, id }, options);
  }

  /** The stubs list of `name` (linearizable unless told otherwise). */
  lookup(
    name: string,
    options: RegistryCallOptions & { consistency?: Consistency } = {},
  ): Promise<LookupResult> {
    const params: Record<string, unknown> = { name };
    if (options.consistency !== undefined) {
      params.consistency = options.consistency;
    }
    return this.call("registry.lookup", params, options);
  }

  /** Endpoints bound under `name`. */
  async endpoints(
    name: string,
    options?: RegistryCallOptions,
  ): Promise<Endpoint[]> {
    return (await this.lookup(name, options)).endpoints;
  }

  /** Status of the node at `url` (no retries elsewhere). */
  async status(
    url: string,
    options: { timeoutMs?: number } = {},
  ): Promise<RegistryStatus> {
    const connection = await this.#pool.get(url);
    return connection.call<RegistryStatus>("registry.status", undefined, {
      timeoutMs: options.timeoutMs ?? this.#attemptTimeoutMs,
    });
  }

  /**
   * Calls a registry method on the current node, moving to the leader on a
   * NOT_LEADER hint, to the next URL on a connection failure or attempt
   * timeout, and waiting with backoff while no leader is known.
   *
   * @throws {RpcError} the last error once the deadline passes, or at once
   * for errors that a retry cannot fix (bad params, method not found,
   * CANCELLED).
   */
  async call<T>(
    method: string,
    params: Params | undefined,
    options: RegistryCallOptions = {},
  ): Promise<T> {
    const deadline = Date.now() + (options.deadlineMs ?? this.#deadlineMs);
    let lastError: unknown = null;
    let failuresInRow = 0;
    let hops = 0;
    for (let attempt = 0;; attempt++) {
      const remaining = deadline - Date.now();
      if (remaining <= 0 || attempt > 1000) break;
      if (options.signal?.aborted) throw cancelled(method);
      const url = this.#urls[this.#current];
      try {
        const connection = await this.#pool.get(url);
        return await connection.call<T>(method, params, {
          timeoutMs: Math.min(remaining, this.#attemptTimeoutMs),
          signal: options.signal,
        });
      } catch (error) {
        lastError = error;
        if (options.signal?.aborted) throw cancelled(method);
        const hint = leaderHint(error);
        if (hint !== null && hint !== url && hops++ <= this.#urls.length) {
          // Follow the hint at once, but not around a loop of stale hints.
          this.#moveTo(hint);
          continue;
        }
        if (error instanceof ConnectionError) {
          this.#pool.drop(url);
        } else if (
          !(error instanceof RpcError) ||
          (error.code !== UNAVAILABLE && error.code !== DEADLINE_EXCEEDED &&
            error.code !== NOT_LEADER)
        ) {
          throw error;
        }
        this.#current = (this.#current + 1) % this.#urls.length;
        failuresInRow++;
        if (failuresInRow >= this.#urls.length) {
          // Every node failed once: wait before the next round.
          const pause = Math.min(
            50 * 2 ** Math.min(failuresInRow - this.#urls.length, 4),
            Math.max(deadline - Date.now(), 0),
          );
          await sleep(pause, options.signal);
          if (options.signal?.aborted) throw cancelled(method);
        }
      }
    }
    if (lastError instanceof RpcError) {
      throw new RpcError(
        DEADLINE_EXCEEDED,
        `Deadline exceeded: ${method} did not succeed on any registry node (${
          this.#urls.join(", ")
        }); last error: ${lastError.message}`,
        { lastError: lastError.toJSON() },
      );
    }
    throw lastError ??
      new RpcError(DEADLINE_EXCEEDED, `Deadline exceeded: ${method}`);
  }

  #moveTo(url: string): void {
    let index = this.#urls.indexOf(url);
    if (index === -1) index = this.#urls.push(url) - 1;
    this.#current = index;
  }
}

function leaderHint(error: unknown): string | null {
  if (!(error instanceof RpcError) || error.code !== NOT_LEADER) return null;
  const data = error.data as Partial<NotLeaderData> | undefined;
  return typeof data?.leaderUrl === "string" ? data.leaderUrl : null;
}

function cancelled(method: string): RpcError {
  return new RpcError(CANCELLED, `Cancelled: the caller aborted ${method}`);
}

/** Waits `ms`, or less if `signal` aborts first (never rejects). */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
