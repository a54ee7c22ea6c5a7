/**
 * The local cluster of real processes that the demo runs: it lives in
 * `testing/cluster.ts` (the test kit) and is re-exported here for the demo
 * and the code that imported it from this path.
 *
 * @module
 */

export {
  type Child,
  freePorts,
  LocalCluster,
  type LocalClusterOptions,
} from "../../testing/cluster.ts";
