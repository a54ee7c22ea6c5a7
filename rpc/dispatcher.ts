/**
 * The server's method table and the JSON-RPC 2.0 dispatch of one received
 * frame: parsing, validation, batches, notifications, and error responses
 * exactly as the specification gives them
 * (https://www.jsonrpc.org/specification, sections 4 to 7).
 *
 * @module
 */

import {
  CANCELLED,
  DEADLINE_EXCEEDED,
  INTERNAL_ERROR,
  INVALID_REQUEST,
  messageOf,
  METHOD_NOT_FOUND,
  PARSE_ERROR,
  RpcError,
} from "./errors.ts";
import {
  CANCEL_METHOD,
  isRequestId,
  type Request,
  type RequestId,
  TIMEOUT_MEMBER,
  validateRequest,
} from "./message.ts";
import type { CallContext } from "./method.ts";
import type { RpcSession } from "./server_connection.ts";
import { argsOf, specOf, validateParams } from "./_handler.ts";
import { exactIds, idJson } from "./_json_ids.ts";
import { Refusal } from "./_refusal.ts";

/** Largest delay `setTimeout` honours (about 24.8 days), in ms. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * A method a server offers. It receives the params spread when they are
 * positional (`[1, 2]` → `handler(1, 2)`), as one object when they are named
 * (`{ a: 1 }` → `handler({ a: 1 })`), and nothing when there are none. `this`
 * is the method table. It may return a value or a promise; `undefined`
 * becomes `null`. To send a specific error, throw an {@link RpcError}; any
 * other thrown value becomes an "Internal error" (-32603).
 *
 * A handler made by `withContext` also gets the call's `CallContext` (its
 * abort signal and deadline) first; one made by `method` has its params
 * validated by a schema first.
 */
// deno-lint-ignore no-explicit-any
export type MethodHandler = (...args: any[]) => unknown;

/**
 * A server's method table: method name → handler. Only own properties are
 * methods, so inherited names such as `toString` or `__proto__` are never
 * callable.
 *
 * @example
 * ```ts
 * import type { Methods } from "./dispatcher.ts";
 * const methods: Methods = {
 *   subtract: (a: number, b: number) => a - b,
 *   greet: ({ name }: { name: string }) => `Hello, ${name}!`,
 * };
 * ```
 */
export type Methods = Record<string, MethodHandler>;

/** Options of {@link handleText}. */
export interface DispatchOptions {
  /**
   * Called when a method throws something other than an {@link RpcError}, or
   * returns a result that cannot be encoded as JSON: server bugs the client
   * only sees as -32603. Defaults to `console.error` with the method name.
   */
  onInternalError?(error: unknown, method: string): void;
  /**
   * Called with the name of each requested method the table lacks; a
   * string it returns replaces the -32601 error's message.
   */
  onMethodNotFound?(method: string): string | void;
  /**
   * Aborting it aborts the signal of every call of the frame (a -32005
   * CANCELLED reason): the connection the frame came on has ended.
   */
  signal?: AbortSignal;
  /**
   * Where the frame's calls are registered while they run, so that a later
   * `rpc.cancel` reaches them: one per connection (ids are the client's).
   * Without it, `rpc.cancel` finds nothing to cancel.
   */
  calls?: RunningCalls;
  /**
   * When the frame was read, as a `Date.now()` time in ms: request
   * deadlines (`timeoutMs`) count from it. @default the time of the call
   */
  receivedAt?: number;
  /**
   * Longest time one call may have, in ms: a request's `timeoutMs` above it
   * is lowered to it, and a request without one gets it. @default no limit
   */
  maxDeadlineMs?: number;
  /** The client connection, passed on in each `CallContext`. */
  session?: RpcSession;
}

/**
 * The calls of one connection that are running, by request id, so that
 * an `rpc.cancel` notification can abort them. A call is in it only while
 * it runs (from its dispatch until its handler settles); only calls with a
 * `CallContext` (handlers made by `withContext`) are registered, since
 * nothing else could observe the abort.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RunningCalls } from "./dispatcher.ts";
 * const calls = new RunningCalls();
 * const reasons: unknown[] = [];
 * const remove = calls.add(7, (reason) => reasons.push(reason));
 * assert.equal(calls.size, 1);
 * assert.equal(calls.cancel(7), true);
 * assert.equal(calls.cancel("7"), false); // ids "7" and 7 differ
 * remove();
 * assert.equal(calls.size, 0);
 * assert.equal(reasons.length, 1);
 * ```
 */
export class RunningCalls {
  readonly #byId = new Map<string, Set<(reason: unknown) => void>>();
  #size = 0;

  /** How many calls are registered. */
  get size(): number {
    return this.#size;
  }

