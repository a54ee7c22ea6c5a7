/**
 * The Raft driver: runs a {@link RaftCore} with real time, durable storage
 * and a network. It ticks the core on a timer, persists each Ready to the
 * write-ahead log with fsync before sending the messages that depend on it,
 * applies committed entries to the caller's state machine, and resolves
 * proposals and linearizable reads.
 *
 * @module
 */

import { DataDir } from "./data_dir.ts";
import type { DirLock } from "./dir_lock.ts";
import { RaftCore, type Ready, type SoftState } from "./core.ts";
import type { Entry, Message, NodeId } from "./types.ts";
import { Wal, type WalOptions } from "./wal.ts";

/**
 * Where a {@link RaftNode} sends its messages: a `PeerTransport` (the
 * authenticated peer connections), or a test double.
 */
export interface RaftTransport {
  /** Queues messages for their `to`; never blocks, may drop. */
  send(messages: readonly Message[]): void;
  /** Closes the connections; later sends are dropped. */
  close(): void;
}

/** Settings of a {@link RaftNode}. */
export interface RaftNodeOptions<R> {
  /** This node's id; a key of `peers`. */
  id: NodeId;
  /**
   * Every voter's id → its peer URL (`tcp://host:port` of its peer port),
   * this node included. The keys are the voters.
   */
  peers: Readonly<Record<NodeId, string>>;
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
   * process lifetime (after a restart the log is applied again from index
   * 1). Entries whose `data` is "" are the leaders' empty entries.
   */
  apply(entry: Entry): R;
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
   * Called when storage fails; the node has stopped itself, since it can no
   * longer promise durability. Default: log to stderr.
   */
  onFatal?(error: unknown): void;
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
}

/** Thrown when a proposal or read cannot complete; the caller may retry. */
export class RaftUnavailableError extends Error {
  /**
   * Makes the error.
   *
   * @param message what failed and what to do.
   */
  constructor(message: string) {
    super(message);
    this.name = "RaftUnavailableError";
  }
}

