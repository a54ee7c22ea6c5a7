/**
 * Declared methods: handlers that get a {@link CallContext} (the call's
 * cancellation signal and deadline) with {@link withContext}, and handlers
 * whose params a Standard Schema validates with {@link method}. Both are
 * plain functions in a method table, next to undeclared ones. The method
 * table ({@link Methods}) and the client connection a method may see
 * ({@link RpcSession}) are here too, below the dispatch that uses them.
 *
 * @module
 */

import { RpcError } from "../errors.ts";
import type { Params, RequestId } from "../message.ts";
import type { StandardSchemaV1 } from "./standard_schema.ts";
import type { PeerCertificate } from "../transport/transport.ts";
import { specOf, validateParams, withSpec } from "./_handler.ts";

/**
 * The built-in method a client calls to authenticate its connection, with
 * named params `{ "token": "…" }`, on a server given an `authenticate`
 * hook (see `ServerLimits.authenticate`): `"rpc.authenticate"`.
 */
export const AUTHENTICATE_METHOD = "rpc.authenticate";

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
 * import type { Methods } from "./method.ts";
 * const methods: Methods = {
 *   subtract: (a: number, b: number) => a - b,
 *   greet: ({ name }: { name: string }) => `Hello, ${name}!`,
 * };
 * assert.equal(methods.subtract(42, 23), 19);
 * assert.equal(methods.greet({ name: "Ada" }), "Hello, Ada!");
 * ```
 */
export type Methods = Record<string, MethodHandler>;

/**
 * One client connection as the server's methods see it: a way to push
 * notifications to that client (server → client, as JSON-RPC 2.0 allows
 * either side to send requests), and to learn when it goes away.
 */
export interface RpcSession {
  /** Unique among the sessions of this process, from 1. */
  readonly id: number;
  /** The peer's address as the transport reports it (e.g. `127.0.0.1:51234`), if known. */
  readonly remoteAddress: string | undefined;
  /** Whether the connection runs over TLS. */
  readonly secure: boolean;
  /**
   * The client certificate the TLS layer verified (mutual TLS), or null
   * (plain TCP, or no client certificate).
   */
  readonly peerCertificate: PeerCertificate | null;
  /** Aborts when the connection ends, for whatever reason. */
  readonly signal: AbortSignal;
  /**
   * Bytes queued for this client and not yet taken by the transport: grows
   * when the client reads slower than the server writes.
   */
  readonly queuedBytes: number;
  /**
   * Who the client authenticated as: what the server's `authenticate` hook
   * returned for the token of its `rpc.authenticate` call; `undefined`
   * before (and on a server without the hook).
   */
  readonly principal: unknown;
  /**
   * Queues a notification to the client (a request without an id).
   *
   * @returns false, sending nothing, when the connection has ended.
   * @throws {RpcError} INVALID_PARAMS when `params` cannot be encoded as JSON.
   */
  notify(method: string, params?: Params): boolean;
  /** Ends the connection at once (responses not yet written are dropped). */
  close(): void;
}

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
   * request was read plus its `timeoutMs` plus 1 ms (the fraction of a ms
   * `Date.now()` drops: the server must not give up first), lowered to the
   * server's `maxDeadlineMs` if that is shorter. `null` when the call has
   * no deadline.
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
 *   '{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the call ran past the client\'s deadline (timeoutMs 20)","data":{"timeoutMs":20,"started":true}},"id":1}',
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
  return withSpec(declared, { context: true, run: handler, named: false });
}

/**
 * The argument list of a method whose params have type `T`: a tuple as it
 * is, anything else as one argument.
 */
export type ArgsOf<T> = T extends readonly unknown[] ? [...T] : [T];

/**
 * A method declared with {@link method}: a function of the schema's input
 * types, so that `Stub<typeof methods>` types its calls. Called directly it
 * validates too, hence the promise.
 */
export type DeclaredMethod<Args extends unknown[], R> = (
  ...args: Args
) => Promise<Awaited<R>>;

/**
 * Declares a method whose params are validated before it runs, with a
 * schema of any Standard Schema library (zod, valibot, arktype…; see
 * `standard_schema.ts`); the handler gets the schema's output (after its
 * transforms). Params that fail are answered with -32602, the failing paths
 * and messages in the error:
 * `{"code":-32602,"message":"Invalid params: [0]: <message>","data":{"issues":[{"path":[0],"message":"<message>"}]}}`.
 * The message lists up to 3 issues (`; and N more`), `data.issues` up to
 * 100; an issue without a path is listed by its message alone. A schema
 * whose `validate` throws is a server bug: -32603.
 *
 * Two forms:
 * - `method(schema, handler)` (or `method({ params: schema }, handler)`):
 *   positional params; the schema checks the argument list, so make it a
 *   tuple, e.g. `z.tuple([z.string(), z.number()])`. It gets the params
 *   array as sent, `[]` when there are none, and named params as one
 *   argument (`[{ … }]`), as a plain handler would. The output is spread
 *   over the handler's arguments. Paths start with the position: `[0]`,
 *   `[1].name`.
 * - `method({ named: schema }, handler)`: named params; the schema checks
 *   one object, e.g. `z.object({ name: z.string() })`. It gets the params
 *   object as sent, the single element of a one-element params array (what
 *   a cluster stub sends for `stub.greet({ name })`), and `{}` when there
 *   are none. The handler gets the output as its one argument. Paths start
 *   with the member: `name`, `user.email`.
 *
 * The handler may be a {@link withContext} handler (its context comes
 * first, then the validated params). `this` is the method table.
 *
 * @param declaration the schema (positional), `{ params: schema }`, or
 * `{ named: schema }`.
 * @param handler receives the validated params.
 * @returns a function of the schema's input types that validates, then
 * runs `handler`; throws (rejects with) the -32602 {@link RpcError} when
 * called directly with bad params.
 * @throws {TypeError} when the schema has no `~standard.validate`, the
 * handler is not a function, or was declared with a schema already.
 *
 * @example Positional params, with zod; the method's type follows the schema
 * ```ts
 * import assert from "node:assert/strict";
 * import { z } from "zod";
 * import { method } from "./method.ts";
 * import { handleText } from "./dispatcher.ts";
 *
 * const methods = {
 *   greet: method(z.tuple([z.string()]), (name) => `Hello, ${name}!`),
 * };
 * // So `Stub<typeof methods>` has greet(name: string): Promise<string>.
 * const greet: (name: string) => Promise<string> = methods.greet;
 * assert.equal(await greet("Ada"), "Hello, Ada!");
 * assert.equal(
 *   await handleText('{"jsonrpc":"2.0","method":"greet","params":[42],"id":1}', methods),
 *   '{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params: [0]: Invalid input: expected string, received number","data":{"issues":[{"path":[0],"message":"Invalid input: expected string, received number"}]}},"id":1}',
 * );
 * ```
 *
 * @example Named params
 * ```ts
 * import assert from "node:assert/strict";
 * import { z } from "zod";
 * import { method } from "./method.ts";
 * import { handleText } from "./dispatcher.ts";
 *
 * const methods = {
 *   greet: method(
 *     { named: z.object({ name: z.string() }) },
 *     ({ name }) => `Hello, ${name}!`,
 *   ),
 * };
 * assert.equal(
 *   await handleText('{"jsonrpc":"2.0","method":"greet","params":{"name":"Ada"},"id":1}', methods),
 *   '{"jsonrpc":"2.0","result":"Hello, Ada!","id":1}',
 * );
 * ```
 */
export function method<
  S extends StandardSchemaV1<readonly unknown[], unknown>,
  R,
>(
  params: S,
  handler: (...args: ArgsOf<StandardSchemaV1.InferOutput<S>>) => R,
): DeclaredMethod<ArgsOf<StandardSchemaV1.InferInput<S>>, R>;
/**
 * Declares a method with positional params: `method({ params: schema }, …)`
 * is `method(schema, …)`; `schema` checks the argument list (a tuple).
 *
 * @param declaration `{ params: schema }`.
 * @param handler receives the validated params, spread.
 * @returns a function of the schema's input types.
 * @throws {TypeError} as the first form.
 */
export function method<
  S extends StandardSchemaV1<readonly unknown[], unknown>,
  R,
>(
  declaration: { readonly params: S },
  handler: (...args: ArgsOf<StandardSchemaV1.InferOutput<S>>) => R,
): DeclaredMethod<ArgsOf<StandardSchemaV1.InferInput<S>>, R>;
/**
 * Declares a method with named params: `schema` checks the params object
 * (`{ "name": "Ada" }`, or `[{ "name": "Ada" }]` as a stub sends it; `{}`
 * when there are none), and paths in errors start with the member name.
 *
 * @param declaration `{ named: schema }`, e.g. `{ named: z.object({ name: z.string() }) }`.
 * @param handler receives the validated params object.
 * @returns a function of one argument, the schema's input type.
 * @throws {TypeError} as the first form.
 */
export function method<S extends StandardSchemaV1, R>(
  declaration: { readonly named: S },
  handler: (params: StandardSchemaV1.InferOutput<S>) => R,
): DeclaredMethod<[params: StandardSchemaV1.InferInput<S>], R>;
export function method(
  declaration:
    | StandardSchemaV1
    | { readonly params: StandardSchemaV1 }
    | { readonly named: StandardSchemaV1 },
  // deno-lint-ignore no-explicit-any
  handler: (...args: any[]) => unknown,
): DeclaredMethod<unknown[], unknown> {
  let schema: unknown;
  let named = false;
  if (isSchema(declaration)) {
    schema = declaration;
  } else if (typeof declaration === "object" && declaration !== null) {
    const hasParams = "params" in declaration;
    named = "named" in declaration;
    if (hasParams === named) {
      throw new TypeError(
        "method() takes a schema, { params: schema } or { named: schema }",
      );
    }
    schema = hasParams
      ? (declaration as { params: unknown }).params
      : (declaration as { named: unknown }).named;
  }
  if (!isSchema(schema)) {
    throw new TypeError(
      "method() needs a Standard Schema (an object with ~standard.validate), such as z.tuple([z.string()])",
    );
  }
  if (typeof handler !== "function") {
    throw new TypeError(
      `method() takes the handler as its second argument, got ${typeof handler}`,
    );
  }
  const inner = specOf(handler);
  if (inner?.schema !== undefined) {
    throw new TypeError("this handler was already declared with a schema");
  }
  const spec = {
    context: inner?.context ?? false,
    run: inner?.run ?? handler,
    schema,
    named,
  };
  const declared = async function (this: unknown, ...args: unknown[]) {
    const checked = await validateParams(spec, args);
    if (checked instanceof RpcError) throw checked;
    return await (spec.context
      ? spec.run.call(this, detachedContext(), ...checked)
      : spec.run.apply(this, checked));
  };
  return withSpec(declared, spec);
}

function isSchema(value: unknown): value is StandardSchemaV1 {
  if (
    (typeof value !== "object" && typeof value !== "function") ||
    value === null
  ) {
    return false;
  }
  const props = (value as Record<string, unknown>)["~standard"];
  return typeof props === "object" && props !== null &&
    typeof (props as Record<string, unknown>).validate === "function";
}

/** The context of a direct call: nothing aborts it. */
function detachedContext(): CallContext {
  return { signal: new AbortController().signal, deadline: null, id: null };
}
