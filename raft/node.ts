/**
 * The Deno Raft node: the {@link RaftDriver} assembled with a data folder
 * (lock and `meta.json`), the write-ahead log and the snapshot files as its
 * storage (every write fsynced before the messages that depend on it are
 * sent), real timers (a tick every `tickMs`) and a peer transport as its
 * network.
 *
 * A restart loads the newest snapshot in `<dataDir>/snap` (the state
 * machine is restored from it first) and replays only the log after it
 * (Raft paper §7).
 *
 * @module
 */

import { DataDir } from "./data_dir.ts";
import type { DirLock } from "./dir_lock.ts";
import { RaftCore, type RaftCoreStats, type SoftState } from "./core.ts";
import { answersFirst } from "./_answers_first.ts";
import { type NodeStorage, nodeStorage } from "./_node_storage.ts";
import { RaftDriver, RaftUnavailableError, realClock } from "./driver.ts";
import {
  type ConfChange,
  type Configuration,
  isMember,
  makeConfiguration,
  membersOf,
} from "./configuration.ts";
import type { MemberProgress } from "./core.ts";
import type { SnapshotPolicy } from "./driver.ts";
import { SnapshotStore, type StoredSnapshot } from "./snapshot_store.ts";
import type {
  Entry,
  Message,
  NodeId,
  Snapshot,
  SnapshotPoint,
} from "./types.ts";
import { Wal, type WalOptions, type WalSnapshotMarker } from "./wal.ts";

export { RaftUnavailableError };

/**
 * Where a {@link RaftNode} sends its messages: a `PeerTransport` (the
 * authenticated peer connections), or a test double.
 */
export interface RaftTransport {
  /** Queues messages for their `to`; never blocks, may drop. */
  send(messages: readonly Message[]): void;
  /** Closes the connections; later sends are dropped. */
  close(): void;
  /**
   * Follows a membership change: `peers` is every member's id → peer URL
   * after it (this node included; members whose URL is unknown are left
   * out). Connect to the new ones, drop the removed ones. Called at start
   * with the configuration recovered from the log, then on every change
   * (see `PeerTransport.updateMembers`). Default: nothing.
   */
  updateMembers?(peers: Readonly<Record<NodeId, string>>): void;
  /**
   * Registers `listener`, called with a peer's id when the connection to
   * it ends from the other side (its process exited); the node then stands
   * for election soon if that peer was its leader (see
   * `RaftCore.leaderConnectionLost`). Default: never called.
   */
  onConnectionLost?(listener: (id: NodeId) => void): void;
}

