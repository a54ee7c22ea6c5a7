/**
 * Cluster stubs: typed proxies whose method calls go to one of the servers
 * bound under a name, chosen per call by a distributor, with failover to
 * another server when a connection fails.
 *
 * @module
 */

import {
  CANCELLED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  RpcError,
} from "../rpc/errors.ts";
import { NO_ENDPOINTS } from "../registry/protocol.ts";
import { withDeadline } from "../rpc/_timing.ts";
import type { ClusterMap } from "./cluster_map.ts";
import type { ConnectionPool } from "./connection_pool.ts";
import {
  type CallInfo,
  type Candidate,
  defaultDecision,
  type Distributor,
  type ErrorDecision,
  makeCandidate,
} from "./distributor.ts";
import { roundRobin } from "./round_robin.ts";

/**
 * Property names a stub never turns into remote calls: `then` (so the stub
 * is not a thenable), `toJSON`, and those of `Object.prototype`, so that
 * `JSON.stringify(stub)`, template strings and inspection stay local. Call
 * a remote method of such a name with `client.call(name, method, params)`.
 */
const NOT_REMOTE = new Set([
  "then",
  "toJSON",
  ...Object.getOwnPropertyNames(Object.prototype),
]);

/** Settings of one stub. */
export interface StubOptions {
  /** Picks the server per call. Default `roundRobin()`. */
  distributor?: Distributor;
  /**
   * Methods safe to run twice (`true` for all). A call whose request may
   * have reached a server that then failed is retried elsewhere only if its
   * method is idempotent. Default none.
   */
  idempotent?: boolean | readonly string[];
  /** Deadline of each call, retries included, ms. Default 30_000. */
  deadlineMs?: number;
  /** Most attempts per call. Default 5. */
  maxAttempts?: number;
}

/** Options of one call made through {@link ClusterStub.call}. */
export interface StubCallOptions {
  /** Aborting it rejects the call with CANCELLED (-32005). */
  signal?: AbortSignal;
  /** Overrides the stub's deadline, ms. */
  deadlineMs?: number;
}

/**
 * The typed face of a stub: each method of `T` returns a promise of its
 * result. Declare `T` as the server's method table.
 *
 * @example
 * ```ts
 * import type { Stub } from "./cluster_stub.ts";
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * type HelloStub = Stub<Hello>; // { greet(name: string): Promise<{ greeting: string; server: string }> }
 * ```
 */
export type Stub<T> = {
  readonly [K in keyof T]: T[K] extends (...args: infer A) => infer R
    ? (...args: A) => Promise<Awaited<R>>
    : never;
};

/**
 * Places calls for one name: distributor choice, failover, eviction.
 *
 * Retry rule: an attempt that fails with a {@link ConnectionError} evicts
 * that server from the cluster map; the call moves to another server when
 * the request was never written, or the method is idempotent (unless the
 * distributor's `onError` says otherwise). When the map is empty the name
 * is looked up again. By default server errors (an error response) are not
 * retried; a distributor's `onError` may decide otherwise.
 */
export class ClusterStub {
  readonly #name: string;
  readonly #map: ClusterMap;
  readonly #pool: ConnectionPool;
  readonly #distributor: Distributor;
  readonly #idempotent: (method: string) => boolean;
  readonly #deadlineMs: number;
  readonly #maxAttempts: number;

  /**
   * Makes a stub for `name`; nothing is looked up or connected until a call.
   *
   * @param name service name.
   * @param map the name's cluster map.
   * @param pool shared connections.
   */
  constructor(
    name: string,
    map: ClusterMap,
    pool: ConnectionPool,
    options: StubOptions = {},
  ) {
    this.#name = name;
    this.#map = map;
    this.#pool = pool;
    this.#distributor = options.distributor ?? roundRobin();
    const idempotent = options.idempotent ?? false;
    this.#idempotent = typeof idempotent === "boolean"
      ? () => idempotent
      : (method) => idempotent.includes(method);
    this.#deadlineMs = options.deadlineMs ?? 30_000;
    this.#maxAttempts = options.maxAttempts ?? 5;
  }

