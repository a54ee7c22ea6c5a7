/**
 * Cluster stubs: typed proxies whose method calls go to one of the servers
 * bound under a name, chosen per call by a distributor, failing over to
 * another server without ever running a call twice that is not idempotent.
 *
 * Every call has one deadline for all its attempts; each attempt has its
 * own timeout (a hung server costs one attempt, not the deadline); retries
 * are bounded by attempts, the deadline and a retry budget; idempotent
 * calls may be hedged. Failures reach the caller typed by what may have
 * happened: {@link NotSentError}, {@link AmbiguousError},
 * {@link ServerError}.
 *
 * @module
 */

import {
  CANCELLED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  messageOf,
  RpcError,
} from "../../rpc/errors.ts";
import type {
  BatchRequest,
  BatchResult,
  RpcConnection,
} from "../../rpc/client/connection.ts";
import { NO_ENDPOINTS } from "../../protocol/registry.ts";
import { withDeadline } from "../../internal/timing.ts";
import type { ClusterMap } from "../cluster_map/cluster_map.ts";
import type { ConnectionPool } from "../connection_pool.ts";
import {
  type CallInfo,
  type Candidate,
  defaultDecision,
  type Distributor,
  type FailureInfo,
  type FailureKind,
} from "../distributors/distributor.ts";
import type {
  EndpointHealth,
  HealthBook,
} from "../cluster_map/endpoint_health.ts";
import { AmbiguousError, NotSentError, ServerError } from "./call_errors.ts";
import { RetryBudget, type RetryBudgetOptions } from "./retry_budget.ts";
import { roundRobin } from "../distributors/round_robin.ts";

/**
 * Property names a stub never turns into remote calls: `then` (so the stub
 * is not a thenable), `toJSON`, those of `Object.prototype` (so that
 * `JSON.stringify(stub)`, template strings and inspection stay local), and
 * the stub's own `$call`, `$notify`, `$batch`, `$with`. Call a remote method of such
 * a name with `stub.$call(method, params)`.
 */
const NOT_REMOTE = new Set([
  "then",
  "toJSON",
  "$call",
  "$notify",
  "$batch",
  "$with",
  ...Object.getOwnPropertyNames(Object.prototype),
]);

/** Hedged requests (for idempotent methods only). */
export interface HedgeOptions {
  /**
   * Send a second attempt to another server when the first has not
   * answered within this long, ms. Default: the `percentile` of the
   * stub's recent latencies (no hedge before 20 calls were measured).
   */
  delayMs?: number;
  /** The latency percentile that triggers a hedge. @default 0.95 */
  percentile?: number;
}

/** Settings of one stub. */
export interface StubOptions {
  /** Picks the server per call. @default roundRobin() */
  distributor?: Distributor;
  /**
   * Methods safe to run twice (`true` for all). A call whose request may
   * have reached a server that then failed is retried elsewhere only if
   * its method is idempotent. @default none
   */
  idempotent?: boolean | readonly string[];
  /** Deadline of each call, all attempts included, ms. @default 30_000 */
  deadlineMs?: number;
  /** Most attempts per call (hedges included). @default 5 */
  maxAttempts?: number;
  /**
   * Timeout of one attempt, ms. Default: for idempotent methods, the time
   * left divided by the attempts left (so a hung server costs one share
   * and the call moves on); for the others, the time left (their timed-out
   * attempt cannot be retried anyway).
   */
  attemptTimeoutMs?: number;
  /**
   * Bounds retries across calls (Finagle's RetryBudget), or `false` for no
   * bound but `maxAttempts`. @default 20 % of calls + 10 per second, over 10 s
   */
  retryBudget?: RetryBudgetOptions | RetryBudget | false;
  /** Hedge idempotent calls that are slower than usual. @default off */
  hedge?: HedgeOptions;
}

/** Options of one call. */
export interface StubCallOptions {
  /** Aborting it rejects the call with CANCELLED (-32005) at once. */
  signal?: AbortSignal;
  /** Overrides the stub's deadline, ms. */
  deadlineMs?: number;
  /** Overrides the stub's attempt timeout, ms. */
  attemptTimeoutMs?: number;
  /** Overrides whether the method is idempotent, for this call. */
  idempotent?: boolean;
}