interface PendingProposal<R> {
  term: number;
  resolve(result: R): void;
  reject(error: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

interface PendingRead {
  index: number | null;
  /** Term and leader the read was last sent to; null while none is known. */
  term: number;
  leader: NodeId | null;
  resolve(): void;
  reject(error: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * A running Raft node. It sends through its `transport`; deliver the
 * messages peers send it with {@link RaftNode.step} (the peer server does,
 * once a peer has authenticated).
 *
 * @example
 * ```ts ignore
 * import { ClusterKey } from "./peer_auth.ts";
 * import { servePeers } from "./peer_server.ts";
 * import { PeerTransport } from "./peer_transport.ts";
 * import { RaftNode } from "./node.ts";
 * const peers = { n1: "tcp://127.0.0.1:7101" };
 * const key = await ClusterKey.random();
 * const transport = new PeerTransport({ id: "n1", peers, key });
 * const node = await RaftNode.start({
 *   id: "n1",
 *   peers,
 *   transport,
 *   dataDir: "./data/n1",
 *   apply: (entry) => entry.data.length,
 * });
 * const server = servePeers({
 *   port: 7101, id: "n1", key, directory: transport.directory,
 *   onStep: (messages) => node.step(messages),
 * });
 * transport.start();
 * console.log(await node.propose("hello")); // 5, once committed
 * await server.close();
 * await node.stop();
 * ```
 */
export class RaftNode<R = unknown> {
  readonly #options: RaftNodeOptions<R>;
  readonly #core: RaftCore;
  readonly #wal: Wal;
  readonly #lock: DirLock;
  readonly #transport: RaftTransport;
  readonly #ticker: ReturnType<typeof setInterval>;
  readonly #proposals = new Map<number, PendingProposal<R>>();
  readonly #reads = new Map<string, PendingRead>();
  /** Leadership transfers waiting for another node to lead. */
  readonly #transfers = new Set<{
    check(state: SoftState): void;
    fail(error: Error): void;
  }>();
  #readSequence = 0;
  #applied = 0;
  #draining = false;
  #again = false;
  #stopped = false;

  private constructor(
    options: RaftNodeOptions<R>,
    core: RaftCore,
    wal: Wal,
    lock: DirLock,
  ) {
    this.#options = options;
    this.#core = core;
    this.#wal = wal;
    this.#lock = lock;
    this.#transport = options.transport;
    this.#ticker = setInterval(() => {
      this.#core.tick();
      this.#schedule();
    }, options.tickMs ?? 100);
    this.#schedule();
  }

  /**
   * Opens (or creates) the data folder, reloads the persisted term, vote
   * and log, and starts ticking.
   *
   * @throws {Error} when `id` is not in `peers`, or when the log is corrupt
   * (see `WalCorruptError`).
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
    if (!(options.id in options.peers)) {
      throw new Error(
        `node id "${options.id}" is not among the peers (${
          Object.keys(options.peers).join(", ")
        }); list every voter, this node included`,
      );
    }
    const dataDir = await DataDir.open(options.dataDir, {
      memberId: options.id,
      members: options.peers,
      clusterToken: options.clusterToken,
    });
    try {
      const { wal, hardState, entries, snapshot } = await Wal.open(
        dataDir.walDir,
        { ...options.walOptions, legacyFile: dataDir.legacyWalFile },
      );
      if (snapshot !== null) {
        await wal.close();
        throw new Error(
          `the write-ahead log in ${dataDir.walDir} starts after a snapshot (index ${snapshot.index}), ` +
            `but snapshots are not supported by this driver yet; run a version that supports them`,
        );
      }
      const core = new RaftCore({
        id: options.id,
        voters: Object.keys(options.peers),
        electionTicks: options.electionTicks,
        heartbeatTicks: options.heartbeatTicks,
        preVote: options.preVote,
        hardState,
        entries,
      });
      return new RaftNode(options, core, wal, dataDir);
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
    if (this.#stopped) return;
    for (const message of messages) this.#core.step(message);
    this.#schedule();
  }

  /** Current term, role, leader and indexes. */
  get status(): RaftStatus {
    const soft = this.#core.softState;
    return {
      id: this.#options.id,
      term: soft.term,
      role: soft.role,
      leader: soft.leader,
      commitIndex: this.#core.commitIndex,
      appliedIndex: this.#applied,
      lastIndex: this.#core.lastIndex,
    };
  }

  /**
   * Replicates `data` and resolves with the state machine's result once the
   * entry is committed and applied on this node.
   *
   * @param options.timeoutMs give up after this long (default 5000 ms); the
   * entry may still commit later.
   * @throws {import("./core.ts").NotLeaderError} (rejects at once) when this node is not the
   * leader.
   * @throws {RaftUnavailableError} when leadership was lost before the entry
   * committed, the timeout passed, or the node stopped.
   */
  propose(data: string, options: { timeoutMs?: number } = {}): Promise<R> {
    if (this.#stopped) {
      return Promise.reject(new RaftUnavailableError("the Raft node stopped"));
    }
    let index: number, term: number;
    try {
      ({ index, term } = this.#core.propose(data));
    } catch (error) {
      return Promise.reject(error);
    }
    this.#schedule();
    const timeoutMs = options.timeoutMs ?? 5000;
    return new Promise<R>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#proposals.delete(index);
        reject(
          new RaftUnavailableError(
            `proposal at index ${index} not committed within ${timeoutMs} ms; it may still commit, retry if the write is idempotent`,
          ),
        );
      }, timeoutMs);
      this.#proposals.set(index, { term, resolve, reject, timer });
    });
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
    if (this.#stopped) {
      return Promise.reject(new RaftUnavailableError("the Raft node stopped"));
    }
    let target: NodeId;
    try {
      target = this.#core.transferLeadership(options.target);
    } catch (error) {
      return Promise.reject(error);
    }
    if (target === this.#options.id) return Promise.resolve(target);
    this.#schedule();
    const timeoutMs = options.timeoutMs ??
      2 * (this.#options.electionTicks ?? 10) * (this.#options.tickMs ?? 100);
    return new Promise<NodeId>((resolve, reject) => {
      const waiter = {
        check: (state: SoftState) => {
          if (state.leader === null || state.leader === this.#options.id) {
            return;
          }
          this.#transfers.delete(waiter);
          clearTimeout(timer);
          resolve(state.leader);
        },
        fail: (error: Error) => {
          this.#transfers.delete(waiter);
          clearTimeout(timer);
          reject(error);
        },
      };
      const timer = setTimeout(() =>
        waiter.fail(
          new RaftUnavailableError(
            `no other node took over leadership (to ${target}) within ${timeoutMs} ms`,
          ),
        ), timeoutMs);
      this.#transfers.add(waiter);
    });
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
  readBarrier(options: { timeoutMs?: number } = {}): Promise<void> {
    if (this.#stopped) {
      return Promise.reject(new RaftUnavailableError("the Raft node stopped"));
    }
    const context = `${this.#options.id}:${++this.#readSequence}`;
    const timeoutMs = options.timeoutMs ?? 2000;
    const promise = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const read = this.#reads.get(context);
        this.#reads.delete(context);
        reject(
          new RaftUnavailableError(
            read?.leader === null
              ? `no leader was elected within ${timeoutMs} ms to confirm the read; retry`
              : `the leader did not confirm the read within ${timeoutMs} ms; retry`,
          ),
        );
      }, timeoutMs);
      this.#reads.set(context, {
        index: null,
        term: -1,
        leader: null,
        resolve,
        reject,
        timer,
      });
    });
    this.#askReadIndex(context);
    return promise;
  }

  /** Sends a pending read to the current leader, if one is known. */
  #askReadIndex(context: string): void {
    const read = this.#reads.get(context);
    const { term, leader } = this.#core.softState;
    if (read === undefined || read.index !== null || leader === null) return;
    read.term = term;
    read.leader = leader;
    this.#core.readIndex(context);
    this.#schedule();
  }

  /**
   * Stops ticking, closes peer connections and the log, and rejects pending
   * proposals and reads. Safe to call twice.
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#ticker);
    this.#transport.close();
    const error = new RaftUnavailableError("the Raft node stopped");
    for (const proposal of this.#proposals.values()) {
      clearTimeout(proposal.timer);
      proposal.reject(error);
    }
    this.#proposals.clear();
    for (const read of this.#reads.values()) {
      clearTimeout(read.timer);
      read.reject(error);
    }
    this.#reads.clear();
    for (const transfer of [...this.#transfers]) transfer.fail(error);
    while (this.#draining) await new Promise((r) => setTimeout(r, 1));
    try {
      await this.#wal.close();
    } finally {
      this.#lock.release();
    }
  }

  #schedule(): void {
    if (this.#draining) {
      this.#again = true;
      return;
    }
    this.#draining = true;
    queueMicrotask(() => this.#drain());
  }

  async #drain(): Promise<void> {
    try {
      do {
        this.#again = false;
        while (!this.#stopped && this.#core.hasReady()) {
          await this.#handle(this.#core.ready());
        }
      } while (this.#again && !this.#stopped);
    } catch (error) {
      this.#draining = false;
      this.#fail(error);
      return;
    }
    this.#draining = false;
  }

  /** Persist → send → apply → serve reads → advance (the Ready contract). */
  async #handle(ready: Ready): Promise<void> {
    if (ready.snapshot !== null) {
      // No RaftNode compacts its log yet, so no leader sends snapshots.
      throw new Error(
        `received a snapshot at index ${ready.snapshot.index}, which this driver cannot install yet`,
      );
    }
    if (ready.hardState !== null || ready.entries.length > 0) {
      await this.#wal.append({
        hardState: ready.hardState ?? undefined,
        entries: ready.entries,
      });
    }
    if (this.#stopped) return;
    // leaderMessages may go before the fsync (dissertation §10.2.1); for
    // now they go with the rest.
    this.#transport.send([...ready.leaderMessages, ...ready.messages]);
    for (const entry of ready.committedEntries) this.#apply(entry);
    for (const state of ready.readStates) {
      const read = this.#reads.get(state.context);
      if (read !== undefined) read.index ??= state.index;
    }
    this.#serveReads();
    if (ready.softState !== null) this.#onSoftState(ready.softState);
    this.#core.advance(ready);
  }

  #apply(entry: Entry): void {
    const result = this.#options.apply(entry);
    this.#applied = entry.index;
    const proposal = this.#proposals.get(entry.index);
    if (proposal === undefined) return;
    this.#proposals.delete(entry.index);
    clearTimeout(proposal.timer);
    if (proposal.term === entry.term) {
      proposal.resolve(result);
    } else {
      proposal.reject(
        new RaftUnavailableError(
          `proposal at index ${entry.index} was replaced by a new leader's entry; retry`,
        ),
      );
    }
  }

  #serveReads(): void {
    for (const [context, read] of this.#reads) {
      if (read.index !== null && read.index <= this.#applied) {
        this.#reads.delete(context);
        clearTimeout(read.timer);
        read.resolve();
      }
    }
  }

  #onSoftState(state: SoftState): void {
    // Reads waiting for a leader's confirmation go to the new leader: the
    // old one (or the core, on a change of role) dropped them. An answer the
    // old leader still sends is valid too: it confirmed its leadership after
    // the read began.
    for (const [context, read] of this.#reads) {
      if (
        read.index === null &&
        (read.term !== state.term || read.leader !== state.leader)
      ) {
        read.leader = null;
        this.#askReadIndex(context);
      }
    }
    for (const transfer of [...this.#transfers]) transfer.check(state);
    this.#options.onSoftState?.(state);
  }

  #fail(error: unknown): void {
    const onFatal = this.#options.onFatal ??
      ((e: unknown) => console.error("raft: storage failed, node stopped:", e));
    this.stop().catch(() => {}).finally(() => onFatal(error));
  }
}
