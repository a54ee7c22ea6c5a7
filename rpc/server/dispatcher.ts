/**
 * The server's method table and the JSON-RPC 2.0 dispatch of one received
 * frame: parsing, validation, batches, notifications, and error responses
 * exactly as the specification gives them
 * (https://www.jsonrpc.org/specification, sections 4 to 7).
 *
 * @module
 */

import { CANCELLED, RpcError } from "../errors.ts";
import { CANCEL_METHOD, type RequestId } from "../message.ts";
import type { RpcSession } from "./server_connection.ts";
import { dispatch, hooksOf } from "./_dispatch.ts";
import { ndjsonCodec, parseJsonMessage } from "../codec/_ndjson_codec.ts";

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
 * import assert from "node:assert/strict";
 * import type { Methods } from "./dispatcher.ts";
 * const methods: Methods = {
 *   subtract: (a: number, b: number) => a - b,
 *   greet: ({ name }: { name: string }) => `Hello, ${name}!`,
 * };
 * assert.equal(methods.subtract(42, 23), 19);
 * assert.equal(methods.greet({ name: "Ada" }), "Hello, Ada!");
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