/** Settings of a {@link RaftNode}. */
export interface RaftNodeOptions<R> {
  /** This node's id; a key of `peers`. */
  id: NodeId;
  /**
   * Every voter's id → its peer URL (`tcp://host:port` of its peer port),
   * this node included: the bootstrap configuration (its keys are the
   * voters, its values their `peerUrls`). Used when the folder is new; at
   * a restart the configuration is the latest in the log (Raft
   * dissertation §4.1), falling back to this one only for a log without
   * config entries. With `join`, the members known when joining (their
   * URLs only fill in what the log does not say).
   */
  peers: Readonly<Record<NodeId, string>>;
  /**
   * A node joining a running cluster (dissertation §4.2.1): it starts with
   * an empty configuration and learns it from the leader's appends, once
   * the cluster added it (as a learner). Needs `clusterId`.
   * @default false
   */
  join?: boolean;
  /**
   * The id of the cluster joined (16 hex digits, as the cluster tells it),
   * recorded in the new data folder instead of a bootstrap id; a folder of
   * another cluster is refused. Required with `join`.
   */
  clusterId?: string;
  /**
   * Called with the new configuration when a membership change reaches
   * this node's log (committed or not; §4.1), after the transport was
   * updated and before the messages that depend on it go out.
   */
  onConfiguration?(configuration: Configuration): void;
  /**
   * Carries this node's messages to its peers (messages from peers come in
   * through {@link RaftNode.step}). The node owns it from then on: it closes
   * the transport when it stops, or when `start` fails.
   */
  transport: RaftTransport;
  /** Folder for the write-ahead log and `meta.json`; created if missing (see `DataDir`). */
  dataDir: string;
  /**
   * Bootstrap token: part of the cluster id (see `bootstrapClusterId`).
   * @default ""
   */
  clusterToken?: string;
  /**
   * Applies one committed entry to the state machine and returns the result
   * the proposer receives. Called in log order, exactly once per entry per
   * process lifetime (after a restart the log is applied again from the
   * newest snapshot's index + 1, or from index 1 without one). Entries
   * whose `data` is "" are the leaders' empty entries.
   */
  apply(entry: Entry): R;
  /**
   * Replaces the state machine's state with a snapshot's `data` (what
   * `snapshot.take()` returned, here or on the leader): at start when the
   * data folder holds a snapshot, and when this node installs one from the
   * leader (Raft paper §7). Required with `snapshot`, and for any node of a
   * cluster whose members compact their logs.
   */
  restore?(snapshot: Snapshot): void;
  /**
   * Checks a snapshot installed from the leader before it is stored or
   * restored: returns why its `data` cannot be read, or null (see
   * `RaftCoreConfig.checkSnapshot`). Default: every snapshot is taken.
   */
  checkSnapshot?(data: string): string | null;
  /**
   * Automatic snapshots and log compaction (see `SnapshotPolicy`: take,
   * everyEntries default 10,000, everyBytes default 64 Mi, trailingEntries
   * default 5,000). Snapshot files go to `<dataDir>/snap`. Without it this
   * node never compacts its log.
   */
  snapshot?: SnapshotPolicy;
  /** Milliseconds per tick. Default 100. */
  tickMs?: number;
  /** Election timeout in ticks (randomized up to twice this). Default 10. */
  electionTicks?: number;
  /** Heartbeat interval in ticks. Default 1. */
  heartbeatTicks?: number;
  /**
   * PreVote (Raft dissertation §9.6; see `RaftCoreConfig.preVote`).
   * Default true.
   */
  preVote?: boolean;
  /**
   * Options of the write-ahead log in `<dataDir>/wal` (segment size, group
   * commit). Default: the log's defaults.
   */
  walOptions?: WalOptions;
  /** Called when the term, role or leader changes. */
  onSoftState?(state: SoftState): void;
  /**
   * Called when a {@link RaftNode.propose} call settles: `applied` when
   * the entry committed and was applied here, `failed` otherwise (not
   * leader, lost leadership, timeout), with the time since the call, ms.
   * For metrics; it must not throw.
   */
  onProposal?(outcome: "applied" | "failed", ms: number): void;
  /**
   * Called once a snapshot is durable and the log compacted to it:
   * `taken` for one this node took (`ms` counts taking, saving and
   * compacting), `installed` for one received from the leader (`ms`
   * counts saving and compacting); `bytes` is the snapshot file's size.
   * Times by the monotonic clock. For metrics; it must not throw.
   */
  onSnapshot?(
    snapshot: {
      source: "taken" | "installed";
      index: number;
      bytes: number;
      ms: number;
    },
  ): void;
  /**
   * Called when storage fails (the node can no longer promise durability)
   * or the core found a safety violation (`CommittedEntryConflictError`: a
   * leader's append contradicts an entry this node committed; the error
   * names the index, both terms and the sender): the node has stopped
   * itself, and {@link RaftNode.failure} is the error. Default: log to
   * stderr.
   */
  onFatal?(error: unknown): void;
}

/**
 * What {@link RaftNode.start} recovered from its write-ahead log (for the
 * start's log line): the log's last index and snapshot marker, and the
 * torn tail cut off (a write a crash or power loss interrupted; none of it
 * was acknowledged, since an append is acknowledged only once fsynced).
 */
export interface RaftRecovery {
  /** The log folder. */
  walDir: string;
  /** Index of the last entry in the log (the snapshot's when none follow). */
  lastIndex: number;
  /** Index of the snapshot marker, 0 for none. */
  snapshotIndex: number;
  /** Bytes of torn tail cut off the last segment; 0 for a clean log. */
  repairedBytes: number;
}

/** A snapshot of a node's consensus state, for status endpoints. */
export interface RaftStatus {
  /** This node's id. */
  id: NodeId;
  /** Current term. */
  term: number;
  /** This node's role in `term`. */
  role: SoftState["role"];
  /** Leader's id, or null while none is known (e.g. during an election). */
  leader: NodeId | null;
  /** Highest log index known to be committed. */
  commitIndex: number;
  /** Highest log index applied to the state machine by this process. */
  appliedIndex: number;
  /** Index of the last entry in this node's log. */
  lastIndex: number;
  /**
   * Whether this node is in its current configuration (false for a node
   * that joins and was not added yet, and for a removed node that knows).
   */
  member: boolean;
  /** Whether this node is a learner (non-voting member, §4.2.1). */
  learner: boolean;
  /**
   * Index of the newest durable snapshot (taken here, installed from the
   * leader, or loaded at start); 0 for none.
   */
  snapshotIndex: number;
}

