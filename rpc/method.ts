/**
 * Declared methods: handlers that get a {@link CallContext} (the call's
 * cancellation signal and deadline) with {@link withContext}. They are
 * plain functions in a method table, next to undeclared ones.
 *
 * @module
 */

import type { RequestId } from "./message.ts";
import type { RpcSession } from "./server_connection.ts";
import { withSpec } from "./_handler.ts";

/**
 * What a method declared with {@link withContext} learns of the call it
 * serves.
 */
export interface CallContext {
  /**
   * Aborts when the server should stop working on the call, with an
   * {@link RpcError} as its `reason` (so `signal.throwIfAborted()` sends the
   * right error): -32003 DEADLINE_EXCEEDED when its deadline passes, -32005
   * CANCELLED when the client sent `rpc.cancel` for it, or when the
   * connection ends (the client closed it, or just its sending side: end of
   * stream; the server closed or drained it). Pass it on to what the method
   * awaits (`fetch(url, { signal })`, a database query…).
   */
  readonly signal: AbortSignal;
  /**
   * When the client stops waiting, as a `Date.now()` time in ms: when the
   * request was read plus its `timeoutMs`, lowered to the server's
   * `maxDeadlineMs` if that is shorter. `null` when the call has no
   * deadline.
   */
  readonly deadline: number | null;
  /**
   * The request's id; null for a notification (and for a request whose id
   * is null), and when the method is called directly.
   */
  readonly id: RequestId;
  /**
   * The client connection the call came on, when served by `serveStream`
   * or `serve`; absent for `handleText` without a session and for direct
   * calls.
   */
  readonly session?: RpcSession;
}

/**
 * Marks a handler that takes the call's {@link CallContext} before its
 * params. The dispatcher calls it as `handler(context, ...params)` with
 * `this` the method table, exactly as it calls a plain handler otherwise.
 * Called directly, the returned function passes a context that never
 * aborts (deadline and id null), so the handler still runs in tests.
 *
 * The context's signal costs nothing for plain handlers: only marked ones
 * get one.
 *
 * @param handler `(context, ...params) => result` (or a promise of it).
 * @returns a handler of the params alone, for a method table.
 *
 * @example Stop working on a call the client gave up on
 * ```ts
 * import assert from "node:assert/strict";
 * import { withContext } from "./method.ts";
 * import { handleText } from "./dispatcher.ts";
 *
 * const methods = {
 *   sleep: withContext(async ({ signal }, ms: number) => {
 *     await new Promise((resolve, reject) => {
 *       const timer = setTimeout(resolve, ms);
 *       signal.addEventListener("abort", () => {
 *         clearTimeout(timer);
 *         reject(signal.reason);
 *       });
 *     });
 *     return "slept";
 *   }),
 * };
 * // The request says the client waits 20 ms: the call is stopped then.
 * const reply = await handleText(
 *   '{"jsonrpc":"2.0","method":"sleep","params":[5000],"id":1,"timeoutMs":20}',
 *   methods,
 * );
 * assert.equal(
 *   reply,
 *   '{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the call ran past the client\'s deadline (timeoutMs 20)","data":{"timeoutMs":20}},"id":1}',
 * );
 * assert.equal(await methods.sleep(1), "slept"); // a direct call
 * ```
 */
export function withContext<A extends unknown[], R>(
  handler: (context: CallContext, ...args: A) => R,
): (...args: A) => R {
  if (typeof handler !== "function") {
    throw new TypeError(
      `withContext takes a function (context, ...params) => result, got ${typeof handler}`,
    );
  }
  const declared = function (this: unknown, ...args: A): R {
    return handler.call(this, detachedContext(), ...args);
  };
  return withSpec(declared, { context: true, run: handler });
}

/** The context of a direct call: nothing aborts it. */
function detachedContext(): CallContext {
  return { signal: new AbortController().signal, deadline: null, id: null };
}