/** The stub's own members, beside the remote methods. */
export interface StubControls<T> {
  /** Calls any method by name, with positional or named params and per-call options. */
  $call<R = unknown>(
    method: string,
    params?: unknown[] | Record<string, unknown>,
    options?: StubCallOptions,
  ): Promise<R>;
  /**
   * Sends a notification (no answer, no retry once sent) to one server.
   * @throws {NotSentError} when no server could be reached.
   */
  $notify(
    method: string,
    params?: unknown[] | Record<string, unknown>,
    options?: StubCallOptions,
  ): Promise<void>;
  /**
   * Sends `requests` as one JSON-RPC batch to one server (fail-over as for
   * a call: retried elsewhere if not sent, or if every member is
   * idempotent); one result per request, in order, a member's error answer
   * as `{ ok: false, error: ServerError }`.
   */
  $batch(
    requests: readonly BatchRequest[],
    options?: StubCallOptions,
  ): Promise<BatchResult[]>;
  /** The same stub with these options on every call (a deadline, a signal…). */
  $with(options: StubCallOptions): Stub<T>;
}

/**
 * The typed face of a stub: each method of `T` returns a promise of its
 * result, plus {@link StubControls}. Declare `T` as the server's method
 * table.
 *
 * @example
 * ```ts
 * import type { Stub } from "./cluster_stub.ts";
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * type HelloStub = Stub<Hello>; // { greet(name: string): Promise<{ greeting: string; server: string }>, $call, $notify, $with }
 * ```
 */
export type Stub<T> =
  & {
    readonly [K in keyof T]: T[K] extends (...args: infer A) => infer R
      ? (...args: A) => Promise<Awaited<R>>
      : never;
  }
  & StubControls<T>;

/** What a stub needs from its client. */
export interface StubContext {
  /** The name's cluster map. */
  map: ClusterMap;
  /** The client's connections. */
  pool: ConnectionPool;
  /** The client's records of every server. */
  health: HealthBook;
  /**
   * Aborts when the client is closed: calls reject with CANCELLED from
   * then on, and one under way is not retried.
   */
  closed?: AbortSignal;
}

/** Sends one attempt on a connection: a call, or a batch. */
type Send = (
  connection: RpcConnection,
  options: { timeoutMs: number; signal: AbortSignal | undefined },
) => Promise<unknown>;

/**
 * The method name a distributor sees for a batch (`CallInfo.method`); its
 * `params` are then the batch's requests.
 */
export const BATCH_METHOD = "rpc.batch";

/** How one attempt ended. */
type Outcome =
  | { ok: true; value: unknown }
  | { ok: false; kind: FailureKind; error: RpcError }
  | { ok: false; kind: "cancelled"; error: RpcError; written: boolean };

const NONE_TRIED: readonly string[] = Object.freeze([]);
const LATENCY_SAMPLES = 512;
/** Methods whose error label a stub keeps (callers may make up method names). */
const MAX_LABELS = 256;
const MIN_HEDGE_SAMPLES = 20;

/**
 * Places calls for one name: distributor choice, fail-over, retry budget,
 * hedging, typed errors.
 *
 * Retry rule: an attempt whose request never left this client (a refused
 * or closed connection) is retried elsewhere; one that may have reached
 * its server (the connection broke, or it timed out) is retried only for
 * idempotent methods; an error answer from a server is not retried; a
 * distributor's `onError` may decide otherwise (including answering the
 * caller with a value). A retry goes to a server the call has not tried
 * yet while there is one.
 */
export class ClusterStub {
  readonly #name: string;
  readonly #context: StubContext;
  readonly #distributor: Distributor;
  readonly #idempotent: (method: string) => boolean;
  readonly #deadlineMs: number;
  readonly #maxAttempts: number;
  readonly #attemptTimeoutMs: number | undefined;
  readonly #budget: RetryBudget | null;
  readonly #hedge: HedgeOptions | undefined;
  readonly #latencies: number[] = [];
  readonly #labels = new Map<string, string>();
  #latencyCursor = 0;

