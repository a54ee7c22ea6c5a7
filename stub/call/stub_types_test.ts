// A cluster stub's method types come from the server's method table: the
// params a schema takes in (zod, valibot), without the context that
// withContext adds. Type-level checks, plus the calls docs/client-api.md shows.
import assert from "node:assert/strict";
import {
  type CallContext,
  type Methods,
  withContext,
} from "../../rpc/server/method.ts";
import type { Stub } from "./cluster_stub.ts";
import { valibotBasics, zodBasics } from "../../testing/schemas.ts";

const zodMethods = zodBasics;
const valibotMethods = valibotBasics;

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends
  (<T>() => T extends B ? 1 : 2) ? true : false;
function assertType<T extends true>(_proof?: T): void {}

Deno.test("Stub<typeof methods> takes the params types from the schemas", async () => {
  type S = Stub<typeof zodMethods>;
  assertType<Equal<S["greet"], (...args: [string]) => Promise<string>>>();
  assertType<Equal<S["add"], (...args: [number, number]) => Promise<number>>>();
  // The stub sends what the schema takes in: a string, not the length.
  assertType<Equal<S["length"], (...args: [string]) => Promise<number>>>();
  assertType<
    Equal<
      S["signUp"],
      (params: { name: string; age?: number | undefined }) => Promise<string>
    >
  >();
  type V = Stub<typeof valibotMethods>;
  assertType<Equal<V["greet"], (...args: [string]) => Promise<string>>>();
  assertType<
    Equal<
      V["signUp"],
      (params: { name: string; age?: number | undefined }) => Promise<string>
    >
  >();
  // withContext hides the context from callers.
  const contextual = {
    sleep: withContext((_c: CallContext, ms: number) =>
      Promise.resolve(`slept ${ms}`)
    ),
  };
  type C = Stub<typeof contextual>;
  assertType<Equal<C["sleep"], (ms: number) => Promise<string>>>();
  // The checks docs/client-api.md shows: a plain function of that type fits.
  const greet: S["greet"] = (name: string) => Promise.resolve(name);
  const signUp: S["signUp"] = ({ name }) => Promise.resolve(name);
  // @ts-expect-error: greet takes a string
  const wrong: S["greet"] = (name: number) => Promise.resolve(`${name}`);
  assert.equal(typeof wrong, "function");
  assert.equal(await greet("Ada"), "Ada");
  assert.equal(await signUp({ name: "Ada" }), "Ada");
  // And the table is a method table.
  const methods: Methods = { ...zodMethods, ...valibotMethods, ...contextual };
  assert.ok(Object.keys(methods).length > 0);
});