/**
 * A running Raft node. It sends through its `transport`; deliver the
 * messages peers send it with {@link RaftNode.step} (the peer server does,
 * once a peer has authenticated).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ClusterKey } from "./peer_auth.ts";
 * import { bootstrapClusterId } from "./data_dir.ts";
 * import { PeerTransport } from "./peer_transport.ts";
 * import { RaftNode } from "./node.ts";
 * // One member; with more, also serve the peer port (servePeers in
 * // deno.ts) with `onStep: (messages) => node.step(messages)`.
 * const peers = { n1: "tcp://127.0.0.1:7101" };
 * const key = await ClusterKey.random();
 * const clusterId = await bootstrapClusterId(peers);
 * const transport = new PeerTransport({ id: "n1", peers, key, clusterId });
 * const dataDir = await Deno.makeTempDir();
 * const { promise: leading, resolve } = Promise.withResolvers<void>();
 * const node = await RaftNode.start({
 *   id: "n1",
 *   peers,
 *   clusterId,
 *   transport,
 *   dataDir,
 *   tickMs: 10,
 *   apply: (entry) => entry.data.length,
 *   onSoftState: (state) => state.role === "leader" && resolve(),
 * });
 * transport.start();
 * await leading;
 * assert.equal(await node.propose("hello"), 5); // once committed
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 */
export class RaftNode<R = unknown> {
  readonly #options: RaftNodeOptions<R>;
  readonly #driver: RaftDriver<R>;
  readonly #wal: Wal;
  readonly #storage: NodeStorage;
  readonly #network: ReturnType<typeof answersFirst>;
  readonly #lock: DirLock;
  readonly #transport: RaftTransport;
  readonly #ticker: ReturnType<typeof setInterval>;
  #stopped = false;
  #failure: unknown = null;
  /** What the start recovered from disk. */
  readonly recovery: RaftRecovery;

