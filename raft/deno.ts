/**
 * The Deno driver of the Raft core (`@rafter/rpc/raft/deno`): `RaftNode`
 * runs a `RaftCore` (from `@rafter/rpc/raft`) with timers, a write-ahead
 * log with fsync, and a data folder that knows its cluster and member
 * (`DataDir`, `meta.json`); `PeerTransport` dials the other members and
 * `servePeers` answers them, each peer connection authenticated by the
 * cluster secret and the cluster id (`ClusterKey`, `loadClusterSecret`).
 * It re-exports the core, so one import serves a Deno program.
 *
 * @example A single node (it sends nothing, so a no-op transport will do)
 * ```ts
 * import assert from "node:assert/strict";
 * import { RaftNode } from "./deno.ts";
 * const dataDir = await Deno.makeTempDir();
 * const leading = Promise.withResolvers<void>();
 * const node = await RaftNode.start({
 *   id: "n1",
 *   peers: { n1: "tcp://127.0.0.1:7101" },
 *   dataDir,
 *   transport: { send() {}, close() {} },
 *   tickMs: 10,
 *   apply: (entry) => entry.data.length,
 *   onSoftState: (soft) => soft.role === "leader" && leading.resolve(),
 * });
 * await leading.promise; // after an election timeout (10 to 20 ticks)
 * assert.equal(await node.propose("hello"), 5); // once committed
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 *
 * @module
 */

import { serve } from "../adapter/deno/serve.ts";
import {
  type PeerServer,
  servePeersOn,
  type ServePeersOptions,
} from "./peer_server.ts";

export {
  peerUrlsOf,
  RaftNode,
  type RaftNodeOptions,
  type RaftRecovery,
  type RaftStatus,
  type RaftTransport,
  RaftUnavailableError,
} from "./node.ts";
export {
  Wal,
  WalCorruptError,
  type WalOpenResult,
  type WalOptions,
  type WalSnapshotMarker,
  type WalStats,
  type WalUpdate,
  WalWriteError,
} from "./wal.ts";
export {
  type Snapshot,
  SnapshotCorruptError,
  SnapshotStore,
  SnapshotWriteError,
  type StoredSnapshot,
} from "./snapshot_store.ts";
export {
  bootstrapClusterId,
  DATA_DIR_FORMAT,
  DataDir,
  type DataDirMeta,
  DataDirMismatchError,
  type DataDirOptions,
  readDataDirMeta,
} from "./data_dir.ts";
export { DataDirInUseError, type DirLock } from "./dir_lock.ts";
export {
  ClusterSecretError,
  loadClusterSecret,
  type LoadClusterSecretOptions,
} from "./cluster_secret.ts";
export {
  ClusterKey,
  type HandshakeRole,
  type HandshakeSubject,
  memberIdOf,
  PeerHandshakeError,
  PeerIdentityError,
} from "./peer_auth.ts";
export {
  PeerTransport,
  type PeerTransportOptions,
  type PeerTransportStats,
} from "./peer_transport.ts";
export {
  PeerAcceptor,
  type PeerAcceptorOptions,
  type PeerHandler,
  type PeerServer,
  type PeerServerStats,
  type ServeFunction,
  servePeersOn,
  type ServePeersOptions,
} from "./peer_server.ts";
export { PeerDirectory, type PeerStatus } from "./peer_directory.ts";
// The core too, whose types the driver's signatures name: one import serves
// a Deno program.
export * from "./mod.ts";

/**
 * Listens on the peer port (Deno TCP) and serves the peer protocol:
 * {@link servePeersOn} with Deno's `serve`.
 *
 * @throws {Deno.errors.AddrInUse} and the other errors of `Deno.listen`.
 * @throws {RangeError} when a handler uses a reserved method name.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ClusterKey, PeerDirectory, servePeers } from "./deno.ts";
 * const options = {
 *   id: "n1",
 *   clusterId: "0123456789abcdef",
 *   key: await ClusterKey.random(),
 *   directory: new PeerDirectory("n1", { n1: "tcp://127.0.0.1:7101", n2: "tcp://127.0.0.1:7102" }),
 *   onStep: () => {}, // a RaftNode's step, in a member
 * };
 * const server = servePeers(options); // 127.0.0.1, a free port
 * assert.match(server.url, /^tcp:\/\/127\.0\.0\.1:\d+$/);
 * assert.equal(server.acceptor.openConnections, 0);
 * await server.close();
 * // raft.step is the peer protocol's own method
 * assert.throws(() => servePeers({ ...options, handlers: { "raft.step": () => 1 } }), RangeError);
 * ```
 */
export function servePeers(options: ServePeersOptions): PeerServer {
  return servePeersOn(serve, options);
}
// RPC types the peer server's signatures name.
export type {
  RpcServer,
  ServeMetricsOptions,
  ServeOptions,
} from "../rpc/server/server.ts";
export type {
  RpcSession,
  ServerLimits,
  SessionMethods,
} from "../rpc/server/server_connection.ts";
export type {
  ByteStream,
  Dialer,
  DialerOptions,
  PeerCertificate,
} from "../rpc/transport/transport.ts";
export type { MethodHandler, Methods } from "../rpc/server/dispatcher.ts";
export type { Params } from "../rpc/message.ts";