  /**
   * Makes a stub for `name`; nothing is looked up or connected until a call.
   *
   * @param name service name (`name?key=value` only uses matching servers).
   * @param context the name's map, and the client's pool and health records.
   * @throws {RangeError} for a `maxAttempts` below 1 or bad budget options.
   */
  constructor(name: string, context: StubContext, options: StubOptions = {}) {
    this.#name = name;
    this.#context = context;
    this.#distributor = options.distributor ?? roundRobin();
    const idempotent = options.idempotent ?? false;
    this.#idempotent = typeof idempotent === "boolean"
      ? () => idempotent
      : (method) => idempotent.includes(method);
    this.#deadlineMs = options.deadlineMs ?? 30_000;
    this.#maxAttempts = options.maxAttempts ?? 5;
    if (!Number.isSafeInteger(this.#maxAttempts) || this.#maxAttempts < 1) {
      throw new RangeError(
        `maxAttempts must be a positive integer, got ${this.#maxAttempts}`,
      );
    }
    this.#attemptTimeoutMs = options.attemptTimeoutMs;
    this.#budget = options.retryBudget === false
      ? null
      : options.retryBudget instanceof RetryBudget
      ? options.retryBudget
      : new RetryBudget(options.retryBudget);
    this.#hedge = options.hedge;
  }

  /**
   * Calls `method` with `params` (positional, or named as an object) on a
   * server of the name.
   *
   * @throws {ServerError} the server's error answer.
   * @throws {NotSentError} no server ran the call: none in play
   * (NO_ENDPOINTS, -32002), every attempt refused, the caller aborted
   * (CANCELLED) or the deadline passed (DEADLINE_EXCEEDED) before it was
   * sent.
   * @throws {AmbiguousError} the call may have run on `error.endpoint`:
   * its connection broke or it timed out, and the method is not idempotent
   * (or the attempts, the deadline or the retry budget ran out).
   * @throws registry errors when the first lookup of the name failed.
   */
  call<R = unknown>(
    method: string,
    params: unknown[] | Record<string, unknown> = [],
    options: StubCallOptions = {},
  ): Promise<R> {
    return this.#run<R>(
      method,
      params,
      options.idempotent ?? this.#idempotent(method),
      options,
      null,
    );
  }