  private constructor(
    options: RaftNodeOptions<R>,
    core: RaftCore,
    wal: Wal,
    snapshots: SnapshotStore,
    lock: DirLock,
    recovery: RaftRecovery,
  ) {
    this.recovery = recovery;
    this.#options = options;
    this.#wal = wal;
    this.#lock = lock;
    this.#transport = options.transport;
    const onSnapshot = options.onSnapshot?.bind(options);
    const policy = options.snapshot;
    /** How long the latest `take()` of this node's policy took, ms. */
    let takeMs = 0;
    this.#storage = nodeStorage(
      wal,
      snapshots,
      onSnapshot === undefined ? undefined : (saved) =>
        onSnapshot({
          source: saved.received ? "installed" : "taken",
          index: saved.index,
          bytes: saved.bytes,
          ms: saved.ms + (saved.received ? 0 : takeMs),
        }),
    );
    this.#network = answersFirst(options.transport);
    const tickMs = options.tickMs ?? 100;
    this.#driver = new RaftDriver({
      core,
      storage: this.#storage,
      network: this.#network,
      clock: realClock,
      apply: options.apply,
      restore: options.restore,
      snapshot: policy === undefined || onSnapshot === undefined ? policy : {
        ...policy,
        take: () => {
          const started = performance.now();
          const data = policy.take();
          takeMs = performance.now() - started;
          return data;
        },
      },
      onSoftState: options.onSoftState,
      onConfiguration: (configuration) => {
        this.#followMembers(configuration);
        options.onConfiguration?.(configuration);
      },
      onFatal: (error) => this.#fail(error),
      // Two election timeouts; the core abandons a transfer after one.
      transferTimeoutMs: 2 * (options.electionTicks ?? 10) * tickMs,
    });
    this.#followMembers(core.configuration);
    this.#transport.onConnectionLost?.((id) =>
      this.#driver.peerConnectionLost(id)
    );
    this.#ticker = setInterval(() => this.#driver.tick(), tickMs);
  }

  /** Hands the members' peer URLs to the transport (see {@link peerUrlsOf}). */
  #followMembers(configuration: Configuration): void {
    // A joining node that has not learnt a configuration yet keeps the
    // members it was told of: the leader's appends come from one of them.
    this.#transport.updateMembers?.(
      configuration.voters.length === 0
        ? { ...this.#options.peers }
        : peerUrlsOf(configuration, this.#options.peers),
    );
  }

  /**
   * Opens (or creates) the data folder, reloads the persisted term, vote
   * and log, and starts ticking.
   *
   * @throws {Error} when `id` is not in `peers`, when the log is corrupt
   * (see `WalCorruptError`), when the newest snapshot file is corrupt (see
   * `SnapshotCorruptError`), when the log starts after the newest snapshot
   * (snapshot files are missing), or when the folder holds a snapshot and
   * no `restore` was given.
   * @throws {import("./data_dir.ts").DataDirMismatchError} when the folder
   * belongs to another member id or cluster.
   * @throws {DataDirInUseError} when another process or node holds the
   * folder's lock.
   * On any of these the transport is closed.
   */
  static async start<R>(options: RaftNodeOptions<R>): Promise<RaftNode<R>> {
    try {
      return await RaftNode.#open(options);
    } catch (error) {
      options.transport.close();
      throw error;
    }
  }

  static async #open<R>(options: RaftNodeOptions<R>): Promise<RaftNode<R>> {
    if (options.join && options.clusterId === undefined) {
      throw new Error(
        "a node that joins a cluster needs the cluster's id (clusterId); ask a member for it",
      );
    }
    if (!options.join && !(options.id in options.peers)) {
      throw new Error(
        `node id "${options.id}" is not among the peers (${
          Object.keys(options.peers).join(", ")
        }); list every voter, this node included`,
      );
    }
    const dataDir = await DataDir.open(
      options.dataDir,
      options.join ? { memberId: options.id, clusterId: options.clusterId } : {
        memberId: options.id,
        members: options.peers,
        clusterToken: options.clusterToken,
      },
    );
    try {
      const snapshots = await SnapshotStore.open(dataDir.snapDir);
      const stored = await snapshots.latest();
      const { wal, hardState, entries, snapshot: marker, repairedBytes } =
        await Wal.open(
          dataDir.walDir,
          { ...options.walOptions, legacyFile: dataDir.legacyWalFile },
        );
      let start: ReturnType<typeof startFromSnapshot>;
      try {
        start = startFromSnapshot(stored, marker, entries, dataDir.walDir);
        if (start !== null) {
          if (options.restore === undefined) {
            throw new Error(
              `the data folder holds a snapshot (${stored!.path}, index ${
                stored!.index
              }), ` +
                "but no restore() was given to load it into the state machine; pass RaftNodeOptions.restore",
            );
          }
          options.restore(start.snapshot);
          if (start.markLog) {
            // The snapshot was saved but the crash came before the log was
            // marked (an install from the leader): mark it now, so appends
            // continue at the snapshot's index + 1.
            const { index, term } = start.snapshot;
            await wal.compact({ index, term }, { discardAfter: true });
          }
        }
      } catch (error) {
        await wal.close();
        throw error;
      }
      const core = new RaftCore({
        id: options.id,
        voters: [],
        // The bootstrap configuration, with the voters' URLs; the log's
        // latest config entry replaces it (§4.1). A joining node has none.
        configuration: options.join ? makeConfiguration([]) : makeConfiguration(
          Object.keys(options.peers),
          [],
          { peerUrls: options.peers },
        ),
        join: options.join,
        electionTicks: options.electionTicks,
        heartbeatTicks: options.heartbeatTicks,
        preVote: options.preVote,
        checkSnapshot: options.checkSnapshot?.bind(options),
        hardState,
        entries: start?.entries ?? entries,
        ...(start !== null && {
          snapshot: start.snapshot,
          configuration: start.snapshot.configuration,
        }),
      });
      return new RaftNode(options, core, wal, snapshots, dataDir, {
        walDir: dataDir.walDir,
        lastIndex: wal.lastIndex,
        snapshotIndex: wal.snapshot?.index ?? 0,
        repairedBytes,
      });
    } catch (error) {
      dataDir.release();
      throw error;
    }
  }

  /**
   * Delivers messages from peers to the core. The caller vouches for them:
   * validated (`parseMessage`) and sent by the member their `from` names.
   */
  step(messages: readonly Message[]): void {
    this.#driver.step(messages);
  }

  /** Current term, role, leader and indexes. */
  get status(): RaftStatus {
    const core = this.#driver.core;
    const soft = core.softState;
    return {
      id: this.#options.id,
      term: soft.term,
      role: soft.role,
      leader: soft.leader,
      commitIndex: core.commitIndex,
      appliedIndex: this.#driver.appliedIndex,
      lastIndex: core.lastIndex,
      member: isMember(core.configuration, this.#options.id),
      learner: core.configuration.learners.includes(this.#options.id),
      snapshotIndex: this.#driver.snapshotIndex,
    };
  }

  /**
   * The current configuration: the latest in this node's log, committed or
   * not (Raft dissertation §4.1), with the members' URLs.
   */
  get configuration(): Configuration {
    return this.#driver.core.configuration;
  }

  /**
   * Where {@link configuration} comes from (see
   * `RaftCore.configurationPoint`): the index and term of its config
   * entry, or the snapshot point when that entry is compacted.
   */
  get configurationPoint(): SnapshotPoint {
    return this.#driver.core.configurationPoint;
  }

  /**
   * On the leader, each other member's replication progress (match and
   * next index, pacing state, learner or not); empty on other nodes. See
   * `RaftCore.progress`.
   */
  progress(): ReadonlyMap<NodeId, MemberProgress> {
    return this.#driver.core.progress();
  }

  /**
   * Proposes a single-server membership change (dissertation §4.1; learners
   * §4.2.1; removing the leader §4.2.2) and resolves with the new
   * configuration once it is committed and applied here (see
   * {@link RaftDriver.proposeConfChange}). An `addLearner` or `addVoter`
   * change should carry the node's `peerUrl` (and `clientUrl`), so every
   * member learns where it is.
   *
   * @param options.timeoutMs give up after this long (default 5000 ms); the
   * change may still commit later.
   * @throws {import("./core.ts").NotLeaderError} (at once) on a non-leader.
   * @throws {import("./configuration.ts").ConfChangeError} (at once) when
   * the change is refused: another change is not committed yet
   * (retryable), the leader has not committed an entry of its term yet
   * (retryable), or the change does not apply (unknown member, no voter
   * left, nothing changes).
   * @throws {RaftUnavailableError} as for {@link propose}.
   */
  proposeConfChange(
    change: ConfChange,
    options: { timeoutMs?: number } = {},
  ): Promise<Configuration> {
    return this.#driver.proposeConfChange(change, options);
  }

  /**
   * Replicates `data` and resolves with the state machine's result once the
   * entry is committed and applied on this node (see
   * {@link RaftDriver.propose}).
   *
   * @param options.timeoutMs give up after this long (default 5000 ms); the
   * entry may still commit later.
   * @throws {import("./core.ts").NotLeaderError} (rejects at once) when this node is not the
   * leader.
   * @throws {RaftUnavailableError} at once when this node loses leadership
   * before the entry committed (it may still commit: retry if the write is
   * idempotent); when a new leader's entry replaced it, the timeout passed,
   * or the node stopped.
   */
  propose(data: string, options: { timeoutMs?: number } = {}): Promise<R> {
    const proposed = this.#driver.propose(data, options);
    const observe = this.#options.onProposal;
    if (observe !== undefined) {
      const started = performance.now();
      proposed.then(
        () => observe("applied", performance.now() - started),
        () => observe("failed", performance.now() - started),
      );
    }
    return proposed;
  }

  /**
   * Hands leadership to another voter (Raft dissertation §3.10, see
   * {@link RaftCore.transferLeadership}) and waits until another node
   * leads. Meanwhile proposals on this node fail at once with
   * `LeadershipTransferError` (a `NotLeaderError`, retryable). Used before a
   * graceful stop, so the cluster does not wait an election timeout for a
   * new leader.
   *
   * @param options.target the voter to hand over to; default the most up
   * to date.
   * @param options.timeoutMs give up after this long (default two election
   * timeouts: 2 × electionTicks × tickMs). The core itself abandons the
   * transfer after one election timeout and leads on.
   * @returns the new leader's id.
   * @throws {import("./core.ts").NotLeaderError} (rejects at once) when this
   * node is not the leader.
   * @throws {RangeError} (rejects at once) when `target` is not a voter or
   * there is no other voter.
   * @throws {RaftUnavailableError} when no other node took over in time, or
   * the node stopped.
   */
  transferLeadership(
    options: { target?: NodeId; timeoutMs?: number } = {},
  ): Promise<NodeId> {
    return this.#driver.transferLeadership(options);
  }

  /**
   * Waits until this node's state machine reflects every write committed
   * before the call (a linearizable read barrier: ReadIndex, Raft
   * dissertation §6.4). The leader confirms the read index; while no leader
   * is known the barrier waits for one, and when the leader changes it asks
   * the new one, all within `timeoutMs`.
   *
   * @param options.timeoutMs give up after this long (default 2000 ms).
   * @throws {RaftUnavailableError} when no leader confirmed in time, or the
   * node stopped.
   */
  async readBarrier(options: { timeoutMs?: number } = {}): Promise<void> {
    await this.#driver.readIndex(options);
  }

  /**
   * Stops ticking, closes peer connections and the log, and rejects pending
   * proposals and reads. Safe to call twice.
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#ticker);
    this.#network.close();
    this.#transport.close();
    await this.#driver.stop();
    try {
      await this.#storage.flush().catch(() => {});
      await this.#wal.close();
    } finally {
      this.#lock.release();
    }
  }

  /**
   * What stopped this node on its own (a storage failure, or a safety
   * violation such as `CommittedEntryConflictError`), or null while it
   * runs or after a plain {@link stop}.
   */
  get failure(): unknown {
    return this.#failure;
  }

  /**
   * Counters of the Raft messages the core dropped as impossible or not
   * for it ({@link RaftCoreStats}, a copy), for status and metrics.
   */
  get stats(): RaftCoreStats {
    return this.#driver.core.stats;
  }

  #fail(error: unknown): void {
    this.#failure ??= error;
    const onFatal = this.#options.onFatal ??
      ((e: unknown) => console.error("raft: node stopped:", e));
    this.stop().catch(() => {}).finally(() => onFatal(error));
  }
}

