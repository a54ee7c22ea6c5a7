/**
 * The Standard Schema v1 interface (https://standardschema.dev, published as
 * `@standard-schema/spec` 1.1.0), written out here as the specification
 * recommends, so that validating params needs no runtime dependency. Zod
 * (3.24+ and 4), Valibot (1+), ArkType (2+) and others implement it: any of
 * their schemas is a {@link StandardSchemaV1}.
 *
 * Only the types are here; the shape is the specification's, member for
 * member.
 *
 * @module
 */

/** The Standard Schema interface: what a schema of any library exposes. */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  /** The Standard Schema properties. */
  readonly "~standard": StandardSchemaV1.Props<Input, Output>;
}

/** The types that make up a {@link StandardSchemaV1}. */
export declare namespace StandardSchemaV1 {
  /** The Standard Schema properties interface. */
  export interface Props<Input = unknown, Output = Input> {
    /** The version number of the standard. */
    readonly version: 1;
    /** The vendor name of the schema library (e.g. `"zod"`, `"valibot"`). */
    readonly vendor: string;
    /** Validates unknown input values; may return a promise. */
    readonly validate: (
      value: unknown,
      options?: StandardSchemaV1.Options | undefined,
    ) => Result<Output> | Promise<Result<Output>>;
    /** Inferred types associated with the schema (types only, absent at run time). */
    readonly types?: Types<Input, Output> | undefined;
  }

  /** The result interface of the validate function. */
  export type Result<Output> = SuccessResult<Output> | FailureResult;

  /** The result interface if validation succeeds. */
  export interface SuccessResult<Output> {
    /** The typed output value. */
    readonly value: Output;
    /** The absence of issues indicates success. */
    readonly issues?: undefined;
  }

  /** Options of the validate function. */
  export interface Options {
    /** Implicit support for additional vendor-specific parameters, if needed. */
    readonly libraryOptions?: Record<string, unknown> | undefined;
  }

  /** The result interface if validation fails. */
  export interface FailureResult {
    /** The issues of failed validation. */
    readonly issues: ReadonlyArray<Issue>;
  }

  /** The issue interface of the failure output. */
  export interface Issue {
    /** The error message of the issue. */
    readonly message: string;
    /** The path of the issue, if any. */
    readonly path?: ReadonlyArray<PropertyKey | PathSegment> | undefined;
  }

  /** The path segment interface of the issue. */
  export interface PathSegment {
    /** The key representing a path segment. */
    readonly key: PropertyKey;
  }

  /** The Standard Types interface. */
  export interface Types<Input = unknown, Output = Input> {
    /** The input type of the schema. */
    readonly input: Input;
    /** The output type of the schema. */
    readonly output: Output;
  }

  /** Infers the input type of a Standard Schema. */
  export type InferInput<Schema extends StandardSchemaV1> = NonNullable<
    Schema["~standard"]["types"]
  >["input"];

  /** Infers the output type of a Standard Schema. */
  export type InferOutput<Schema extends StandardSchemaV1> = NonNullable<
    Schema["~standard"]["types"]
  >["output"];
}

/**
 * The vendor of Rafter's own params schemas (`protocol/_schema.ts`, the
 * registry's): they read named and positional params themselves and word
 * each refusal, so the method layer adds no hint of its own to them.
 */
export const RAFTER_PARAMS_VENDOR = "rafter-params";