  /**
   * Calls `method` with `params` (positional, or named as an object) on a
   * server of the name.
   *
   * @throws {RpcError} the server's error response; NO_ENDPOINTS (-32002)
   * when nothing is bound under the name; the last {@link ConnectionError}
   * when retries ran out or were not safe; DEADLINE_EXCEEDED (-32003);
   * CANCELLED (-32005); registry errors when the lookup itself failed.
   */
  async call<R = unknown>(
    method: string,
    params: unknown[] | Record<string, unknown> = [],
    options: StubCallOptions = {},
  ): Promise<R> {
    const deadlineMs = options.deadlineMs ?? this.#deadlineMs;
    const deadline = Date.now() + deadlineMs;
    // The lookup and the connect have their own timeouts; the call's
    // deadline and signal bound them too.
    const bounded = <T>(promise: Promise<T>, step: string) =>
      withDeadline(promise, deadline, options.signal, () =>
        new RpcError(
          DEADLINE_EXCEEDED,
          `Deadline exceeded: "${this.#name}.${method}" did not get a response within ${deadlineMs} ms (${step} still under way)`,
          { deadlineMs, written: false },
        ), () => cancelledBeforeSending(method));
    let lastError: unknown = null;
    for (let attempt = 0; attempt < this.#maxAttempts; attempt++) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      if (options.signal?.aborted) throw cancelledBeforeSending(method);
      // Only an empty map waits for the registry.
      const endpoints = this.#map.current.length > 0
        ? await this.#map.endpoints()
        : await bounded(
          this.#map.endpoints(),
          "looking up the name in the registry",
        );
      if (endpoints.length === 0) {
        throw new RpcError(
          NO_ENDPOINTS,
          `No endpoints: nothing is bound under "${this.#name}"; start a server that binds it, or check the name`,
          { name: this.#name },
        );
      }
      const info: CallInfo = {
        name: this.#name,
        method,
        params,
        attempt,
        idempotent: this.#idempotent(method),
        tried: [],
        remainingMs: deadline - Date.now(),
      };
      const endpoint = this.#distributor.choose(
        endpoints.map((e) => makeCandidate(e)),
        info,
      );
      if (typeof endpoint?.url !== "string") {
        throw new TypeError(
          `the distributor's choose() returned ${
            JSON.stringify(endpoint)
          } for "${this.#name}.${method}"; it must return one of the endpoints it was given`,
        );
      }
      try {
        const connection = this.#pool.ready(endpoint.url) ??
          await bounded(
            this.#pool.get(endpoint.url),
            `connecting to ${endpoint.url}`,
          );
        const result = await connection.call<R>(method, params, {
          timeoutMs: deadline - Date.now(),
          signal: options.signal,
        });
        this.#distributor.onReturn?.(result, { ...info, endpoint });
        return result;
      } catch (error) {
        lastError = error;
        const decision = this.#decide(error, info, endpoint);
        if (decision === "throw") throw error;
        if (typeof decision === "object") return decision.return as R;
      }
    }
    if (lastError !== null) throw lastError;
    throw new RpcError(
      DEADLINE_EXCEEDED,
      `Deadline exceeded: no attempt at "${this.#name}.${method}" could start in time`,
    );
  }

  #decide(
    error: unknown,
    info: CallInfo,
    endpoint: Candidate,
  ): ErrorDecision {
    const connectionFailed = error instanceof ConnectionError;
    if (connectionFailed) {
      this.#map.evict(endpoint);
      this.#pool.drop(endpoint.url);
    }
    const safeToRetry = connectionFailed &&
      (!error.written || this.#idempotent(info.method));
    const kind = connectionFailed
      ? (error.written ? "ambiguous" : "notSent")
      : "server";
    const failure = { ...info, endpoint, safeToRetry, kind } as const;
    return this.#distributor.onError?.(error, failure) ??
      defaultDecision(failure);
  }

  /** The typed proxy over {@link call}. */
  proxy<T>(): Stub<T> {
    const methods = new Map<string, (...args: unknown[]) => Promise<unknown>>();
    return new Proxy({}, {
      get: (target, property) => {
        // Not a thenable, so `await stub` and Promise.resolve(stub) work;
        // toString, valueOf… are the plain object's own.
        if (typeof property !== "string" || NOT_REMOTE.has(property)) {
          return Reflect.get(target, property);
        }
        let method = methods.get(property);
        if (method === undefined) {
          method = (...args: unknown[]) => this.call(property, args);
          methods.set(property, method);
        }
        return method;
      },
    }) as Stub<T>;
  }
}

/** The CANCELLED error of a call aborted before its request was sent. */
function cancelledBeforeSending(method: string): RpcError {
  return new RpcError(
    CANCELLED,
    `Cancelled: the call to ${
      JSON.stringify(String(method))
    } was aborted before it was sent`,
    { written: false },
  );
}
