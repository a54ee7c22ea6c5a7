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
 * ```ts ignore
 * import { startRegistryNode } from "./mod.ts";
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 7001 },
 *   dataDir: "./data/n1",
 * });
 * await node.stop();
 * ```
 *
 * @module
 */

export {
  type RegistryNode,
  type RegistryNodeOptions,
  type RegistryNodeSnapshot,
  restoreRegistrySnapshot,
  startRegistryNode,
} from "./registry_node.ts";
export {
  type RegistrySnapshot,
  RegistryState,
  type RegistryStateOptions,
} from "./state.ts";
export {
  type ApplyOutcome,
  type ApplyResult,
  type Binding,
  type HistoryItem,
  type LeaseRecord,
} from "./state.ts";
export type { WatchHub, WatchHubOptions } from "./watch_hub.ts";
export type { LeaseKeeper } from "./lease_keeper.ts";
export type { LocalArea } from "./local_area.ts";
export type { PeerServer, PeerTransport, RaftNode } from "../raft/deno.ts";
export type { RpcServer } from "../rpc/server/server.ts";
export type { TcpAddress } from "../rpc/transport/transport.ts";
export type { Attributes } from "../protocol/registry.ts";
export {
  type CommandError,
  type CommandValue,
  type StateChange,
} from "./state.ts";
export {
  type Endpoint,
  type WatchEvent,
  type WatchResult,
} from "../protocol/registry.ts";
export { type LeaseSync } from "./lease_keeper.ts";
export { type Message, type NodeId } from "../raft/types.ts";
export type { PeerAcceptor } from "../raft/peer_server.ts";
export type { PeerDirectory, PeerStatus } from "../raft/peer_directory.ts";
export { type RaftStatus } from "../raft/node.ts";
export { type RpcSession } from "../rpc/server/server_connection.ts";
export {
  type AppendRequest,
  type AppendResponse,
  type ReadIndexRequest,
  type ReadIndexResponse,
  type VoteRequest,
  type VoteResponse,
} from "../raft/types.ts";
export {
  type DeleteReason,
  type EndpointState,
  type HealthCheck,
  type Scope,
} from "../protocol/registry.ts";
export { type Params } from "../rpc/message.ts";
export { type SessionMethods } from "../rpc/server/server_connection.ts";
export { type SoftState } from "../raft/core.ts";
export { type Entry, type Role } from "../raft/types.ts";
export { type Methods } from "../rpc/server/dispatcher.ts";
export { type MethodHandler } from "../rpc/server/dispatcher.ts";
