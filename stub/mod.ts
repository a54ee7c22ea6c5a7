/**
 * The parts of a Rafter client (`@rafter/rpc/client`), for code that
 * configures, observes or reuses them beyond `connect()` (which is in
 * `@rafter/rpc`): the registry client and its watch, the health records
 * that eject failing servers, the retry budget, the edge cache's default
 * TTL, and the option types of the cluster map and the connection pool.
 * Web-standard only, like `@rafter/rpc`.
 *
 * @example What a client knows of the servers bound as `hello`
 * ```ts ignore
 * import type { EndpointStatus } from "@rafter/rpc/client";
 * import { connect } from "@rafter/rpc/deno";
 * const client = connect("tcp://127.0.0.1:7001");
 * await client.stub<{ greet(name: string): string }>("hello").greet("Ada");
 * const states: EndpointStatus[] = client.endpointStates("hello");
 * console.log(states);
 * client.close();
 * ```
 *
 * @module
 */

export {
  type BindOptions,
  type RegistryCallOptions,
  RegistryClient,
  type RegistryClientOptions,
} from "./registry_client/registry_client.ts";
export {
  type RegistryWatch,
  WatchClient,
  type WatchOptions,
  type WatchUpdate,
} from "./registry_client/watch.ts";
export type {
  ClusterMapOptions,
  EndpointPhase,
  EndpointStatus,
} from "./cluster_map/cluster_map.ts";
export type { ConnectionPoolOptions } from "./connection_pool.ts";
export {
  type AttemptFailure,
  EndpointHealth,
  HealthBook,
  type HealthOptions,
} from "./cluster_map/endpoint_health.ts";
export { RetryBudget, type RetryBudgetOptions } from "./call/retry_budget.ts";
export { DEFAULT_EDGE_TTL_MS } from "./edge_cache.ts";
