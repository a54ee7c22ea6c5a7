/**
 * A client of the registry cluster, typed by the registry's contract
 * (`protocol/registry.ts`): writes and lease calls follow the leader
 * (NOT_LEADER hints), reads are spread across the registry URLs, and when
 * no node answers the client backs off with jitter, so clients do not all
 * come back at once when a registry restarts. When no URL accepts a
 * connection at all the call fails fast with UNAVAILABLE, naming the URLs.
 *
 * @module
 */

import { CANCELLED, ConnectionError, RpcError } from "../../rpc/errors.ts";
import { formatTcpUrl, parseTcpUrl } from "../../rpc/transport/transport.ts";
import {
  type BindParams,
  type BindResult,
  type EndpointSpec,
  LEADER_METHODS,
  type LeaderTransferParams,
  type LeaderTransferResult,
  type LeaseGrantResult,
  type LeaseInfo,
  type LeaseKeepAliveResult,
  type LeaseListResult,
  type LeaseRevokeResult,
  type ListParams,
  type ListResult,
  type LookupParams,
  type LookupResult,
  type MemberListResult,
  type ParamsOf,
  REGISTRY_METHODS,
  type RegistryMethod,
  type RegistryStatus,
  type ResultOf,
  type Scope,
  type SetStateParams,
  type UnbindParams,
  type UnbindResult,
  type WriteResult,
} from "../../protocol/registry.ts";
import {
  isNodeAnswer,
  isRetryableAnswer,
  leaderHint,
  mayHaveApplied,
  noRegistryError,
  noSuccessError,
  repeatsHarm,
  unknownOutcomeError,
} from "../../protocol/registry_failover.ts";
import type { ConnectionPool } from "../connection_pool.ts";
import type { RpcConnection } from "../../rpc/client/connection.ts";
import {
  AUTH_METHODS,
  type AuthStatusResult,
  type Permission,
  type TokenCreateResult,
  type TokenListResult,
  type TokenRevokeResult,
} from "../../protocol/auth.ts";
import { checkRegistryToken, presentToken } from "../authenticate.ts";
import { abortableSleep, backoffDelay } from "../../internal/timing.ts";

/** Settings of a {@link RegistryClient}. */
export interface RegistryClientOptions {
  /** Total time one registry operation may take, retries included, ms. @default 15_000 */
  deadlineMs?: number;
  /** Time one attempt on one registry node may take, ms. @default 4_000 */
  attemptTimeoutMs?: number;
  /**
   * Give up with UNAVAILABLE once every registry URL failed to connect in
   * this many rounds in a row (a registry that is down, not one that is
   * electing). @default 2
   */
  failFastRounds?: number;
  /** First back-off after a round where no node answered, ms (jittered). @default 50 */
  minBackoffMs?: number;
  /** Longest back-off, ms (jittered). @default 1_000 */
  maxBackoffMs?: number;
  /**
   * The bearer token of a registry with access control on
   * (`rft_<id>_<secret>`, from `rafter token create`). Every registry
   * connection then calls `registry.authenticate {token}` before anything
   * else, again after each reconnect; calls issued meanwhile wait for it. A
   * token the registry refuses fails those calls at once with an
   * `AuthenticationError` (UNAUTHENTICATED, -32012), without trying the
   * other nodes. Without it no token is presented (for registries without
   * access control).
   *
   * @example
   * ```ts ignore
   * // not run: needs a registry with access control on and a token of it
   * import { connect } from "@rafter/rpc/deno";
   * const client = connect("tcp://10.0.0.5:7001", {
   *   token: Deno.env.get("RAFTER_TOKEN"),
   * });
   * await client.lookup("billing");
   * ```
   */
  token?: string;
}

/** Options of one registry operation. */
export interface RegistryCallOptions {
  /** Overrides the client's `deadlineMs`. */
  deadlineMs?: number;
  /** Aborts the operation (rejects with CANCELLED). */
  signal?: AbortSignal;
  /**
   * Ask exactly this registry node (`tcp://host:port`), with no fail-over:
   * for local-area bindings, which live on one node.
   */
  node?: string;
  /**
   * Overrides the client's `attemptTimeoutMs` for this operation: how long
   * one node may take before the next is tried (a stopped node costs this
   * much, not the whole deadline).
   */
  attemptTimeoutMs?: number;
}

/**
 * The registry params among `options`: all but the {@link RegistryCallOptions}
 * of the call itself, which the registry refuses as unknown params.
 */
