/**
 * A small params-schema builder for the registry's contract: each method's
 * params are declared once, as an ordered table of fields checked by the
 * compiler against the contract's params interface, from which come the
 * parsed values the service gets ({@link OutputOf}), the shape a refusal
 * quotes (`registry.unbind takes { name, id, leaseId?, scope? }`), the
 * params it accepts (any other is refused), and a Standard Schema v1
 * validator for `method(schema, handler)`.
 *
 * Written here rather than with a schema library so that every refusal
 * keeps the registry's own message (one issue, the first field that fails,
 * worded for a person) and the edge bundle gains no dependency.
 * Web-standard only.
 *
 * @module
 */

import {
  RAFTER_PARAMS_VENDOR,
  type StandardSchemaV1,
} from "../rpc/server/standard_schema.ts";

/**
 * A refused param: its message says which field, what was wrong and what
 * is expected (the answer is `Invalid params: <message>`, -32602).
 */
export class ParamsError extends Error {
  /** @param message what was wrong, naming the field. */
  constructor(message: string) {
    super(message);
    this.name = "ParamsError";
  }
}

/** One field of a params object: how it is read, and its types. */
export interface Field<In, Out, Optional extends boolean = boolean> {
  /** Whether a client may leave it out (`name?` in the shape). */
  readonly optional: Optional;
  /** What follows the field's name in the shape (`: { ttlMs }`), if anything. */
  readonly shape?: string;
  /**
   * Reads the value sent (undefined when absent) given the fields read
   * before it; throws a {@link ParamsError}.
   */
  readonly parse: (value: unknown, earlier: Record<string, unknown>) => Out;
  /** Types only (absent at run time). */
  readonly types?: { readonly input: In; readonly output: Out };
}

/** The fields of a params object, in the order they are checked. */
// deno-lint-ignore no-explicit-any
export type Fields = Record<string, Field<any, any>>;

/** The keys of `T` a client may leave out. */
type OptionalKeys<T> = {
  [K in keyof T]-?: Record<never, never> extends Pick<T, K> ? K : never;
}[keyof T];

/**
 * The fields that read params of type `T`: one per key of `T`, optional
 * exactly when the key is, taking what `T` says it holds.
 */
export type FieldsOf<T> = {
  [K in keyof T]-?: Field<
    Exclude<T[K], undefined>,
    // deno-lint-ignore no-explicit-any
    any,
    K extends OptionalKeys<T> ? true : false
  >;
};

/** What the service gets: every field, read (defaults filled in). */
export type OutputOf<F extends Fields> = {
  [K in keyof F]: NonNullable<F[K]["types"]>["output"];
};

/** A field a client must send (its parser still sees undefined when absent). */
export function required<In, Out = In>(
  parse: (value: unknown, earlier: Record<string, unknown>) => Out,
  shape?: string,
): Field<In, Out, false> {
  return { optional: false, parse, shape };
}

/** A field a client may leave out (its parser gives the default). */
export function optional<In, Out = In | undefined>(
  parse: (value: unknown, earlier: Record<string, unknown>) => Out,
  shape?: string,
): Field<In, Out, true> {
  return { optional: true, parse, shape };
}

/**
 * The params of one method: a Standard Schema of the argument list (for
 * `method(schema, handler)`, positional form), whose output is the one
 * parsed params object.
 */
export interface ParamsSchema<In, F extends Fields>
  extends StandardSchemaV1<[params: In], [params: OutputOf<F>]> {
  /** The method's name, as refusals quote it. */
  readonly method: string;
  /** The fields, in checking order. */
  readonly fields: F;
  /** `{ name, id, leaseId?, scope? }`, as refusals quote it. */
  readonly shape: string;
  /**
   * Reads the argument list of a call: named params (one object), or,
   * when the method takes them, positional ones (first a string).
   *
   * @throws {ParamsError} for the first field that fails, an unknown
   * param, or params of neither form.
   */
  parse(args: readonly unknown[]): OutputOf<F>;
}

/** Options of {@link params}. */
export interface ParamsOptions<F extends Fields> {
  /** Fields also taken by position, in order (the first one a string). */
  readonly positional?: readonly (keyof F & string)[];
  /** A check across fields, after each has passed; throws a {@link ParamsError}. */
  readonly check?: (params: OutputOf<F>) => void;
}

