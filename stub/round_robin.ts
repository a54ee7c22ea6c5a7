/**
 * Moved to `./distributors/round_robin.ts`; this re-export stays only until
 * the stub's rewrite imports it from there (`stub/cluster_stub.ts` and its
 * test still import this path).
 *
 * @module
 */

export {
  roundRobin,
  type RoundRobinOptions,
} from "./distributors/round_robin.ts";
