/**
 * The JSON-RPC 2.0 dispatch of one decoded frame, whatever codec it came
 * in (private: not part of the public API; `handleText` in `dispatcher.ts`
 * is its JSON-text form). Responses are built by the codec's
 * {@link ReplyEncoder}, so the logic here (validation, batches,
 * notifications, deadlines, `rpc.cancel`, error answers) is the same for
 * every codec. `RunningCalls`, the table `rpc.cancel` looks calls up in,
 * is here too (`dispatcher.ts` exports it).
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
  RpcError,
} from "../errors.ts";
import {
  CANCEL_METHOD,
  isRequestId,
  type Request,
  type RequestId,
  TIMEOUT_MEMBER,
  validateRequest,
} from "../message.ts";
import {
  AUTHENTICATE_METHOD,
  type CallContext,
  type Methods,
  type RpcSession,
} from "./method.ts";
import type { ReplyEncoder } from "../codec/_frame_codec.ts";
import { argsOf, specOf, validateParams } from "./_handler.ts";
import { Refusal } from "../framing/_refusal.ts";

/** Largest delay `setTimeout` honours (about 24.8 days), in ms. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Runs one decoded frame (a message, a batch, or a `Refusal`) against a
 * method table; see `handleText` for the rules.
 *
 * @returns the response part, or null when nothing must be sent (a
 * notification, or a batch of only notifications). Never rejects.
 */
export function dispatch<P>(
  value: unknown,
  methods: Methods,
  hooks: Hooks,
  codec: ReplyEncoder<P>,
): Promise<P | null> {
  // One message: its own promise, without a second async frame around it.
  return Array.isArray(value)
    ? dispatchBatch(value, methods, hooks, codec)
    : handleValue(value, methods, hooks, codec);
}

async function dispatchBatch<P>(
  value: unknown[],
  methods: Methods,
  hooks: Hooks,
  codec: ReplyEncoder<P>,
): Promise<P | null> {
  if (value.length === 0) {
    return serializeError(
      codec,
      null,
      new RpcError(
        INVALID_REQUEST,
        "Invalid Request: a batch must hold at least one request",
      ),
    );
  }
  const replies = await Promise.all(
    value.map((member) => handleValue(member, methods, hooks, codec)),
  );
  const sent = replies.filter((reply) => reply !== null);
  return sent.length === 0 ? null : codec.batch(sent);
}

type InternalErrorHook = (error: unknown, method: string) => void;

/** What one frame's dispatch needs besides the message and the methods. */
export interface Hooks {
  onInternalError: InternalErrorHook;
  onMethodNotFound?: (method: string) => string | void;
  signal?: AbortSignal;
  calls?: RunningCalls;
  receivedAt: number;
  maxDeadlineMs?: number;
  session?: RpcSession;
  /**
   * On an authenticating server: an error for a method the session may
   * not call yet (checked before the method is looked up), else undefined.
   */
  admit?: (method: string) => RpcError | undefined;
  /** On an authenticating server: runs `rpc.authenticate` with its params. */
  authenticate?: (params: unknown) => Promise<unknown>;
  /** Called once per finished call (see {@link CallInfo}); absent: no cost. */
  onCall?: (call: CallInfo) => void;
}

/**
 * One finished call, as the `onCall` hook of `serve()`, `serveStream` and
 * `handleText` gets it: each well-formed request or notification (batch
 * members one by one), including `rpc.cancel`, `rpc.authenticate` and
 * calls of unknown methods; not frames that are no request at all.
 */
export interface CallInfo {
  /** The method the request named. */
  method: string;
  /**
   * `"ok"` for a result, `"error"` for an error response (its code in
   * {@link code}), `"notification"` for a notification (never answered,
   * whatever it did).
   */
  outcome: "ok" | "error" | "notification";
  /** The JSON-RPC error code of an `"error"` outcome. */
  code?: number;
  /**
   * From the dispatch of the request to its answer being ready, ms, by the
   * monotonic clock (`performance.now()`).
   */
  durationMs: number;
  /**
   * The request frame's size on the wire, bytes; only for a frame that
   * holds one message (not a batch member), and only from a server
   * connection (`serve()`, `serveStream`).
   */
  bytesIn?: number;
  /** The response frame's size on the wire, bytes (0: none); as `bytesIn`. */
  bytesOut?: number;
}

/** What a call's dispatch learns of its outcome, when `onCall` is set. */
interface CallRecord {
  method: string | undefined;
  notification: boolean;
  code: number | undefined;
}

/** Hooks that threw already: each is reported once. */
const failedCallHooks = new WeakSet<object>();

