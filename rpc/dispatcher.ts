/**
 * The server's method table and the JSON-RPC 2.0 dispatch of one received
 * frame: parsing, validation, batches, notifications, and error responses
 * exactly as the specification gives them
 * (https://www.jsonrpc.org/specification, sections 4 to 7).
 *
 * @module
 */

import {
  INTERNAL_ERROR,
  INVALID_REQUEST,
  messageOf,
  METHOD_NOT_FOUND,
  PARSE_ERROR,
  RpcError,
} from "./errors.ts";
import {
  errorResponse,
  isRequestId,
  type RequestId,
  validateRequest,
} from "./message.ts";

/**
 * A method a server offers. It receives the params spread when they are
 * positional (`[1, 2]` → `handler(1, 2)`), as one object when they are named
 * (`{ a: 1 }` → `handler({ a: 1 })`), and nothing when there are none. `this`
 * is the method table. It may return a value or a promise; `undefined`
 * becomes `null`. To send a specific error, throw an {@link RpcError}; any
 * other thrown value becomes an "Internal error" (-32603).
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
}

/**
 * Handles one received JSON-RPC frame (a request, a notification, or a
 * batch) against a method table.
 *
 * Batch members run concurrently; their responses come back in request order
 * and notifications add none. Never rejects: method failures become error
 * responses.
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
  const onInternalError = options.onInternalError ?? logInternalError;
  const hooks = { onInternalError, onMethodNotFound: options.onMethodNotFound };
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
}

/** Handles one request or notification; returns its response text or null. */
async function handleValue(
  value: unknown,
  methods: Methods,
  hooks: Hooks,
): Promise<string | null> {
  const { onInternalError } = hooks;
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

  let result: unknown;
  try {
    const handler = methods[method];
    const args = params === undefined
      ? []
      : Array.isArray(params)
      ? params
      : [params];
    result = await Reflect.apply(handler, methods, args);
  } catch (error) {
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
    JSON.stringify(id)
  }}`;
}

function serializeError(id: RequestId, error: RpcError): string {
  return trySerializeError(id, error) ??
    JSON.stringify(
      errorResponse(id, new RpcError(error.code, error.message)),
    );
}

function trySerializeError(id: RequestId, error: RpcError): string | null {
  try {
    return JSON.stringify(errorResponse(id, error));
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
