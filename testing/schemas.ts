/**
 * Method tables whose params are validated by zod and valibot schemas, for
 * the tests of `method()` (what the server checks) and of `Stub<T>` (the
 * params types a stub takes from them).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { zodBasics } from "./schemas.ts";
 * assert.deepEqual(Object.keys(zodBasics), ["greet", "add", "length", "signUp"]);
 * ```
 *
 * @module
 */

import { z } from "zod";
import * as v from "valibot";
import { method } from "../rpc/server/method.ts";

/** greet(name), add(a, b), length(text) → 10 × its length, signUp({ name, age? }). */
export const zodBasics = {
  greet: method(z.tuple([z.string()]), (name) => `Hello, ${name}!`),
  add: method(
    { params: z.tuple([z.number(), z.number()]) },
    (a, b) => a + b,
  ),
  length: method(
    z.tuple([z.string().transform((text) => text.length)]),
    (n) => n * 10,
  ),
  signUp: method(
    { named: z.object({ name: z.string(), age: z.number().optional() }) },
    ({ name, age }) => `${name} (${age ?? "?"})`,
  ),
};

/** greet(name) and signUp({ name, age? }), validated by valibot. */
export const valibotBasics = {
  greet: method(v.tuple([v.string()]), (name) => `Hello, ${name}!`),
  signUp: method(
    { named: v.object({ name: v.string(), age: v.optional(v.number()) }) },
    ({ name, age }) => `${name} (${age ?? "?"})`,
  ),
};
