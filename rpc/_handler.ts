/**
 * What `withContext` attaches to the functions it returns (private: not
 * part of the public API).
 *
 * @module
 */

import type { Params } from "./message.ts";

/** The property of a declared method that holds its {@link HandlerSpec}. */
export const SPEC: unique symbol = Symbol("rafter.handler");

/** How the dispatcher runs a declared method. */
export interface HandlerSpec {
  /** Whether `run` takes a `CallContext` before the params. */
  readonly context: boolean;
  /** The user's function. */
  // deno-lint-ignore no-explicit-any
  readonly run: (...args: any[]) => unknown;
}

/** The spec of a function made by `withContext`, if it is one. */
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
