/**
 * The failover demo (`deno task demo`, entry `main.ts`): its scenario
 * (`scenario.ts`), and `LocalCluster`, which starts registry nodes and hello
 * servers as real `deno run` processes on 127.0.0.1, kills them by PID and
 * restarts them from their data folders; the end-to-end tests and the
 * benchmark use it too.
 *
 * @module
 */

export * from "./local_cluster.ts";
export * from "./scenario.ts";