/**
 * Calls `hook` with `call`; a throw is caught (the call is answered as
 * if the hook were absent) and logged the first time that hook throws.
 */
export function reportCall(
  hook: (call: CallInfo) => void,
  call: CallInfo,
): void {
  try {
    hook(call);
  } catch (error) {
    if (failedCallHooks.has(hook)) return;
    failedCallHooks.add(hook);
    console.error(
      "rpc: the onCall hook threw (its calls were answered; later throws of it are not logged):",
      error,
    );
  }
}

/** A request's deadline and where it came from. */
interface Deadline {
  /** `Date.now()` time, ms (what the method sees as `context.deadline`). */
  at: number;
  /**
   * The same instant as a `performance.now()` time, ms: what decides when
   * the call has run out of time, so that a wall-clock jump (an NTP step,
   * `date -s`) neither ends calls early nor lets them run on for as long
   * as it stepped back.
   */
  monotonicAt: number;
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
  // The frame was read `Date.now() - receivedAt` ago: from then on, only
  // the monotonic clock counts.
  const monotonic = (at: number) => performance.now() + (at - Date.now());
  if (max !== undefined && (timeoutMs === undefined || timeoutMs > max)) {
    const at = hooks.receivedAt + max;
    return { at, monotonicAt: monotonic(at), maxDeadlineMs: max };
  }
  if (timeoutMs === undefined) return null;
  const at = hooks.receivedAt + timeoutMs + CLOCK_GRAIN_MS;
  return { at, monotonicAt: monotonic(at), timeoutMs };
}

/**
 * Added to a client's deadline: `Date.now()` drops the fraction of a ms, so
 * the time a request was read can be up to 1 ms early, and without it the
 * server could give up (and answer -32003) just before the client would.
 */
const CLOCK_GRAIN_MS = 1;

/** Whether a call's deadline has passed, by the monotonic clock. */
function passed(deadline: Deadline): boolean {
  return (deadline.timeoutMs !== undefined && deadline.timeoutMs <= 0) ||
    performance.now() >= deadline.monotonicAt;
}

/** Time left before a call's deadline, ms (negative once passed). */
function leftOf(deadline: Deadline): number {
  return deadline.monotonicAt - performance.now();
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
    if (deadline !== null && leftOf(deadline) <= MAX_TIMER_MS) {
      // A timer can fire a little early (the event loop reads its clock
      // once per turn): it aborts only once the deadline has passed.
      const arm = () => {
        if (passed(deadline)) {
          this.#timer = undefined;
          controller.abort(deadlineError(deadline, true));
        } else {
          this.#timer = setTimeout(arm, Math.max(1, leftOf(deadline)));
        }
      };
      this.#timer = setTimeout(arm, Math.max(0, leftOf(deadline)));
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

/**
 * Handles one request or notification; returns its response text or null.
 * With an `onCall` hook, reports the call once it is answered.
 */
function handleValue<P>(
  value: unknown,
  methods: Methods,
  hooks: Hooks,
  codec: ReplyEncoder<P>,
): Promise<P | null> {
  const onCall = hooks.onCall;
  return onCall === undefined
    ? handleCall(value, methods, hooks, codec, undefined)
    : handleReported(value, methods, hooks, codec, onCall);
}

async function handleReported<P>(
  value: unknown,
  methods: Methods,
  hooks: Hooks,
  codec: ReplyEncoder<P>,
  onCall: (call: CallInfo) => void,
): Promise<P | null> {
  const started = performance.now();
  const record: CallRecord = {
    method: undefined,
    notification: false,
    code: undefined,
  };
  const reply = await handleCall(value, methods, hooks, codec, record);
  const { method, code } = record;
  if (method !== undefined) {
    const durationMs = performance.now() - started;
    reportCall(
      onCall,
      record.notification
        ? { method, outcome: "notification", durationMs }
        : code === undefined
        ? { method, outcome: "ok", durationMs }
        : { method, outcome: "error", code, durationMs },
    );
  }
  return reply;
}

/** Notes the error code a call is answered with, when it is reported. */
function noted(record: CallRecord | undefined, error: RpcError): RpcError {
  if (record !== undefined) record.code = error.code;
  return error;
}

async function handleCall<P>(
  value: unknown,
  methods: Methods,
  hooks: Hooks,
  codec: ReplyEncoder<P>,
  record: CallRecord | undefined,
): Promise<P | null> {
  const { onInternalError } = hooks;
  if (value instanceof Refusal) {
    return serializeError(codec, value.id, value.error);
  }
  const request = validateRequest(value);
  if (request instanceof RpcError) {
    const record = value as Record<string, unknown>;
    const id = typeof value === "object" && value !== null &&
        !Array.isArray(value) && isRequestId(record.id)
      ? record.id
      : null;
    return serializeError(codec, id, request);
  }
  const notification = !("id" in request);
  const id: RequestId = request.id ?? null;
  const { method, params } = request;
  if (record !== undefined) {
    record.method = method;
    record.notification = notification;
  }

  if (method === CANCEL_METHOD) {
    const target = typeof params === "object" && !Array.isArray(params)
      ? params.id
      : undefined;
    const cancelled = isRequestId(target) && hooks.calls !== undefined &&
      hooks.calls.cancel(target);
    return notification ? null : codec.result(id, cancelled);
  }

  if (hooks.admit !== undefined) {
    if (method === AUTHENTICATE_METHOD && hooks.authenticate !== undefined) {
      return await authenticate(hooks.authenticate, request, codec, record);
    }
    const refused = hooks.admit(method);
    if (refused !== undefined) {
      return notification
        ? null
        : serializeError(codec, id, noted(record, refused));
    }
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
      codec,
      id,
      noted(
        record,
        new RpcError(
          METHOD_NOT_FOUND,
          typeof message === "string"
            ? message
            : `Method not found: no method ${
              JSON.stringify(method)
            } on this server`,
        ),
      ),
    );
  }

  const deadline = deadlineOf(request, hooks);
  if (deadline !== null && passed(deadline)) {
    return notification ? null : serializeError(
      codec,
      id,
      noted(record, deadlineError(deadline, false)),
    );
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
      const reply = trySerializeError(codec, id, noted(record, error));
      if (reply !== null) return reply;
      report(onInternalError, error, method);
      return internalError(
        codec,
        id,
        `the error data of ${JSON.stringify(method)} cannot be encoded as JSON`,
        record,
      );
    }
    report(onInternalError, error, method);
    return internalError(codec, id, messageOf(error), record);
  } finally {
    scope?.finish();
  }
  if (notification) return null;

  try {
    return codec.result(id, result);
  } catch (error) {
    report(onInternalError, error, method);
    return internalError(
      codec,
      id,
      `the result of ${JSON.stringify(method)} cannot be encoded as JSON: ${
        messageOf(error)
      }`,
      record,
    );
  }
}

