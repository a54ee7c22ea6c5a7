/**
 * A Raft consensus library, usable on its own. `RaftCore` is the pure
 * state machine (no I/O, no timers: tick / step / propose / readIndex /
 * ready / advance), modelled on etcd's raft; `RaftNode` drives it with
 * timers, a write-ahead log with fsync, and peers over JSON-RPC:
 * `PeerTransport` dials them and `servePeers` answers them, each peer
 * connection authenticated by the cluster secret (`peer_auth.ts`,
 * `loadClusterSecret`); `simulator.ts` runs cores through a seeded faulty
 * network for tests.
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

export * from "./types.ts";
export * from "./core.ts";
export * from "./log.ts";
export * from "./progress.ts";
export * from "./wal.ts";
export * from "./crc32.ts";
export * from "./atomic_file.ts";
export * from "./message_validation.ts";
export * from "./peer_auth.ts";
export * from "./cluster_secret.ts";
export * from "./peer_directory.ts";
export * from "./peer_transport.ts";
export * from "./peer_server.ts";
export * from "./node.ts";
export * from "./dir_lock.ts";
export * from "./simulator.ts";
