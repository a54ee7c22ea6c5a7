/**
 * Runnable programs that show Rafter at work:
 *
 * - `hello/`: a server that serves `greet(name)` and binds itself as
 *   `hello`, and a client that calls it through a cluster stub;
 * - `demo/`: `deno task demo`, the failover demo on real processes (3
 *   registry nodes, hello servers killed and started, the registry leader
 *   killed), and the local-cluster launcher the end-to-end tests share.
 *
 * @module
 */

export * from "./hello/mod.ts";
export * from "./demo/mod.ts";
