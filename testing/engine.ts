/**
 * Which registry engine the end-to-end tests run on: the registry's own
 * Raft cluster (the default), or fronts over an etcd cluster
 * (`RAFTER_TEST_ENGINE=etcd`, as `deno task test:etcd` sets it). A test
 * of something only one engine has (Raft membership, local bindings, the
 * fixes of etcd's lease bugs) says so with {@link onlyOn}, and is
 * reported ignored, with its reason, on the other.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { onlyOn, testEngine } from "./engine.ts";
 * const { ignore } = onlyOn("raft", "local bindings are a Raft node's own");
 * assert.equal(ignore, testEngine() !== "raft");
 * ```
 *
 * @module
 */

/** A registry engine the tests can run on. */
export type TestEngine = "raft" | "etcd";

/** The engine of this test run: `$RAFTER_TEST_ENGINE`, default `raft`. */
export function testEngine(): TestEngine {
  let value: string | undefined;
  try {
    value = Deno.env.get("RAFTER_TEST_ENGINE");
  } catch {
    value = undefined; // no --allow-env: the default
  }
  if (value === undefined || value === "" || value === "raft") return "raft";
  if (value === "etcd") return "etcd";
  throw new Error(
    `RAFTER_TEST_ENGINE is ${
      JSON.stringify(value)
    }: give "raft" (the default) or "etcd"`,
  );
}

/**
 * `{ ignore }` for `Deno.test`: ignored unless this run's engine is
 * `engine`; on the other engine it prints why, once per test.
 */
export function onlyOn(
  engine: TestEngine,
  why: string,
): { ignore: boolean } {
  const ignore = testEngine() !== engine;
  if (ignore) console.log(`ignored on the ${testEngine()} engine: ${why}`);
  return { ignore };
}