function paramsOf<T extends RegistryCallOptions>(
  options: T,
): Omit<T, keyof RegistryCallOptions> {
  const {
    deadlineMs: _d,
    signal: _s,
    node: _n,
    attemptTimeoutMs: _a,
    ...params
  } = options;
  return params;
}

/** Options of {@link RegistryClient.bind}. */
export interface BindOptions extends RegistryCallOptions {
  /** Attach the binding to this lease. */
  leaseId?: string;
  /** Grant a lease of this TTL and attach the binding to it, in one step. */
  grant?: { ttlMs: number };
  /** Where the binding lives (see Scope). @default "global" */
  scope?: Scope;
}

/**
 * Talks to whichever registry node can answer. Every registry write is
 * safe to repeat (a bind replaces the same id, an unbind of a missing id
 * removes nothing, a keep-alive renews again), so a call that may have
 * reached a node that then died is retried on the next one.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ConnectionPool } from "../connection_pool.ts";
 * import { RegistryClient } from "./registry_client.ts";
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
 * await registry.bind("hello", { id: "h1", url: "tcp://127.0.0.1:9001" });
 * assert.equal((await registry.lookup("hello")).endpoints.length, 1);
 * registry.close();
 * pool.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 */
export class RegistryClient {
  readonly #urls: string[];
  readonly #pool: ConnectionPool;
  readonly #deadlineMs: number;
  readonly #attemptTimeoutMs: number;
  readonly #failFastRounds: number;
  readonly #minBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #closing = new AbortController();
  readonly #token: string | undefined;
  /** Each connection's `registry.authenticate` call, once made. */
  readonly #authenticated = new WeakMap<RpcConnection, Promise<void>>();
  /** Index of the node believed to lead. */
  #leader = 0;
  /** Where the next read goes (round robin). */
  #reader = Math.floor(Math.random() * 1024);

  /**
   * Makes a client; nothing is connected until the first operation.
   *
   * @param urls registry node URLs (`tcp://host:port`); list two or three so
   * the client survives a node's death.
   * @param pool connections, shared with the stubs.
   * @throws {TypeError} when `urls` is empty, a URL is not
   * `tcp://host:port` (a bare `host:port` is taken as tcp), or `token` is
   * not an `rft_…` token.
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
    this.#failFastRounds = options.failFastRounds ?? 2;
    this.#minBackoffMs = options.minBackoffMs ?? 50;
    this.#maxBackoffMs = options.maxBackoffMs ?? 1_000;
    this.#token = options.token === undefined
      ? undefined
      : checkRegistryToken(options.token);
  }

  /** The registry URLs known, including leaders learned from hints. */
  get urls(): readonly string[] {
    return this.#urls;
  }

  /** Aborts when {@link close} is called: long-running helpers stop with it. */
  get signal(): AbortSignal {
    return this.#closing.signal;
  }

  /**
   * Binds `endpoint` under `name` (`name?key=value` adds attributes),
   * replacing an endpoint with the same id (unless another live lease
   * holds that id at another URL).
   *
   * @throws {RpcError} INVALID_PARAMS for a bad name, URL or TTL;
   * LEASE_NOT_FOUND for a `leaseId` that does not exist; ID_IN_USE
   * (-32015, not retried, `data` `IdInUseData` of the protocol) when another live
   * lease holds the id at another URL; UNAVAILABLE or
   * DEADLINE_EXCEEDED when no leader accepted the write in time.
   */
  bind(
    name: string,
    endpoint: EndpointSpec,
    options: BindOptions = {},
  ): Promise<BindResult> {
    const params: BindParams = { name, endpoint };
    if (options.leaseId !== undefined) params.leaseId = options.leaseId;
    if (options.grant !== undefined) params.grant = options.grant;
    if (options.scope !== undefined) params.scope = options.scope;
    return this.call(REGISTRY_METHODS.bind, params, options);
  }

  /**
   * Removes endpoint `id` from `name`; `removed` is 0 if it was not bound
   * (or, with `leaseId`, is now held by another lease).
   */
  unbind(
    name: string,
    id: string,
    options: RegistryCallOptions & { leaseId?: string; scope?: Scope } = {},
  ): Promise<UnbindResult> {
    const params: UnbindParams = { name, id };
    if (options.leaseId !== undefined) params.leaseId = options.leaseId;
    if (options.scope !== undefined) params.scope = options.scope;
    return this.call(REGISTRY_METHODS.unbind, params, options);
  }

