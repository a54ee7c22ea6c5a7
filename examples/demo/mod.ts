/**
 * The failover demo (`deno task demo`, entry `main.ts`): its scenario
 * (`scenario.ts`), run on the test kit's `LocalCluster`
 * (`testing/cluster.ts`), which starts registry nodes and hello servers as
 * real `deno run` processes on 127.0.0.1, kills them by PID and restarts
 * them from their data folders.
 *
 * @module
 */

export * from "./scenario.ts";
