/**
 * A Raft consensus library, usable on its own. `RaftCore` is the pure
 * state machine (no I/O, no timers: tick / step / propose / readIndex /
 * ready / advance), modelled on etcd's raft; `RaftDriver` runs it on the
 * storage, network and clock it is given; `RaftNode` assembles that driver
 * with timers, a write-ahead log with fsync, and peers over JSON-RPC:
 * `PeerTransport` dials them and `servePeers` answers them, each peer
 * connection authenticated by the cluster secret (`peer_auth.ts`,
 * `loadClusterSecret`); the simulator (`sim/`, `deno task sim`) runs drivers
 * on seeded faulty disks and networks for tests.
 *
 * @example
 * ```ts
 * import { RaftCore } from "./mod.ts";
 * const core = new RaftCore({ id: "n1", voters: ["n1"] });
 * core.campaign();
 * console.log(core.role); // leader
 * ```
 *
 * @module
 */

// The pure core (Raft paper and dissertation): no I/O, no timers.
export {
  LeadershipTransferError,
  NotLeaderError,
  RaftCore,
  type RaftCoreConfig,
  type ReadState,
  type Ready,
  type SoftState,
} from "./core.ts";
export type {
  AppendRequest,
  AppendResponse,
  Entry,
  HardState,
  Message,
  NodeId,
  PreVoteRequest,
  PreVoteResponse,
  ReadIndexRequest,
  ReadIndexResponse,
  Role,
  TimeoutNowRequest,
  VoteRequest,
  VoteResponse,
} from "./types.ts";
export { type Progress, type ProgressState } from "./progress.ts";

// The driver: runs a core on storage, a network and a clock given to it.
export {
  type RaftClock,
  RaftDriver,
  type RaftDriverOptions,
  type RaftNetwork,
  type RaftStorage,
  realClock,
  type StorageWrite,
} from "./driver.ts";

// The Deno driver: the write-ahead log, the data folder, the peer port.
export {
  RaftNode,
  type RaftNodeOptions,
  type RaftStatus,
  type RaftTransport,
  RaftUnavailableError,
} from "./node.ts";
export {
  Wal,
  WalCorruptError,
  type WalOpenResult,
  type WalUpdate,
} from "./wal.ts";
export { DataDirInUseError, type DirLock, lockDataDir } from "./dir_lock.ts";
export {
  ClusterSecretError,
  loadClusterSecret,
  type LoadClusterSecretOptions,
} from "./cluster_secret.ts";
export { PeerTransport, type PeerTransportOptions } from "./peer_transport.ts";
export {
  type PeerServer,
  servePeers,
  type ServePeersOptions,
} from "./peer_server.ts";
export { PeerDirectory, type PeerStatus } from "./peer_directory.ts";
export { PeerAcceptor, type PeerAcceptorOptions } from "./peer_server.ts";
export type { ClusterKey, HandshakeRole } from "./peer_auth.ts";
export type { PeerHandler } from "./peer_server.ts";
export type { RpcServer } from "../rpc/server.ts";
export type { RpcSession, SessionMethods } from "../rpc/server_connection.ts";
export type { ByteStream, Dialer, DialerOptions } from "../rpc/transport.ts";
export type { MethodHandler, Methods } from "../rpc/dispatcher.ts";
export type { SimulatedDisk } from "./simulator.ts";
export type { Params } from "../rpc/message.ts";

// The deterministic simulator that tests a core under faults.
export {
  type ClusterConfig,
  ClusterSimulator,
  type FaultConfig,
  type FaultCounts,
  simulateSeed,
  SimulationError,
  type SimulationOptions,
  type SimulationResult,
} from "./simulator.ts";