  /** Marks endpoint `id` of `name` draining (or serving again). */
  setState(
    name: string,
    id: string,
    state: SetStateParams["state"],
    options: RegistryCallOptions & { leaseId?: string; scope?: Scope } = {},
  ): Promise<WriteResult> {
    const params: SetStateParams & { scope?: Scope } = { name, id, state };
    if (options.leaseId !== undefined) params.leaseId = options.leaseId;
    if (options.scope !== undefined) params.scope = options.scope;
    return this.call(REGISTRY_METHODS.setState, params, options);
  }

  /** The stubs list of `name` (`name?key=value` filters by attributes). */
  lookup(
    name: string,
    options: RegistryCallOptions & Omit<LookupParams, "name"> = {},
  ): Promise<LookupResult> {
    return this.call(
      REGISTRY_METHODS.lookup,
      { name, ...paramsOf(options) },
      options,
    );
  }

  /** Names under `prefix` (every name by default), with counts or endpoints. */
  list(
    prefix = "",
    options: RegistryCallOptions & Omit<ListParams, "prefix"> = {},
  ): Promise<ListResult> {
    return this.call(
      REGISTRY_METHODS.list,
      { prefix, ...paramsOf(options) },
      options,
    );
  }

  /** Grants a lease of `ttlMs` (at least 1.5 × the registry's election timeout). */
  grantLease(
    ttlMs: number,
    options: RegistryCallOptions & { id?: string } = {},
  ): Promise<LeaseGrantResult> {
    const params = options.id === undefined
      ? { ttlMs }
      : { ttlMs, id: options.id };
    return this.call(REGISTRY_METHODS.leaseGrant, params, options);
  }

  /**
   * Renews a lease, reporting the server's `load` if given.
   * @throws {RpcError} LEASE_NOT_FOUND once the lease has expired.
   */
  keepAlive(
    id: string,
    load?: number,
    options?: RegistryCallOptions,
  ): Promise<LeaseKeepAliveResult> {
    const params = load === undefined ? { id } : { id, load };
    return this.call(REGISTRY_METHODS.leaseKeepAlive, params, options);
  }

  /** Revokes a lease; its bindings go with it. */
  revokeLease(
    id: string,
    options?: RegistryCallOptions,
  ): Promise<LeaseRevokeResult> {
    return this.call(REGISTRY_METHODS.leaseRevoke, { id }, options);
  }

  /** Time left on a lease, and its bindings. */
  timeToLive(id: string, options?: RegistryCallOptions): Promise<LeaseInfo> {
    return this.call(REGISTRY_METHODS.leaseTimeToLive, { id }, options);
  }

  /** Every lease. */
  leases(options?: RegistryCallOptions): Promise<LeaseListResult> {
    return this.call(REGISTRY_METHODS.leaseList, {}, options);
  }

  /**
   * Hands leadership to member `to` (default: the most up-to-date other
   * voter) and resolves once another member leads (Raft dissertation
   * §3.10). Sent to the leader, following NOT_LEADER hints. One attempt
   * waits `timeoutMs` plus 1 s for the answer, so the server's own timeout
   * answers first.
   *
   * @param options.to the member to lead next.
   * @param options.timeoutMs how long the leader waits for a member to
   * take over, ms (1..60_000). @default two election timeouts (server side)
   * @throws {RpcError} INVALID_PARAMS when `to` is not a member;
   * LEADER_TRANSFER_FAILED (-32010, not retried) when there is no other
   * voter, or no member took over in time; UNAVAILABLE or
   * DEADLINE_EXCEEDED when no leader answered.
   */
  leaderTransfer(
    options: RegistryCallOptions & LeaderTransferParams = {},
  ): Promise<LeaderTransferResult> {
    const { to, timeoutMs, ...call } = options;
    const params: LeaderTransferParams = {};
    if (to !== undefined) params.to = to;
    if (timeoutMs !== undefined) params.timeoutMs = timeoutMs;
    return this.call(REGISTRY_METHODS.leaderTransfer, params, {
      attemptTimeoutMs: timeoutMs === undefined ? undefined : timeoutMs + 1_000,
      ...call,
    });
  }

  /** Every member with its role and, from the leader, its match index and lag. */
  memberList(options?: RegistryCallOptions): Promise<MemberListResult> {
    return this.call(REGISTRY_METHODS.memberList, {}, options);
  }

  /**
   * Status of the node at `url`, with no retries elsewhere; without `url`,
   * of the first node that answers.
   */
  async status(
    url?: string,
    options: { timeoutMs?: number } = {},
  ): Promise<RegistryStatus> {
    if (url === undefined) {
      return this.call(REGISTRY_METHODS.status, undefined, {
        deadlineMs: options.timeoutMs,
      });
    }
    const connection = await this.#connection(
      formatTcpUrl(parseTcpUrl(url)),
    );
    return connection.call<RegistryStatus>(
      REGISTRY_METHODS.status,
      undefined,
      { timeoutMs: options.timeoutMs ?? this.#attemptTimeoutMs },
    );
  }