  /**
   * Sends `requests` as one JSON-RPC batch to one server chosen by the
   * distributor (which sees the method {@link BATCH_METHOD} and the
   * requests as params), with the fail-over rules of {@link call}: the
   * batch is idempotent only if every member's method is (or
   * `options.idempotent` says so). One deadline covers the batch.
   *
   * @returns one {@link BatchResult} per request, in order: the result, or
   * the server's error answer as a {@link ServerError} (not retried).
   * @throws as {@link call} does, for failures of the whole batch.
   * @throws {RangeError} for an empty batch.
   */
  async batch(
    requests: readonly BatchRequest[],
    options: StubCallOptions = {},
  ): Promise<BatchResult[]> {
    if (!Array.isArray(requests) || requests.length === 0) {
      throw new RangeError("a batch must hold at least one request");
    }
    const idempotent = options.idempotent ??
      requests.every((r) =>
        r.notification !== true && this.#idempotent(r.method)
      );
    return await this.#run<BatchResult[]>(
      BATCH_METHOD,
      requests.map((r) => ({ ...r })),
      idempotent,
      options,
      async (connection, attempt) => {
        const results = await connection.batch(requests, attempt);
        return results.map((result): BatchResult =>
          result.ok ? result : {
            ok: false,
            error: new ServerError(
              result.error.code,
              result.error.message,
              result.error.data,
              connection.url,
            ),
          }
        );
      },
    );
  }

  async #run<R>(
    method: string,
    params: unknown[] | Record<string, unknown>,
    idempotent: boolean,
    options: StubCallOptions,
    sendOther: Send | null,
  ): Promise<R> {
    // null: a plain call (made without a closure on the fast path).
    let send = sendOther;
    const deadlineMs = options.deadlineMs ?? this.#deadlineMs;
    const calledAt = Date.now();
    const deadline = calledAt + deadlineMs;
    const { signal } = options;
    const label = this.#label(method);
    if (signal?.aborted) throw cancelled(label, null);
    if (this.#context.closed?.aborted) throw clientClosed(label, null);
    this.#budget?.deposit(calledAt);
    /** The endpoints tried so far (made at the first retry). */
    let tried: string[] | null = null;
    /** The endpoint an earlier attempt may have run the call on. */
    let ranOn: string | null = null;
    /** That attempt's failure: the call ends ambiguous, whatever follows. */
    let ran: AmbiguousError | null = null;
    let last: RpcError | null = null;
    for (let attempt = 0; attempt < this.#maxAttempts; attempt++) {
      if (attempt === 0 ? deadlineMs <= 0 : Date.now() >= deadline) break;
      // The fast path (no lookup due) takes no await.
      const lookup = this.#context.map.needsLookup();
      const candidates = lookup
        ? await this.#candidates(deadline, signal, label, deadlineMs, ranOn)
        : this.#context.map.candidates();
      // What is left after the lookup bounds the attempt (and the deadline
      // the server is sent).
      const remaining = attempt === 0 && !lookup
        ? deadlineMs
        : deadline - Date.now();
      if (remaining <= 0) break;
      if (candidates.length === 0) {
        throw mayHaveRun(
          last ?? new NotSentError(
            `No endpoints: nothing is bound under "${this.#name}"; start a server that binds it, or check the name`,
            { code: NO_ENDPOINTS, endpoint: null, data: { name: this.#name } },
          ),
          ran,
        );
      }
      const untried = tried === null
        ? candidates
        : candidates.filter((c) => !tried!.includes(c.id));
      const info: CallInfo = {
        name: this.#name,
        method,
        params,
        attempt,
        idempotent,
        tried: tried === null ? NONE_TRIED : [...tried],
        remainingMs: remaining,
      };
      const endpoint = this.#choose(
        untried.length > 0 ? untried : candidates,
        info,
        label,
      );
      const attemptsLeft = this.#maxAttempts - attempt;
      const timeoutMs = Math.min(
        remaining,
        options.attemptTimeoutMs ?? this.#attemptTimeoutMs ??
          (idempotent ? Math.max(remaining / attemptsLeft, 1) : remaining),
      );
      const hedging = idempotent && this.#hedge !== undefined &&
        attemptsLeft > 1;
      const open = hedging ? undefined : this.#context.pool.ready(endpoint.url);
      let outcome: Outcome | undefined;
      if (open !== undefined) {
        // The fast path: the connection is open, and the call's own await
        // is the only one (no promise or closure of an attempt, no outcome
        // object for an answer).
        const health = this.#context.health.of(endpoint.url);
        health.started();
        const sentAt = performance.now();
        const sending = { timeoutMs: Math.max(1, timeoutMs), signal };
        let value: unknown;
        try {
          value = await (send === null
            ? open.call(method, params, sending)
            : send(open, sending));
          this.#answered(health, sentAt);
        } catch (error) {
          (tried ??= []).push(endpoint.id);
          // The attempt's start in wall-clock ms, as #classify takes it.
          const started = Date.now() - (performance.now() - sentAt);
          outcome = this.#classify(error, endpoint.url, label, started);
        } finally {
          health.ended();
        }
        if (outcome === undefined) {
          return this.#returned(value, info, endpoint);
        }
      } else {
        send ??= (connection, attempt) =>
          connection.call(method, params, attempt);
        (tried ??= []).push(endpoint.id);
        outcome = hedging
          ? await this.#hedged(
            endpoint,
            untried.filter((c) => c !== endpoint),
            label,
            send,
            timeoutMs,
            signal,
            info,
            tried,
          )
          : await this.#attempt(endpoint, label, send, timeoutMs, signal);
      }
      if (outcome.ok) return this.#returned(outcome.value, info, endpoint);
      if (outcome.kind === "cancelled") {
        throw cancelled(label, outcome.written ? endpoint.url : ranOn);
      }
      last = outcome.error;
      if (outcome.kind === "ambiguous") {
        ranOn = endpoint.url;
        ran = outcome.error as AmbiguousError;
      }
      // Closing the client closed the connection: no retry.
      if (this.#context.closed?.aborted && outcome.kind !== "server") {
        throw clientClosed(label, ranOn);
      }
      if (Date.now() >= deadline) break;
      const failure: FailureInfo = {
        ...info,
        endpoint,
        kind: outcome.kind,
        safeToRetry: outcome.kind === "notSent" || idempotent,
      };
      const decision = this.#distributor.onError?.(outcome.error, failure) ??
        defaultDecision(failure);
      if (typeof decision === "object") return decision.return as R;
      if (decision === "throw") throw mayHaveRun(outcome.error, ran);
      if (attempt + 1 >= this.#maxAttempts) break;
      if (this.#budget !== null && !this.#budget.tryWithdraw()) {
        throw withNote(
          mayHaveRun(outcome.error, ran),
          "not retried: the stub's retry budget is spent (too many retries lately: the cluster is failing)",
        );
      }
    }
    if (last !== null && Date.now() < deadline) throw mayHaveRun(last, ran);
    throw deadlineError(label, deadlineMs, ranOn, last);
  }

  /**
   * Sends a notification to one server chosen by the distributor; a
   * server that cannot be reached is replaced by another (a notification
   * that was sent is never sent again).
   *
   * @throws {NotSentError} when no server took it.
   */
  async notify(
    method: string,
    params: unknown[] | Record<string, unknown> = [],
    options: StubCallOptions = {},
  ): Promise<void> {
    const deadlineMs = options.deadlineMs ?? this.#deadlineMs;
    const deadline = Date.now() + deadlineMs;
    const label = this.#label(method);
    const tried: string[] = [];
    let last: RpcError | null = null;
    for (let attempt = 0; attempt < this.#maxAttempts; attempt++) {
      if (options.signal?.aborted) throw cancelled(label, null);
      if (this.#context.closed?.aborted) throw clientClosed(label, null);
      if (Date.now() >= deadline) break;
      const candidates = await this.#candidates(
        deadline,
        options.signal,
        label,
        deadlineMs,
        null,
      );
      const untried = candidates.filter((c) => !tried.includes(c.id));
      if (untried.length === 0) break;
      const endpoint = this.#choose(untried, {
        name: this.#name,
        method,
        params,
        attempt,
        idempotent: false,
        tried: [...tried],
        remainingMs: deadline - Date.now(),
      }, label);
      tried.push(endpoint.id);
      try {
        const connection = await this.#connection(
          endpoint.url,
          deadline,
          options.signal,
          label,
        );
        await connection.notify(method, params);
        return;
      } catch (error) {
        if (error instanceof ConnectionError && !error.written) {
          this.#context.health.of(endpoint.url).failed("refused");
          last = new NotSentError(
            `${label} was not sent to ${endpoint.url}: ${error.message}`,
            { endpoint: endpoint.url, cause: error },
          );
          continue;
        }
        if (error instanceof RpcError) throw error;
        throw error;
      }
    }
    throw last ?? new NotSentError(
      `No endpoints: no server of "${this.#name}" took the notification ${label}`,
      { code: NO_ENDPOINTS, endpoint: null },
    );
  }

  /** The typed proxy over {@link call}, with `$call`, `$notify`, `$batch` and `$with`. */
  proxy<T>(defaults: StubCallOptions = {}): Stub<T> {
    const methods = new Map<string, (...args: unknown[]) => Promise<unknown>>();
    const merged = (options?: StubCallOptions) =>
      options === undefined ? defaults : { ...defaults, ...options };
    const controls: StubControls<T> = {
      $call: <R>(
        method: string,
        params?: unknown[] | Record<string, unknown>,
        options?: StubCallOptions,
      ) => this.call<R>(method, params, merged(options)),
      $notify: (method, params, options) =>
        this.notify(method, params, merged(options)),
      $batch: (requests, options) => this.batch(requests, merged(options)),
      $with: (options) => this.proxy<T>(merged(options)),
    };
    return new Proxy({}, {
      get: (target, property) => {
        if (typeof property === "string" && Object.hasOwn(controls, property)) {
          return controls[property as keyof StubControls<T>];
        }
        // Not a thenable, so `await stub` and Promise.resolve(stub) work;
        // toString, valueOf… are the plain object's own.
        if (typeof property !== "string" || NOT_REMOTE.has(property)) {
          return Reflect.get(target, property);
        }
        let method = methods.get(property);
        if (method === undefined) {
          method = (...args: unknown[]) => this.call(property, args, merged());
          methods.set(property, method);
        }
        return method;
      },
    }) as Stub<T>;
  }

  /** The candidates in play, looking the name up (within the deadline) when needed. */
  async #candidates(
    deadline: number,
    signal: AbortSignal | undefined,
    label: string,
    deadlineMs: number,
    ranOn: string | null,
  ): Promise<readonly Candidate[]> {
    const { map } = this.#context;
    // The fast path: no timer, no lookup.
    if (!map.needsLookup()) return map.candidates();
    return await withDeadline(
      map.endpoints(),
      deadline,
      signal,
      () =>
        deadlineError(
          label,
          deadlineMs,
          ranOn,
          null,
          "looking up the name in the registry",
        ),
      () => cancelled(label, ranOn),
    );
  }

  #choose(
    candidates: readonly Candidate[],
    info: CallInfo,
    label: string,
  ): Candidate {
    const chosen = this.#distributor.choose(candidates, info);
    const endpoint = chosen === undefined
      ? undefined
      : candidates.includes(chosen)
      ? chosen
      : candidates.find((c) => c.id === chosen.id && c.url === chosen.url);
    if (endpoint === undefined) {
      throw new TypeError(
        `the distributor's choose() returned ${
          JSON.stringify(chosen === undefined ? undefined : chosen.id)
        } for ${label}; it must return one of the endpoints it was given`,
      );
    }
    return endpoint;
  }

  async #connection(
    url: string,
    deadline: number,
    signal: AbortSignal | undefined,
    label: string,
  ): Promise<RpcConnection> {
    return this.#context.pool.ready(url) ??
      await withDeadline(
        this.#context.pool.get(url),
        deadline,
        signal,
        () =>
          new NotSentError(
            `Deadline exceeded: ${label} could not connect to ${url} in time`,
            {
              code: DEADLINE_EXCEEDED,
              endpoint: url,
              data: { step: `connecting to ${url}` },
            },
          ),
        () => cancelled(label, null),
      );
  }

  /** One attempt on one endpoint, its failure classified. */
  async #attempt(
    endpoint: Candidate,
    label: string,
    send: Send,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Outcome> {
    const { url } = endpoint;
    const health = this.#context.health.of(url);
    health.started();
    const started = Date.now();
    try {
      const connection = this.#context.pool.ready(url) ??
        await this.#connection(url, started + timeoutMs, signal, label);
      // The latency sample leaves out opening the connection: a first
      // call's dial must not make its server look slow.
      // performance.now(): local calls take well under a millisecond.
      const sentAt = performance.now();
      const value = await send(connection, {
        timeoutMs: Math.max(1, started + timeoutMs - Date.now()),
        signal,
      });
      this.#answered(health, sentAt);
      return { ok: true, value };
    } catch (error) {
      return this.#classify(error, url, label, started);
    } finally {
      health.ended();
    }
  }

  #classify(
    error: unknown,
    url: string,
    label: string,
    started: number,
  ): Outcome {
    const health = this.#context.health.of(url);
    if (error instanceof NotSentError) {
      // From opening the connection: refused, in its reconnect back-off,
      // or not open within the attempt's timeout.
      if (error.code === CANCELLED) {
        return { ok: false, kind: "cancelled", error, written: false };
      }
      health.failed(error.code === DEADLINE_EXCEEDED ? "timeout" : "refused");
      return { ok: false, kind: "notSent", error };
    }
    if (error instanceof ConnectionError) {
      // A closed connection is forgotten by the pool; others to the same
      // server (one draining its calls) are left alone.
      if (!error.written) {
        health.failed("refused");
        return {
          ok: false,
          kind: "notSent",
          error: new NotSentError(
            `${label} was not sent: ${error.message}`,
            { endpoint: url, cause: error },
          ),
        };
      }
      health.failed("broken");
      return {
        ok: false,
        kind: "ambiguous",
        error: new AmbiguousError(
          `${label} may have run on ${url}: ${error.message}`,
          { endpoint: url, cause: error },
        ),
      };
    }
    if (error instanceof RpcError) {
      const data = error.data as { written?: unknown } | undefined;
      const local = data !== undefined && typeof data.written === "boolean" &&
        (error.code === DEADLINE_EXCEEDED || error.code === CANCELLED);
      if (local && error.code === CANCELLED) {
        return {
          ok: false,
          kind: "cancelled",
          error,
          written: data!.written === true,
        };
      }
      // The attempt's deadline passed: by this client's timer, or by the
      // server, which honoured the deadline the attempt sent it and said
      // so first (`{ timeoutMs, started }`): the same as that timer.
      const sent = error.data as { timeoutMs?: unknown; started?: unknown };
      const byServer = !local && error.code === DEADLINE_EXCEEDED &&
        typeof sent === "object" && sent !== null &&
        typeof sent.timeoutMs === "number" && typeof sent.started === "boolean";
      if (local || byServer) {
        if (local ? data!.written === false : sent.started === false) {
          return {
            ok: false,
            kind: "notSent",
            error: new NotSentError(`${label}: ${error.message}`, {
              code: DEADLINE_EXCEEDED,
              endpoint: url,
              cause: error,
            }),
          };
        }
        health.failed("timeout");
        return {
          ok: false,
          kind: "ambiguous",
          error: new AmbiguousError(
            `${label} may have run on ${url}: ${
              local
                ? `no answer within ${
                  Date.now() - started
                } ms (the attempt's timeout)`
                : error.message
            }`,
            { code: DEADLINE_EXCEEDED, endpoint: url, cause: error },
          ),
        };
      }
      // An error answer: the server is alive.
      health.answered(Date.now() - started);
      return {
        ok: false,
        kind: "server",
        error: new ServerError(error.code, error.message, error.data, url),
      };
    }
    throw error;
  }

  /**
   * An attempt, and, when it has not answered within the hedge delay, a
   * second one on another server; the first answer wins, the other is
   * cancelled.
   */
  async #hedged(
    first: Candidate,
    others: Candidate[],
    label: string,
    send: Send,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    info: CallInfo,
    tried: string[],
  ): Promise<Outcome> {
    const delay = this.#hedgeDelay();
    if (delay === null || delay >= timeoutMs || others.length === 0) {
      return await this.#attempt(first, label, send, timeoutMs, signal);
    }
    const controllers = [new AbortController(), new AbortController()];
    const signals = controllers.map((c) =>
      signal === undefined ? c.signal : AbortSignal.any([signal, c.signal])
    );
    const primary = this.#attempt(first, label, send, timeoutMs, signals[0]);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const hedgeDue = new Promise<"hedge">((resolve) => {
      timer = setTimeout(() => resolve("hedge"), delay);
    });
    const early = await Promise.race([primary, hedgeDue]);
    clearTimeout(timer);
    if (early !== "hedge") return early;
    if (
      this.#context.closed?.aborted ||
      (this.#budget !== null && !this.#budget.tryWithdraw())
    ) {
      return await primary;
    }
    const second = this.#choose(others, { ...info, tried: [...tried] }, label);
    tried.push(second.id);
    const backup = this.#attempt(
      second,
      label,
      send,
      Math.max(1, timeoutMs - delay),
      signals[1],
    );
    const attempts = [primary, backup];
    // The first success wins; a failure waits for the other.
    const winner = await new Promise<Outcome>((resolve) => {
      let failures = 0;
      let lastFailure: Outcome | null = null;
      attempts.forEach((attempt, i) =>
        attempt.then((outcome) => {
          if (outcome.ok) {
            controllers[1 - i].abort();
            resolve(outcome);
          } else if (++failures === 2) {
            resolve(
              lastFailure !== null && lastFailure.ok === false &&
                lastFailure.kind === "ambiguous"
                ? lastFailure
                : outcome,
            );
          } else {
            lastFailure = outcome;
          }
        })
      );
    });
    return winner;
  }

  #hedgeDelay(): number | null {
    const hedge = this.#hedge!;
    if (hedge.delayMs !== undefined) return hedge.delayMs;
    if (this.#latencies.length < MIN_HEDGE_SAMPLES) return null;
    const sorted = [...this.#latencies].sort((a, b) => a - b);
    const p = hedge.percentile ?? 0.95;
    return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  }

  /** The value a call answers: `value`, or what the distributor's `onReturn` makes of it. */
  #returned<R>(value: unknown, info: CallInfo, endpoint: Candidate): R {
    const onReturn = this.#distributor.onReturn;
    if (onReturn === undefined) return value as R;
    const replaced = onReturn(value, { ...info, endpoint });
    return (replaced === undefined ? value : replaced) as R;
  }

  /** `"name.method"`, as errors name a call; one string per method. */
  #label(method: string): string {
    let label = this.#labels.get(method);
    if (label === undefined) {
      label = `"${this.#name}.${method}"`;
      if (this.#labels.size < MAX_LABELS) this.#labels.set(method, label);
    }
    return label;
  }

  /** Records an answer `sentAt` (performance.now()) in the endpoint's health and the hedge samples. */
  #answered(health: EndpointHealth, sentAt: number): void {
    const latency = performance.now() - sentAt;
    health.answered(latency);
    this.#sample(latency);
  }

  #sample(latency: number): void {
    if (this.#hedge === undefined) return;
    if (this.#latencies.length < LATENCY_SAMPLES) {
      this.#latencies.push(latency);
    } else {
      this.#latencies[this.#latencyCursor] = latency;
      this.#latencyCursor = (this.#latencyCursor + 1) % LATENCY_SAMPLES;
    }
  }
}

/** The CANCELLED error of an aborted call: ambiguous if an attempt may have run. */
function cancelled(label: string, ranOn: string | null): RpcError {
  return ranOn === null
    ? new NotSentError(
      `Cancelled: the call to ${label} was aborted before it was sent`,
      { code: CANCELLED, endpoint: null },
    )
    : new AmbiguousError(
      `Cancelled: the call to ${label} was aborted; it may have run on ${ranOn}`,
      { code: CANCELLED, endpoint: ranOn },
    );
}

/** The CANCELLED error of a call its client's `close()` ended. */
function clientClosed(label: string, ranOn: string | null): RpcError {
  return ranOn === null
    ? new NotSentError(
      `Cancelled: ${label} was not sent: its client is closed`,
      { code: CANCELLED, endpoint: null },
    )
    : new AmbiguousError(
      `Cancelled: the client of ${label} was closed while the call was under way; it may have run on ${ranOn}`,
      { code: CANCELLED, endpoint: ranOn },
    );
}

function deadlineError(
  label: string,
  deadlineMs: number,
  ranOn: string | null,
  last: RpcError | null,
  step?: string,
): RpcError {
  const lastStep = (last?.data as { step?: unknown } | undefined)?.step;
  const under = step ?? (typeof lastStep === "string" ? lastStep : undefined);
  const head =
    `Deadline exceeded: ${label} did not get an answer within ${deadlineMs} ms${
      under === undefined ? "" : ` (${under} still under way)`
    }`;
  // An attempt cut off by the deadline itself adds nothing to say.
  const cutOff = last !== null && last.code === DEADLINE_EXCEEDED;
  const detail = last === null || cutOff ? "" : `; last error: ${last.message}`;
  return ranOn === null
    ? new NotSentError(`${head}${detail}`, {
      code: DEADLINE_EXCEEDED,
      endpoint: null,
      cause: last ?? undefined,
    })
    : new AmbiguousError(`${head}; it may have run on ${ranOn}${detail}`, {
      code: DEADLINE_EXCEEDED,
      endpoint: ranOn,
      cause: last ?? undefined,
    });
}

/**
 * The error a call ends with: `error`, unless it says the call was not sent
 * while an earlier attempt (`ran`) may have run it: then an
 * {@link AmbiguousError} naming that attempt's endpoint, with both reasons.
 */
function mayHaveRun(error: RpcError, ran: AmbiguousError | null): RpcError {
  if (ran === null || !(error instanceof NotSentError)) return error;
  return new AmbiguousError(
    `${ran.message}; the last attempt: ${error.message}`,
    { code: error.code, endpoint: ran.endpoint, cause: error },
  );
}

/** The same kind of error with a note added to its message. */
function withNote(error: RpcError, note: string): RpcError {
  const message = `${error.message}; ${note}`;
  if (error instanceof AmbiguousError) {
    return new AmbiguousError(message, {
      code: error.code,
      endpoint: error.endpoint,
      cause: error,
    });
  }
  if (error instanceof NotSentError) {
    return new NotSentError(message, {
      code: error.code,
      endpoint: error.endpoint,
      cause: error,
    });
  }
  if (error instanceof ServerError) {
    return new ServerError(error.code, message, error.data, error.endpoint);
  }
  return new RpcError(
    error.code,
    `${message} (${messageOf(error)})`,
    error.data,
  );
}
