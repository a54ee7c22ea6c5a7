/**
 * The parts of a Rafter client (`@rafter/rpc/client`), for code that
 * configures, observes or reuses them beyond `connect()` (which is in
 * `@rafter/rpc`): the registry client and its watch, the health records
 * that eject failing servers, the retry budget, the edge cache's default
 * TTL, the option types of the cluster map and the connection pool, and
 * the {@link AuthenticationError} a refused `token` or `serverToken` ends in.
 * Web-standard only, like `@rafter/rpc`.
 *
 * @example What a client knows of the servers bound as `hello`
 * ```ts
 * import assert from "node:assert/strict";
 * import type { EndpointStatus } from "@rafter/rpc/client";
 * import { connect, serve } from "@rafter/rpc/deno";
 * import { startRegistryNode } from "@rafter/rpc/registry";
 * // A one-node registry in this process (fast ticks, so it elects at once).
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 *   tickMs: 10,
 * });
 * const server = serve({ methods: { greet: (name: string) => `Hello, ${name}!` } });
 * const client = connect(node.url);
 * await client.bind("hello", { id: "hello-1", url: server.url });
 * await client.stub<{ greet(name: string): string }>("hello").greet("Ada");
 * const states: EndpointStatus[] = client.endpointStates("hello");
 * assert.deepEqual(states, [
 *   { id: "hello-1", url: server.url, state: "serving", reason: null },
 * ]);
 * client.close();
 * await server.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
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
export {
  CLOSE_METHOD,
  OPEN_METHOD,
  REPLICATE_METHOD,
  SESSION_NOT_FOUND,
  type SessionAnswer,
  type SessionMethod,
  type SessionPeers,
  type SessionRoute,
  SessionStore,
  type SessionStoreOptions,
} from "./sessions/session_store.ts";
export {
  DEFAULT_EDGE_MAX_STALE_MS,
  DEFAULT_EDGE_SHARE_WAIT_MS,
  DEFAULT_EDGE_TTL_MS,
} from "./edge_cache.ts";
export {
  AuthenticationError,
  type AuthenticationErrorData,
} from "./authenticate.ts";