  /**
   * Registers a running call.
   *
   * @param id the request's id.
   * @param abort called with the -32005 {@link RpcError} when the call is
   * cancelled.
   * @returns the function that removes the call again (safe to call twice).
   */
  add(
    id: string | number | bigint,
    abort: (reason: unknown) => void,
  ): () => void {
    const key = keyOfId(id);
    let calls = this.#byId.get(key);
    if (calls === undefined) {
      calls = new Set();
      this.#byId.set(key, calls);
    }
    const entry = (reason: unknown) => abort(reason);
    calls.add(entry);
    this.#size++;
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      calls.delete(entry);
      this.#size--;
      if (calls.size === 0 && this.#byId.get(key) === calls) {
        this.#byId.delete(key);
      }
    };
  }

  /**
   * Aborts every running call with this id (a client may reuse ids).
   *
   * @returns whether any was running.
   */
  cancel(id: RequestId): boolean {
    if (id === null) return false;
    const calls = this.#byId.get(keyOfId(id));
    if (calls === undefined) return false;
    const reason = new RpcError(
      CANCELLED,
      `Cancelled: the client cancelled the call (${CANCEL_METHOD})`,
    );
    for (const abort of [...calls]) abort(reason);
    return true;
  }
}

function keyOfId(id: string | number | bigint): string {
  return typeof id === "string" ? `s${id}` : `n${id}`;
}

/**
 * Handles one received JSON-RPC frame (a request, a notification, or a
 * batch) against a method table.
 *
 * Batch members run concurrently; their responses come back in request order
 * and notifications add none. Never rejects: method failures become error
 * responses.
 *
 * Rafter's extensions, which plain JSON-RPC 2.0 clients never meet:
 * - a request's `timeoutMs` member (ms the client waits, counted from
 *   `options.receivedAt`; capped by `options.maxDeadlineMs`) sets its
 *   deadline. A request whose deadline has passed when it is dispatched is
 *   not run: it is answered -32003 DEADLINE_EXCEEDED. A `timeoutMs` that is
 *   not a number is ignored. A -32003 answer's data says whether the call
 *   had started (`{ timeoutMs, started }`), so a client knows if it may
 *   have run.
 * - `withContext` handlers get a `CallContext` whose signal aborts when the
 *   deadline passes, when `rpc.cancel` names the call, or when
 *   `options.signal` aborts; each batch member has its own. If the handler
 *   then throws something other than an {@link RpcError}, the response is
 *   the signal's reason (-32003 or -32005) and nothing is reported.
 * - `rpc.cancel` with `{ "id": <request id> }` is built in (it takes
 *   precedence over a method of that name): it aborts the running calls of
 *   `options.calls` with that id; an unknown or finished id is ignored. As
 *   a notification it gets no response; sent as a request, its result is
 *   whether a call was running.
 *
 * @param text The frame's JSON text.
 * @returns the response frame's JSON text (without a newline), or `null` when
 * nothing must be sent (a notification, or a batch of only notifications).
 *
 * @example
 * ```ts
 * import { handleText } from "./dispatcher.ts";
 * const methods = { subtract: (a: number, b: number) => a - b };
 * const reply = await handleText(
 *   '{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}',
 *   methods,
 * );
 * console.log(reply); // {"jsonrpc":"2.0","result":19,"id":1}
 * ```
 */
export async function handleText(
  text: string,
  methods: Methods,
  options: DispatchOptions = {},
): Promise<string | null> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return serializeError(
      null,
      new RpcError(PARSE_ERROR, `Parse error: ${messageOf(error)}`),
    );
  }
  value = exactIds(text, value);
  const onInternalError = options.onInternalError ?? logInternalError;
  const hooks: Hooks = {
    onInternalError,
    onMethodNotFound: options.onMethodNotFound,
    signal: options.signal,
    calls: options.calls,
    receivedAt: options.receivedAt ?? Date.now(),
    maxDeadlineMs: options.maxDeadlineMs,
    session: options.session,
  };
  if (!Array.isArray(value)) {
    return await handleValue(value, methods, hooks);
  }
  if (value.length === 0) {
    return serializeError(
      null,
      new RpcError(
        INVALID_REQUEST,
        "Invalid Request: a batch must hold at least one request",
      ),
    );
  }
  const replies = await Promise.all(
    value.map((member) => handleValue(member, methods, hooks)),
  );
  const sent = replies.filter((reply) => reply !== null);
  return sent.length === 0 ? null : `[${sent.join(",")}]`;
}

type InternalErrorHook = (error: unknown, method: string) => void;

