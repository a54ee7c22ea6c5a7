/**
 * The test kit: everything the tests share, in one place (never published,
 * and never imported by production code; `bench/` and `examples/` may).
 *
 * - `raft_harness.ts`: {@link RaftHarness}, a hand-driven cluster of pure
 *   Raft cores (no clock, network or disk), for `raft/core*_test.ts` and
 *   the data-driven scenarios of `raft/interaction_test.ts`
 *   (`raft/testdata/*.txt`; `-- --update` rewrites their expected output).
 * - `cluster.ts`: cluster fixtures: a single-node registry in this process
 *   (`startTestRegistry`), endpoints, and `LocalCluster`, real `deno run`
 *   registry nodes and hello servers on 127.0.0.1 (the demo uses it too).
 * - `certs.ts`: `makeTestPki`, a throw-away CA and certificates per test.
 * - `ports.ts`: free TCP ports; `time.ts`: `delay`, `within`, `waitFor`,
 *   `shiftableWallClock` (a `Date.now()` a test can jump);
 *   `temp.ts`: `withTempDir`; `rpc.ts`: raw TCP and CBOR peers and an
 *   in-memory byte stream for the RPC tests.
 *
 * Which task runs a test is decided by a rule, not a list:
 * - `deno task test`: unit and doc tests: every `*_test.ts` except those
 *   below, and every doc example. Fast; starts no cluster of processes.
 * - `deno task test:e2e`: end-to-end: every test file under `tests/`, and
 *   any test file named `*_e2e_test.ts` anywhere (it starts processes or a
 *   real cluster, or takes long). Name a new slow test that way.
 * - `deno task test:sim`: the Raft simulator's tests, under `raft/sim/`.
 * - `deno task test:all`: the three; `.ci/run` runs them in turn.
 *
 * @module
 */

export * from "./certs.ts";
export * from "./cluster.ts";
export * from "./ports.ts";
export * from "./prng.ts";
export * from "./raft_harness.ts";
export * from "./registry.ts";
export * from "./rpc.ts";
export * from "./schemas.ts";
export * from "./temp.ts";
export * from "./time.ts";