/**
 * Every member's peer URL: the configuration's own, else the one in
 * `known` (the bootstrap `peers`); members with neither are left out.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { makeConfiguration } from "./configuration.ts";
 * import { peerUrlsOf } from "./node.ts";
 * const config = makeConfiguration(["n1", "n2"], ["n3"], { peerUrls: { n3: "tcp://h:3" } });
 * assert.deepEqual(peerUrlsOf(config, { n1: "tcp://h:1" }), { n1: "tcp://h:1", n3: "tcp://h:3" });
 * ```
 */
export function peerUrlsOf(
  configuration: Configuration,
  known: Readonly<Record<NodeId, string>> = {},
): Record<NodeId, string> {
  const peers: Record<NodeId, string> = {};
  for (const id of membersOf(configuration)) {
    const url = configuration.peerUrls?.[id] ?? known[id];
    if (url !== undefined) peers[id] = url;
  }
  return peers;
}

/**
 * What a restart starts from (Raft paper §7): the newest snapshot (with the
 * configuration in its meta) and the log entries after it, or null without
 * a snapshot. Entries after the snapshot are dropped when the log's entry
 * at the snapshot's index has another term (an install that crashed before
 * its log was marked; receiver rule 7); `markLog` then says the log must
 * be marked as starting after the snapshot, as it does when the log ends
 * before the snapshot's index.
 *
 * @throws {Error} when the log starts after the newest snapshot, or a
 * snapshot's meta holds no configuration.
 */