interface Hooks {
  onInternalError: InternalErrorHook;
  onMethodNotFound?: (method: string) => string | void;
  signal?: AbortSignal;
  calls?: RunningCalls;
  receivedAt: number;
  maxDeadlineMs?: number;
  session?: RpcSession;
}

/** A request's deadline and where it came from. */
interface Deadline {
  /** `Date.now()` time, ms. */
  at: number;
  /** The request's `timeoutMs`, when the deadline is the client's. */
  timeoutMs?: number;
  /** The server's limit, when that is shorter. */
  maxDeadlineMs?: number;
}

function deadlineOf(request: Request, hooks: Hooks): Deadline | null {
  const sent = (request as unknown as Record<string, unknown>)[TIMEOUT_MEMBER];
  const timeoutMs = typeof sent === "number" && Number.isFinite(sent)
    ? sent
    : undefined;
  const max = hooks.maxDeadlineMs;
  if (max !== undefined && (timeoutMs === undefined || timeoutMs > max)) {
    return { at: hooks.receivedAt + max, maxDeadlineMs: max };
  }
  return timeoutMs === undefined
    ? null
    : { at: hooks.receivedAt + timeoutMs + CLOCK_GRAIN_MS, timeoutMs };
}

/**
 * Added to a client's deadline: `Date.now()` drops the fraction of a ms, so
 * the time a request was read can be up to 1 ms early, and without it the
 * server could give up (and answer -32003) just before the client would.
 */
const CLOCK_GRAIN_MS = 1;

/** Whether a call's deadline has passed, by the wall clock. */
function passed(deadline: Deadline): boolean {
  return (deadline.timeoutMs !== undefined && deadline.timeoutMs <= 0) ||
    Date.now() >= deadline.at;
}

function deadlineError(deadline: Deadline, started: boolean): RpcError {
  if (deadline.timeoutMs !== undefined) {
    const { timeoutMs } = deadline;
    return new RpcError(
      DEADLINE_EXCEEDED,
      started
        ? `Deadline exceeded: the call ran past the client's deadline (timeoutMs ${timeoutMs})`
        : `Deadline exceeded: the client's deadline passed before the call ran (timeoutMs ${timeoutMs})`,
      { timeoutMs, started },
    );
  }
  const { maxDeadlineMs } = deadline;
  return new RpcError(
    DEADLINE_EXCEEDED,
    started
      ? `Deadline exceeded: the call ran past the server's limit of ${maxDeadlineMs} ms per call`
      : `Deadline exceeded: the server's limit of ${maxDeadlineMs} ms per call passed before the call ran`,
    { maxDeadlineMs, started },
  );
}

/**
 * The abort signal of one call and what aborts it: its deadline, an
 * `rpc.cancel` naming it, the end of its connection.
 */
class CallScope {
  readonly context: CallContext;
  readonly #controller = new AbortController();
  readonly #connection: AbortSignal | undefined;
  readonly #onEnd = () =>
    this.#controller.abort(
      new RpcError(
        CANCELLED,
        "Cancelled: the connection ended before the call finished",
      ),
    );
  #timer: ReturnType<typeof setTimeout> | undefined;
  #unregister: (() => void) | undefined;

  constructor(
    id: RequestId,
    notification: boolean,
    deadline: Deadline | null,
    hooks: Hooks,
  ) {
    const controller = this.#controller;
    if (deadline !== null && deadline.at - Date.now() <= MAX_TIMER_MS) {
      // A timer can fire a little early (the event loop reads its clock
      // once per turn): it aborts only once the deadline has passed.
      const arm = () => {
        if (passed(deadline)) {
          this.#timer = undefined;
          controller.abort(deadlineError(deadline, true));
        } else {
          this.#timer = setTimeout(arm, Math.max(1, deadline.at - Date.now()));
        }
      };
      this.#timer = setTimeout(arm, Math.max(0, deadline.at - Date.now()));
    }
    const connection = hooks.signal;
    if (connection?.aborted) {
      this.#onEnd();
    } else if (connection !== undefined) {
      this.#connection = connection;
      connection.addEventListener("abort", this.#onEnd, { once: true });
    }
    if (!notification && id !== null && hooks.calls !== undefined) {
      this.#unregister = hooks.calls.add(id, (reason) => {
        controller.abort(reason);
      });
    }
    const context: CallContext = {
      signal: controller.signal,
      deadline: deadline?.at ?? null,
      id,
    };
    this.context = hooks.session === undefined
      ? context
      : { ...context, session: hooks.session };
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The call has settled: nothing aborts it any more. */
  finish(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#connection?.removeEventListener("abort", this.#onEnd);
    this.#unregister?.();
  }
}

