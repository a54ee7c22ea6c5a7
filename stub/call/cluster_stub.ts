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
 * This file makes the stub (options, the typed proxy); a call goes
 * through small pieces, each with one job: `retry_loop.ts` (the one loop
 * of attempts, for calls and notifications alike), `call_rule.ts` and
 * `notification_rule.ts` (what differs between the two), `attempt.ts` (one
 * attempt on one endpoint: the distributor's pick, the pooled connection,
 * the timeout), `outcome.ts` (what an attempt came to, the retry decision
 * and the errors a call ends with) and `hedge.ts` (hedged requests).
 *
 * @module
 */

import type { BatchRequest, BatchResult } from "../../rpc/client/connection.ts";
import type { Distributor } from "../distributors/distributor.ts";
import { ServerError } from "./call_errors.ts";
import { RetryBudget, type RetryBudgetOptions } from "./retry_budget.ts";
import { roundRobin } from "../distributors/round_robin.ts";
import { Attempts, type StubContext } from "./attempt.ts";
import { DEFAULT_HEDGE, type HedgeOptions, hedgeProblem } from "./latencies.ts";
import type { StubCallOptions } from "./call_options.ts";
import { NOTIFICATION } from "./notification_rule.ts";
import { CALL } from "./call_rule.ts";
import { RetryLoop } from "./retry_loop.ts";

export type { StubContext } from "./attempt.ts";
export type { HedgeOptions } from "./latencies.ts";
export type { StubCallOptions } from "./call_options.ts";

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
  /**
   * Most attempts per call (hedges included). An attempt that was not
   * sent, to an endpoint the call had not tried yet, is not counted: a
   * not-sent call moves on to every untried endpoint within its deadline.
   * @default 5
   */
  maxAttempts?: number;
  /**
   * Timeout of one attempt, ms (capped by the time left of the deadline).
   *
   * Default, for an idempotent call: it follows the latency of the method
   * on the name's cluster, `max(100 ms, 3 × p99)`, the p99 of the last 512
   * answered attempts of the method through any stub of the name (read
   * from a copy sorted every 32 answers), so that a frozen server costs a
   * call a few times the usual latency instead of a share of the deadline,
   * and is ejected after its first timed-out attempts. Before 20 answers
   * were sampled it is the time left divided by the attempts left. The
   * call's last attempt, and an attempt whose retry the retry budget could
   * not pay for, get the time left.
   *
   * Default, for a call that is not idempotent: the time left. Its
   * attempt that timed out cannot be retried (it may have run), so timing
   * it out early would only turn a late success into an
   * `AmbiguousError`.
   */
  attemptTimeoutMs?: number;
  /**
   * Bounds retries across calls (Finagle's RetryBudget), or `false` for no
   * bound but `maxAttempts`. Only retries of attempts that may have run
   * spend it: one that was not sent cost no server anything.
   * @default 20 % of calls + 10 per second, over 10 s
   */
  retryBudget?: RetryBudgetOptions | RetryBudget | false;
  /**
   * Hedge idempotent calls that are slower than usual (Finagle's backup
   * requests, gRPC's hedging): when an attempt has not answered within
   * the p99 of the method's latency (after 20 answers were sampled; or
   * `delayMs`), a second attempt goes to another server, paid from the
   * retry budget, and the first success answers the call. `false`: no
   * hedging. @default { percentile: 0.99 }, or `false` when the
   * distributor says `hedge: false` (`sticky`, `consistentHash`)
   */
  hedge?: HedgeOptions | false;
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
 * import assert from "node:assert/strict";
 * import type { Stub } from "./cluster_stub.ts";
 * import { connect } from "../client.ts";
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * const client = connect(["tcp://127.0.0.1:7001"]); // dials at the first call
 * const hello: Stub<Hello> = client.stub<Hello>("hello");
 * // Type-checked: greet returns a promise of the server's result.
 * const greet: (name: string) => Promise<{ greeting: string; server: string }> =
 *   hello.greet;
 * assert.equal(typeof greet, "function");
 * assert.equal(typeof hello.$with({ deadlineMs: 1_000 }).greet, "function");
 * assert.equal(typeof hello.$call, "function");
 * client.close();
 * ```
 */
export type Stub<T> =
  & {
    readonly [K in keyof T]: T[K] extends (...args: infer A) => infer R
      ? (...args: A) => Promise<Awaited<R>>
      : never;
  }
  & StubControls<T>;

/**
 * The method name a distributor sees for a batch (`CallInfo.method`); its
 * `params` are then the batch's requests.
 */
export const BATCH_METHOD = "rpc.batch";

/**
 * Places calls for one name: distributor choice, fail-over, retry budget,
 * hedging, typed errors.
 *
 * Retry rule: an attempt whose request never left this client (a refused
 * or closed connection) is retried elsewhere (free of `maxAttempts` and
 * the retry budget while untried endpoints remain); one that may have reached
 * its server (the connection broke, or it timed out) is retried only for
 * idempotent methods; an error answer from a server is not retried; a
 * distributor's `onError` may decide otherwise (including answering the
 * caller with a value). A retry goes to a server the call has not tried
 * yet while there is one.
 */
export class ClusterStub {
  readonly #idempotent: (method: string) => boolean;
  readonly #loop: RetryLoop;

  /**
   * Makes a stub for `name`; nothing is looked up or connected until a call.
   *
   * @param name service name (`name?key=value` only uses matching servers).
   * @param context the name's map, and the client's pool and health records.
   * @throws {RangeError} for a `maxAttempts` below 1 or bad budget options.
   */
  constructor(name: string, context: StubContext, options: StubOptions = {}) {
    const idempotent = options.idempotent ?? false;
    this.#idempotent = typeof idempotent === "boolean"
      ? () => idempotent
      : (method) => idempotent.includes(method);
    const maxAttempts = options.maxAttempts ?? 5;
    if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1) {
      throw new RangeError(
        `maxAttempts must be a positive integer, got ${maxAttempts}`,
      );
    }
    const problem = hedgeProblem(options.hedge);
    if (problem !== null) throw new TypeError(problem);
    const distributor = options.distributor ?? roundRobin();
    // A distributor that places calls where they belong is not hedged
    // unless the stub asks for it.
    const hedge = options.hedge ??
      (distributor.hedge === false ? false : DEFAULT_HEDGE);
    const attempts = new Attempts(name, context, distributor);
    this.#loop = new RetryLoop(attempts, {
      deadlineMs: options.deadlineMs ?? 30_000,
      maxAttempts,
      attemptTimeoutMs: options.attemptTimeoutMs,
      budget: options.retryBudget === false
        ? null
        : options.retryBudget instanceof RetryBudget
        ? options.retryBudget
        : new RetryBudget(options.retryBudget),
      hedge: hedge === false ? null : hedge,
    });
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
    return this.#loop.run<R>(
      CALL,
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
    return await this.#loop.run<BatchResult[]>(
      CALL,
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
    await this.#loop.run<void>(
      NOTIFICATION,
      method,
      params,
      false,
      options,
      null,
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
        // A remote method already made: the common case, one lookup.
        const made = methods.get(property as string);
        if (made !== undefined) return made;
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
}