/** `rpc.authenticate` on an authenticating server: `true` or its error. */
async function authenticate<P>(
  run: (params: unknown) => Promise<unknown>,
  request: Request,
  codec: ReplyEncoder<P>,
  record: CallRecord | undefined,
): Promise<P | null> {
  const notification = !("id" in request);
  const id: RequestId = request.id ?? null;
  let result: unknown;
  try {
    result = await run(request.params);
  } catch (error) {
    if (notification) return null;
    return serializeError(
      codec,
      id,
      noted(
        record,
        error instanceof RpcError
          ? error
          : new RpcError(INTERNAL_ERROR, `Internal error: ${messageOf(error)}`),
      ),
    );
  }
  return notification ? null : codec.result(id, result);
}

/**
 * The error response for `error`; without its `data` when that has no JSON
 * form.
 */
export function serializeError<P>(
  codec: ReplyEncoder<P>,
  id: RequestId,
  error: RpcError,
): P {
  return trySerializeError(codec, id, error) ??
    codec.error(id, { code: error.code, message: error.message });
}

/** A -32603 response: `Internal error: <detail>`. */
function internalError<P>(
  codec: ReplyEncoder<P>,
  id: RequestId,
  detail: string,
  record?: CallRecord,
): P {
  if (record !== undefined) record.code = INTERNAL_ERROR;
  return serializeError(
    codec,
    id,
    new RpcError(INTERNAL_ERROR, `Internal error: ${detail}`),
  );
}

function trySerializeError<P>(
  codec: ReplyEncoder<P>,
  id: RequestId,
  error: RpcError,
): P | null {
  try {
    return codec.error(id, error.toJSON());
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
  /** Made by the first {@link add}: most connections never need it. */
  #byId: Map<string, Set<(reason: unknown) => void>> | undefined;
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
    const byId = this.#byId ??= new Map();
    let calls = byId.get(key);
    if (calls === undefined) {
      calls = new Set();
      byId.set(key, calls);
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
      if (calls.size === 0 && byId.get(key) === calls) byId.delete(key);
    };
  }

  /**
   * Aborts every running call with this id (a client may reuse ids).
   *
   * @returns whether any was running.
   */
  cancel(id: RequestId): boolean {
    if (id === null) return false;
    const calls = this.#byId?.get(keyOfId(id));
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
