/**
 * The pure Raft core (`@rafter/rpc/raft`): `RaftCore` is the state
 * machine of one member, with no I/O and no timers (tick / step / propose /
 * readIndex / transferLeadership / ready / advance), modelled on etcd's
 * raft (Raft paper; Ongaro's dissertation for PreVote §9.6, leadership
 * transfer §3.10, ReadIndex §6.4). Its driver persists each `Ready`, sends
 * its messages, applies committed entries and calls `advance`. It uses
 * Web-standard APIs only and type-checks with the DOM and ESNext libs
 * alone. `RaftDriver` runs a core on the storage, network and clock it
 * is given (the simulator in `sim/` runs it on seeded faulty ones). The Deno driver (timers, the write-ahead log, the data folder,
 * authenticated peers over TCP) is `@rafter/rpc/raft/deno`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RaftCore } from "./mod.ts";
 * const core = new RaftCore({ id: "n1", voters: ["n1"] });
 * core.campaign();
 * assert.equal(core.role, "leader");
 * ```
 *
 * @module
 */

export {
  CommittedEntryConflictError,
  LeadershipTransferError,
  type MemberProgress,
  NotLeaderError,
  type ProgressView,
  RAFT_COMMITTED_ENTRY_CONFLICT,
  RaftCore,
  type RaftCoreConfig,
  type RaftCoreStats,
  type ReadState,
  type Ready,
  type SoftState,
} from "./core.ts";
export type {
  AppendRequest,
  AppendResponse,
  Entry,
  HardState,
  InstallSnapshotRequest,
  InstallSnapshotResponse,
  Message,
  NodeId,
  PreVoteRequest,
  PreVoteResponse,
  ReadIndexRequest,
  ReadIndexResponse,
  Role,
  Snapshot,
  SnapshotPoint,
  TimeoutNowRequest,
  VoteRequest,
  VoteResponse,
} from "./types.ts";
// The driver: runs a core on storage, a network and a clock given to it.
export {
  type RaftClock,
  RaftDriver,
  type RaftDriverOptions,
  type RaftNetwork,
  type RaftStorage,
  RaftUnavailableError,
  realClock,
  type SnapshotPolicy,
  type StorageWrite,
} from "./driver.ts";
export {
  applyConfChange,
  checkTransition,
  clientUrlOf,
  type ConfChange,
  ConfChangeError,
  configEntries,
  type ConfigEntry,
  type Configuration,
  decodeConfiguration,
  encodeConfiguration,
  isConfigEntry,
  isLearner,
  isMember,
  isVoter,
  latestConfiguration,
  makeConfiguration,
  membersOf,
  type MemberUrls,
  peerUrlOf,
  quorumSize,
  sameConfiguration,
} from "./configuration.ts";
export {
  type InflightLimits,
  Progress,
  type ProgressState,
  type SnapshotTransfer,
} from "./progress.ts";
