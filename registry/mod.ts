/**
 * The Rafter registry: a replicated map from service name to endpoints,
 * kept consistent by Raft. It holds the contract (`protocol.ts`: every
 * method's params and result, watch notifications, error codes), the state
 * machine (bindings, leases, revisions, the watch history window,
 * snapshots), the JSON-RPC service (`registry.*`, `lease.*`), lease timing
 * (`lease_keeper.ts`), watches (`watch_hub.ts`), the local area, health
 * checks, and `startRegistryNode`, which runs one node on a client port
 * and a peer port (authenticated by the cluster secret);
 * `registry/main.ts` is its command line.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { connect } from "../stub/client.ts";
 * import { startRegistryNode } from "./mod.ts";
 * // A one-node registry (fast ticks, so it elects at once); a cluster
 * // gives each node `peers` and a `clusterSecret`.
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 *   tickMs: 10,
 * });
 * const client = connect(node.url);
 * await client.bind("hello?version=1", { id: "h1", url: "tcp://127.0.0.1:9001" });
 * const { endpoints } = await client.lookup("hello?version=1");
 * assert.deepEqual(endpoints.map((endpoint) => endpoint.attrs), [{ version: "1" }]);
 * assert.equal(node.status().role, "leader");
 * client.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 *
 * @module
 */

export {
  type RegistryNode,
  type RegistryNodeOptions,
  startRegistryNode,
} from "./main.ts";
export {
  type RegistryNodeSnapshot,
  restoreRegistrySnapshot,
} from "./node/replica.ts";
export {
  type RegistrySnapshot,
  RegistryState,
  type RegistryStateOptions,
} from "./state.ts";
export {
  type ApplyOutcome,
  type ApplyResult,
  type AuthSnapshot,
  type Binding,
  type CommandError,
  type CommandValue,
  type HistoryItem,
  type LeaseRecord,
  type StateChange,
  type TokenRecord,
} from "./state.ts";
export type { LeaseKeeper, LeaseSync } from "./lease_keeper.ts";
export type { WatchHubOptions } from "./watch_hub.ts";
export type { LogLevel } from "./node/log.ts";
export type { TcpAddress } from "../rpc/transport/transport.ts";
export type {
  Attributes,
  DeleteReason,
  Endpoint,
  EndpointState,
  HealthCheck,
  MemberKind,
  MemberStatus,
  PeerSecurityStatus,
  PeerServerCounters,
  PeerTransportCounters,
  RaftAnomalyCounters,
  RaftDropCounters,
  RegistryStatus,
  Scope,
  WatchEvent,
  WatchResult,
} from "../protocol/registry.ts";