function startFromSnapshot(
  stored: StoredSnapshot | null,
  marker: WalSnapshotMarker | null,
  entries: Entry[],
  walDir: string,
): { snapshot: Snapshot; entries: Entry[]; markLog: boolean } | null {
  if (marker !== null && marker.index > (stored?.index ?? 0)) {
    throw new Error(
      `the write-ahead log in ${walDir} starts after index ${marker.index}, but ${
        stored === null
          ? "there is no snapshot file"
          : `the newest snapshot file (${stored.path}) is at index ${stored.index}`
      }: snapshot files are missing and the state up to ${marker.index} is lost. ` +
        "Restore the snapshot folder from a backup, or move the data folder aside, wait until the other nodes have a leader, " +
        "then restart this node empty so it catches up from the leader",
    );
  }
  if (stored === null) return null;
  const configuration = (stored.meta as { configuration?: Configuration })
    ?.configuration;
  if (
    typeof configuration !== "object" || configuration === null ||
    !Array.isArray(configuration.voters) ||
    !Array.isArray(configuration.learners)
  ) {
    throw new Error(
      `snapshot file ${stored.path} has no configuration in its meta (written by an incompatible version?); ` +
        "move the data folder aside and restart this node empty so it catches up from the leader",
    );
  }
  const at = entries.find((e) => e.index === stored.index);
  const conflict = at !== undefined && at.term !== stored.term;
  const logEnd = entries.at(-1)?.index ?? marker?.index ?? 0;
  return {
    snapshot: {
      index: stored.index,
      term: stored.term,
      data: stored.data,
      configuration,
    },
    entries: conflict ? [] : entries.filter((e) => e.index > stored.index),
    markLog: conflict || logEnd < stored.index,
  };
}
