/**
 * What `withContext` and `method` attach to the functions they return, and
 * the params validation both the dispatcher and direct calls use (private:
 * not part of the public API).
 *
 * @module
 */

import { INVALID_PARAMS, RpcError } from "../errors.ts";
import type { Params } from "../message.ts";
import {
  RAFTER_PARAMS_VENDOR,
  type StandardSchemaV1,
} from "./standard_schema.ts";

/** The property of a declared method that holds its {@link HandlerSpec}. */
export const SPEC: unique symbol = Symbol("rafter.handler");

/** How the dispatcher runs a declared method. */
export interface HandlerSpec {
  /** Whether `run` takes a `CallContext` before the params. */
  readonly context: boolean;
  /** The user's function. */
  // deno-lint-ignore no-explicit-any
  readonly run: (...args: any[]) => unknown;
  /** Validates the params before `run` is called, when present. */
  readonly schema?: StandardSchemaV1;
  /**
   * Whether the schema checks one params object (named params) rather than
   * the argument list (a tuple).
   */
  readonly named: boolean;
}

/** The spec of a function made by `withContext` or `method`, if it is one. */
export function specOf(handler: unknown): HandlerSpec | undefined {
  return typeof handler === "function"
    ? (handler as { [SPEC]?: HandlerSpec })[SPEC]
    : undefined;
}

/** Attaches `spec` to `fn` (read-only, not enumerable) and returns `fn`. */
export function withSpec<F extends object>(fn: F, spec: HandlerSpec): F {
  Object.defineProperty(fn, SPEC, { value: spec });
  return fn;
}

/**
 * The argument list a plain handler is called with: positional params as
 * sent, named params as one argument, none as no argument.
 */
export function argsOf(params: Params | undefined): unknown[] {
  return params === undefined ? [] : Array.isArray(params) ? params : [params];
}

/** Most issues listed in an Invalid params message. */
const MESSAGE_ISSUES = 3;
/** Most issues sent in an Invalid params error's `data.issues`. */
const DATA_ISSUES = 100;

/**
 * Validates `params` with the spec's schema.
 *
 * @returns the argument list to call the handler with (the schema's output:
 * spread when it is an array, else one argument), or an {@link RpcError}
 * -32602 naming the failing paths.
 * @throws whatever the schema's `validate` throws (a schema bug).
 */
export async function validateParams(
  spec: HandlerSpec,
  params: Params | undefined,
): Promise<unknown[] | RpcError> {
  const schema = spec.schema!;
  let input: unknown;
  if (spec.named) {
    // Named params as sent, or the one object a stub sends positionally.
    input = params === undefined ||
        (Array.isArray(params) && params.length === 0)
      ? {}
      : Array.isArray(params) && params.length === 1
      ? params[0]
      : params;
  } else {
    input = argsOf(params);
  }
  const result = await schema["~standard"].validate(input);
  if (result.issues !== undefined) {
    // No hint for Rafter's own params schemas (protocol/_schema.ts): they
    // read named and positional params themselves, and word each refusal.
    const namedSent = !spec.named && typeof params === "object" &&
      params !== null && !Array.isArray(params) &&
      schema["~standard"].vendor !== RAFTER_PARAMS_VENDOR;
    return invalidParams(
      result.issues,
      namedSent
        ? " (the method takes positional params, an array, and named params, an object, were sent)"
        : "",
    );
  }
  const value = result.value;
  return !spec.named && Array.isArray(value) ? value : [value];
}

/** The -32602 error for a schema's issues. */
function invalidParams(
  issues: ReadonlyArray<StandardSchemaV1.Issue>,
  hint: string,
): RpcError {
  const listed = issues.slice(0, MESSAGE_ISSUES).map((issue) => {
    const path = issue.path ?? [];
    return path.length === 0
      ? issue.message
      : `${formatPath(path)}: ${issue.message}`;
  });
  const more = issues.length - listed.length;
  const text = listed.length === 0
    ? "the params do not match the method's schema"
    : listed.join("; ") + (more > 0 ? `; and ${more} more` : "");
  return new RpcError(INVALID_PARAMS, `Invalid params: ${text}${hint}`, {
    issues: issues.slice(0, DATA_ISSUES).map((issue) => ({
      path: (issue.path ?? []).map(keyOf),
      message: issue.message,
    })),
  });
}

/** A path segment as a JSON key: a string or a number. */
function keyOf(
  segment: PropertyKey | StandardSchemaV1.PathSegment,
): string | number {
  const key = typeof segment === "object" ? segment.key : segment;
  return typeof key === "symbol" ? key.description ?? "" : key;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * A path as people write it: `[0]`, `name`, `user.name`, `items[2].id`,
 * `["a b"]`.
 */
function formatPath(
  path: ReadonlyArray<PropertyKey | StandardSchemaV1.PathSegment>,
): string {
  let text = "";
  for (const segment of path) {
    const key = keyOf(segment);
    if (typeof key === "number") text += `[${key}]`;
    else if (IDENTIFIER.test(key)) text += text === "" ? key : `.${key}`;
    else text += `[${JSON.stringify(key)}]`;
  }
  return text;
}
