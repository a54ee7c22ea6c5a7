/**
 * The server's method table and the JSON-RPC 2.0 dispatch of one received
 * frame: parsing, validation, batches, notifications, and error responses
 * exactly as the specification gives them
 * (https://www.jsonrpc.org/specification, sections 4 to 7).
 *
 * @module
 */

import type { Methods, RpcSession } from "./method.ts";
import {
  type CallInfo,
  dispatch,
  type Hooks,
  RunningCalls,
} from "./_dispatch.ts";
import { ndjsonCodec, parseJsonMessage } from "../codec/_ndjson_codec.ts";

export type { MethodHandler, Methods } from "./method.ts";
export type { CallInfo } from "./_dispatch.ts";
export { RunningCalls };

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
  /**
   * Called once per finished call: its method, outcome and duration (see
   * {@link CallInfo}). A throw is caught (the call is answered all the
   * same) and logged the first time. Absent, calls cost nothing extra.
   */
  onCall?(call: CallInfo): void;
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
 * import assert from "node:assert/strict";
 * import { handleText } from "./dispatcher.ts";
 * const methods = { subtract: (a: number, b: number) => a - b };
 * const reply = await handleText(
 *   '{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}',
 *   methods,
 * );
 * assert.equal(reply, '{"jsonrpc":"2.0","result":19,"id":1}');
 * ```
 */
export function handleText(
  text: string,
  methods: Methods,
  options: DispatchOptions = {},
): Promise<string | null> {
  return dispatch(
    parseJsonMessage(text),
    methods,
    hooksOf(options),
    ndjsonCodec,
  );
}

/** The hooks of `options`, for a frame read at `receivedAt` (`Date.now()` ms). */
export function hooksOf(options: DispatchOptions, receivedAt?: number): Hooks {
  return {
    onInternalError: options.onInternalError ?? logInternalError,
    onMethodNotFound: options.onMethodNotFound,
    signal: options.signal,
    calls: options.calls,
    receivedAt: receivedAt ?? options.receivedAt ?? Date.now(),
    maxDeadlineMs: options.maxDeadlineMs,
    session: options.session,
    onCall: options.onCall,
  };
}

function logInternalError(error: unknown, method: string): void {
  console.error(`rpc: method ${JSON.stringify(method)} failed:`, error);
}