/**
 * Declares the params of `method`, whose type `T` (the contract's params
 * interface) the fields must match: a field for every key, optional
 * exactly when the key is, and no other (so the interface, the shape
 * quoted by refusals, the list of accepted params and the checks cannot
 * drift apart).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { optional, params, ParamsError, required } from "./_schema.ts";
 *
 * const text = (field: string) => (value: unknown) => {
 *   if (typeof value !== "string") throw new ParamsError(`"${field}" must be a string`);
 *   return value;
 * };
 * interface GreetParams {
 *   name: string;
 *   title?: string;
 * }
 * const greet = params<GreetParams>()("greet", {
 *   name: required<string>(text("name")),
 *   title: optional<string>((v) => v === undefined ? "" : text("title")(v)),
 * }, { positional: ["name", "title"] });
 * assert.equal(greet.shape, "{ name, title? }");
 * assert.deepEqual(greet.parse([{ name: "Ada" }]), { name: "Ada", title: "" });
 * assert.deepEqual(greet.parse(["Ada", "Dr"]), { name: "Ada", title: "Dr" });
 * assert.throws(() => greet.parse([{ name: "Ada", age: 36 }]), {
 *   message: '"age" is not a param of greet, which takes { name, title? }',
 * });
 * ```
 */
export function params<T>(): <F extends FieldsOf<T>>(
  method: string,
  fields: F & Record<Exclude<keyof F, keyof T>, never>,
  options?: ParamsOptions<F>,
) => ParamsSchema<T, F> {
  return (method, fields, options) => declare(method, fields, options);
}

function declare<T, F extends Fields>(
  method: string,
  fields: F,
  options: ParamsOptions<F> = {},
): ParamsSchema<T, F> {
  const positional = options.positional ?? [];
  const keys = Object.keys(fields);
  const shape = keys.length === 0
    ? "{}"
    : `{ ${
      keys.map((key) =>
        `${key}${fields[key].optional ? "?" : ""}${fields[key].shape ?? ""}`
      ).join(", ")
    } }`;
  const takes = keys.length === 0
    ? `${method} takes no params`
    : `${method} takes ${shape}`;
  const parse = (args: readonly unknown[]): OutputOf<F> => {
    const sent = paramsObject(args, positional, takes);
    for (const key of Object.keys(sent)) {
      if (!Object.hasOwn(fields, key) && sent[key] !== undefined) {
        throw new ParamsError(
          keys.length === 0
            ? `${JSON.stringify(key)} is not a param: ${takes}`
            : `${
              JSON.stringify(key)
            } is not a param of ${method}, which takes ${shape}`,
        );
      }
    }
    const read: Record<string, unknown> = {};
    for (const key of keys) read[key] = fields[key].parse(sent[key], read);
    options.check?.(read as OutputOf<F>);
    return read as OutputOf<F>;
  };
  return {
    method,
    fields,
    shape,
    parse,
    "~standard": {
      version: 1,
      vendor: RAFTER_PARAMS_VENDOR,
      validate(value) {
        try {
          return { value: [parse(Array.isArray(value) ? value : [value])] };
        } catch (error) {
          if (!(error instanceof ParamsError)) throw error;
          return { issues: [{ message: error.message }] };
        }
      },
    },
  };
}

/** Named params as an object, or positional params mapped to names in order. */
function paramsObject(
  args: readonly unknown[],
  positional: readonly string[],
  takes: string,
): Record<string, unknown> {
  const [first] = args;
  if (args.length === 0 && positional.length === 0) return {};
  if (
    args.length === 1 && typeof first === "object" && first !== null &&
    !Array.isArray(first)
  ) {
    return first as Record<string, unknown>;
  }
  if (positional.length > 0 && typeof first === "string") {
    if (args.length > positional.length) {
      throw new ParamsError(
        `${takes}, or at most ${positional.length} ${
          positional.length === 1 ? "param" : "params"
        } by position (${positional.join(", ")}); ${args.length} were sent`,
      );
    }
    const named: Record<string, unknown> = {};
    positional.forEach((key, i) => {
      if (args[i] !== undefined) named[key] = args[i];
    });
    return named;
  }
  throw new ParamsError(takes);
}