/** Handles one request or notification; returns its response text or null. */
async function handleValue(
  value: unknown,
  methods: Methods,
  hooks: Hooks,
): Promise<string | null> {
  const { onInternalError } = hooks;
  if (value instanceof Refusal) return serializeError(value.id, value.error);
  const request = validateRequest(value);
  if (request instanceof RpcError) {
    const record = value as Record<string, unknown>;
    const id = typeof value === "object" && value !== null &&
        !Array.isArray(value) && isRequestId(record.id)
      ? record.id
      : null;
    return serializeError(id, request);
  }
  const notification = !("id" in request);
  const id: RequestId = request.id ?? null;
  const { method, params } = request;

  if (method === CANCEL_METHOD) {
    const target = typeof params === "object" && !Array.isArray(params)
      ? params.id
      : undefined;
    const cancelled = isRequestId(target) && hooks.calls !== undefined &&
      hooks.calls.cancel(target);
    return notification
      ? null
      : `{"jsonrpc":"2.0","result":${cancelled},"id":${idJson(id)}}`;
  }

  if (
    !Object.hasOwn(methods, method) || typeof methods[method] !== "function"
  ) {
    let message: string | void = undefined;
    if (hooks.onMethodNotFound !== undefined) {
      try {
        message = hooks.onMethodNotFound(method);
      } catch {
        // A failing hook must not take the response down with it.
      }
    }
    if (notification) return null;
    return serializeError(
      id,
      new RpcError(
        METHOD_NOT_FOUND,
        typeof message === "string"
          ? message
          : `Method not found: no method ${
            JSON.stringify(method)
          } on this server`,
      ),
    );
  }

  const deadline = deadlineOf(request, hooks);
  if (deadline !== null && passed(deadline)) {
    return notification
      ? null
      : serializeError(id, deadlineError(deadline, false));
  }
  const handler = methods[method];
  const spec = specOf(handler);
  // Registered before the first await, so a cancel read next finds it.
  const scope = spec?.context
    ? new CallScope(id, notification, deadline, hooks)
    : undefined;
  let result: unknown;
  try {
    let args: unknown[];
    if (spec?.schema !== undefined) {
      const checked = await validateParams(spec, params);
      if (checked instanceof RpcError) throw checked;
      args = checked;
    } else {
      args = argsOf(params);
    }
    if (scope === undefined) {
      result = await Reflect.apply(spec?.run ?? handler, methods, args);
    } else {
      // Aborted already (the connection ended, or a cancel came during
      // validation): not run.
      scope.signal.throwIfAborted();
      result = await Reflect.apply(spec!.run, methods, [
        scope.context,
        ...args,
      ]);
    }
  } catch (thrown) {
    // What a handler throws once its call was aborted is the abort's echo.
    const error = scope?.signal.aborted && !(thrown instanceof RpcError)
      ? scope.signal.reason
      : thrown;
    if (notification) {
      if (!(error instanceof RpcError)) report(onInternalError, error, method);
      return null;
    }
    if (error instanceof RpcError) {
      const text = trySerializeError(id, error);
      if (text !== null) return text;
      report(onInternalError, error, method);
      return serializeError(
        id,
        new RpcError(
          INTERNAL_ERROR,
          `Internal error: the error data of ${
            JSON.stringify(method)
          } cannot be encoded as JSON`,
        ),
      );
    }
    report(onInternalError, error, method);
    return serializeError(
      id,
      new RpcError(INTERNAL_ERROR, `Internal error: ${messageOf(error)}`),
    );
  } finally {
    scope?.finish();
  }
  if (notification) return null;

  let resultText: string | undefined;
  try {
    resultText = JSON.stringify(result);
  } catch (error) {
    report(onInternalError, error, method);
    return serializeError(
      id,
      new RpcError(
        INTERNAL_ERROR,
        `Internal error: the result of ${
          JSON.stringify(method)
        } cannot be encoded as JSON: ${messageOf(error)}`,
      ),
    );
  }
  return `{"jsonrpc":"2.0","result":${resultText ?? "null"},"id":${
    idJson(id)
  }}`;
}

function serializeError(id: RequestId, error: RpcError): string {
  return trySerializeError(id, error) ??
    trySerializeError(id, new RpcError(error.code, error.message))!;
}

function trySerializeError(id: RequestId, error: RpcError): string | null {
  try {
    return `{"jsonrpc":"2.0","error":${JSON.stringify(error.toJSON())},"id":${
      idJson(id)
    }}`;
  } catch {
    return null;
  }
}

function report(hook: InternalErrorHook, error: unknown, method: string): void {
  try {
    hook(error, method);
  } catch {
    // A failing hook must not take the response down with it.
  }
}

function logInternalError(error: unknown, method: string): void {
  console.error(`rpc: method ${JSON.stringify(method)} failed:`, error);
}