  /**
   * Calls a registry method: writes and lease calls on the leader (moving
   * to it on a NOT_LEADER hint), reads on the next node in turn; on a
   * connection failure, attempt timeout or UNAVAILABLE it moves to the next
   * node, backing off with jitter after a round where none answered.
   *
   * @throws {RpcError} UNAVAILABLE (-32006) at once when no registry URL
   * accepted a connection for `failFastRounds` rounds (the message names
   * them and says how to start a registry); the last error, as
   * DEADLINE_EXCEEDED, once the deadline passes; at once, errors a retry
   * cannot fix (bad params, method not found, LEASE_NOT_FOUND…); CANCELLED
   * when the signal aborts or the client is closed.
   */
  call<M extends RegistryMethod>(
    method: M,
    params: ParamsOf<M>,
    options: RegistryCallOptions = {},
  ): Promise<ResultOf<M>> {
    return this.#invoke(
      method,
      params,
      options,
      LEADER_METHODS.has(method),
    ) as Promise<ResultOf<M>>;
  }

  /**
   * Whether access control is on, and which token this client's
   * connection acts as (`you`; null without a token).
   */
  authStatus(options?: RegistryCallOptions): Promise<AuthStatusResult> {
    return this.#invoke(AUTH_METHODS.authStatus, {}, options, false) as Promise<
      AuthStatusResult
    >;
  }

  /**
   * Turns access control on (admin): from then on every connection must
   * authenticate. Sent to the leader.
   */
  authEnable(options?: RegistryCallOptions): Promise<AuthStatusResult> {
    return this.#invoke(AUTH_METHODS.authEnable, {}, options, true) as Promise<
      AuthStatusResult
    >;
  }

  /** Turns access control off (admin). Sent to the leader. */
  authDisable(options?: RegistryCallOptions): Promise<AuthStatusResult> {
    return this.#invoke(AUTH_METHODS.authDisable, {}, options, true) as Promise<
      AuthStatusResult
    >;
  }

  /**
   * Makes a token named `name` with `permissions` (admin): the result's
   * `token` is the only time its secret is shown.
   *
   * @throws {RpcError} INVALID_PARAMS for a bad name or permission;
   * PERMISSION_DENIED without an admin token.
   */
  tokenCreate(
    name: string,
    permissions: readonly Permission[],
    options?: RegistryCallOptions,
  ): Promise<TokenCreateResult> {
    return this.#invoke(
      AUTH_METHODS.tokenCreate,
      { name, permissions: [...permissions] },
      options,
      true,
    ) as Promise<TokenCreateResult>;
  }

  /** Every token, without secrets (admin). */
  tokenList(options?: RegistryCallOptions): Promise<TokenListResult> {
    return this.#invoke(AUTH_METHODS.tokenList, {}, options, false) as Promise<
      TokenListResult
    >;
  }

  /** Revokes token `tokenId` (admin); `revoked` is false when there was none. */
  tokenRevoke(
    tokenId: string,
    options?: RegistryCallOptions,
  ): Promise<TokenRevokeResult> {
    return this.#invoke(
      AUTH_METHODS.tokenRevoke,
      { tokenId },
      options,
      true,
    ) as Promise<TokenRevokeResult>;
  }

  /** {@link call} of any registry method, to the leader when `toLeader`. */
  async #invoke(
    method: string,
    params: unknown,
    options: RegistryCallOptions = {},
    toLeader: boolean,
  ): Promise<unknown> {
    const signal = options.signal === undefined
      ? this.#closing.signal
      : AbortSignal.any([options.signal, this.#closing.signal]);
    if (options.node !== undefined) {
      const url = formatTcpUrl(parseTcpUrl(options.node));
      const connection = await this.#connection(url, signal);
      return await connection.call(method, params as never, {
        timeoutMs: options.deadlineMs ?? this.#attemptTimeoutMs,
        signal,
      });
    }
    // Monotonic: a wall-clock jump must neither end the retries early nor
    // stretch them (a keep-alive given a fraction of its TTL).
    const deadline = performance.now() +
      (options.deadlineMs ?? this.#deadlineMs);
    const attemptTimeoutMs = options.attemptTimeoutMs ??
      this.#attemptTimeoutMs;
    const n = () => this.#urls.length;
    let lastError: unknown = null;
    let lastAnswer: RpcError | null = null;
    let refusedRounds = 0;
    let round = 0;
    let hops = 0;
    // Per round: how many nodes were tried, and how many refused to connect.
    let tried = 0;
    let refused = 0;
    let index = toLeader ? this.#leader : this.#reader++ % n();
    for (let attempt = 0; attempt < 10_000; attempt++) {
      const remaining = deadline - performance.now();
      if (remaining <= 0) break;
      if (signal.aborted) throw cancelled(method);
      const url = this.#urls[index % n()];
      try {
        const connection = await this.#connection(url, signal);
        const result = await connection.call(
          method,
          params as never,
          { timeoutMs: Math.min(remaining, attemptTimeoutMs), signal },
        );
        if (toLeader) this.#leader = index % n();
        return result;
      } catch (error) {
        lastError = error;
        // What a node answered (e.g. why it could not serve a read) says
        // more than a dead node's refusal or this client's own timer: the
        // final message quotes the last such answer.
        if (isNodeAnswer(error)) lastAnswer = error;
        if (signal.aborted) throw cancelled(method);
        // A write that may have taken effect is not sent again when a
        // second one would differ (issue 17: a retried grant made two).
        if (mayHaveApplied(error) && repeatsHarm(method, params)) {
          throw unknownOutcomeError(method, error as RpcError);
        }
        const hint = leaderHint(error);
        if (hint !== null && hint !== url && hops++ <= n()) {
          // Follow the hint at once, but not around a loop of stale hints.
          index = this.#indexOf(hint);
          this.#leader = index;
          continue;
        }
        if (error instanceof ConnectionError) {
          this.#pool.drop(url);
          if (!error.written) refused++;
        } else if (!isRetryableAnswer(error)) {
          throw error;
        }
        tried++;
      }
      index = (index + 1) % n();
      // A leader that failed (stopped, unreachable, deposed) is not asked
      // first again: the next operation starts where this one moves on.
      if (toLeader) this.#leader = index;
      if (tried >= n()) {
        // Every node failed once: give up if none even accepted a
        // connection, else wait before the next round.
        refusedRounds = refused >= tried ? refusedRounds + 1 : 0;
        if (refusedRounds >= this.#failFastRounds) {
          throw noRegistryError(method, this.#urls, lastError);
        }
        tried = 0;
        refused = 0;
        const pause = Math.min(
          backoffDelay(round++, this.#minBackoffMs, this.#maxBackoffMs),
          Math.max(deadline - performance.now(), 0),
        );
        await abortableSleep(pause, signal);
        if (signal.aborted) throw cancelled(method);
      }
    }
    throw noSuccessError(method, this.#urls, lastAnswer ?? lastError);
  }

  /**
   * Cancels every call under way (they reject with CANCELLED) and every
   * helper tied to {@link signal}. The client cannot be used afterwards.
   */
  close(): void {
    this.#closing.abort();
  }

  /**
   * The pool's connection to `url`, authenticated with the client's token
   * first when it has one: concurrent callers wait for the same
   * `registry.authenticate` call.
   *
   * @throws {AuthenticationError} when the node refused the token.
   */
  async #connection(url: string, signal?: AbortSignal): Promise<RpcConnection> {
    const connection = await this.#pool.get(url);
    const token = this.#token;
    if (token === undefined) return connection;
    let authenticated = this.#authenticated.get(connection);
    if (authenticated === undefined) {
      authenticated = presentToken(
        connection,
        "registry",
        token,
        this.#attemptTimeoutMs,
      );
      this.#authenticated.set(connection, authenticated);
      // Settled is the common case: later calls need no race, nor a listener.
      authenticated.then(
        () => this.#authenticated.set(connection, AUTHENTICATED),
        () => {},
      );
    }
    if (authenticated !== AUTHENTICATED) {
      await untilAborted(authenticated, signal);
    }
    return connection;
  }

  #indexOf(url: string): number {
    const index = this.#urls.indexOf(url);
    return index === -1 ? this.#urls.push(url) - 1 : index;
  }
}

/** A settled authentication. */
const AUTHENTICATED: Promise<void> = Promise.resolve();

/** `promise`, or a rejection with the signal's reason once it aborts first. */
async function untilAborted(
  promise: Promise<void>,
  signal: AbortSignal | undefined,
): Promise<void> {
  if (signal === undefined) return await promise;
  signal.throwIfAborted();
  let onAbort = () => {};
  try {
    await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        onAbort = () => reject(signal.reason);
        signal.addEventListener("abort", onAbort, { once: true });
      }),
    ]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

function cancelled(method: string): RpcError {
  return new RpcError(CANCELLED, `Cancelled: the caller aborted ${method}`);
}
