/**
 * The pure Raft consensus core: a deterministic state machine with no I/O
 * and no timers, modelled on etcd's raft library. The caller (a driver, or a
 * simulation) feeds it `tick()`, `step(message)` and `propose(data)`, then
 * takes a {@link Ready} batch of work, performs it in order (persist, send,
 * apply) and calls `advance(ready)`.
 *
 * Implements leader election and log replication (Raft paper §5), the
 * new-leader empty entry (§8), PreVote (Raft dissertation §9.6), CheckQuorum
 * with lease-based vote ignoring (dissertation §4.2.3 and §6.2), ReadIndex
 * reads (dissertation §6.4), leadership transfer (dissertation §3.10),
 * fast conflict backtracking (Raft paper §5.3), per-follower flow control
 * (etcd's probe / replicate / snapshot states), the leader writing its own
 * log in parallel with replicating it (dissertation §10.2.1), log
 * compaction with chunked InstallSnapshot (Raft paper §7, dissertation §5),
 * and single-server membership changes with learners (dissertation §4.1,
 * §4.2; see `configuration.ts`).
 *
 * @module
 */

import {
  applyConfChange,
  type ConfChange,
  ConfChangeError,
  configEntries,
  type ConfigEntry,
  type Configuration,
  encodeConfiguration,
  isMember,
  isVoter,
  makeConfiguration,
  membersOf,
  quorumSize,
  sameConfiguration,
} from "./configuration.ts";
import { MISSING_TERM, RaftLog } from "./log.ts";
import { Progress, type ProgressState } from "./progress.ts";
import type {
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

/** Settings of one core. */
export interface RaftCoreConfig {
  /**
   * This node's id; must be one of `voters` or `learners`, unless `join` or
   * `configuration` is given.
   */
  id: NodeId;
  /**
   * Ids of the voting members a new cluster starts with (bootstrap), this
   * node included. Empty for a node started with `join`. Config entries in
   * the log (Raft dissertation §4.1) take precedence.
   */
  voters: readonly NodeId[];
  /** Ids of the learners (non-voting members) at bootstrap. Default none. */
  learners?: readonly NodeId[];
  /**
   * The configuration in force just before the first of `entries`: the one
   * recorded with the snapshot the log starts after. Replaces `voters` and
   * `learners`. Do not pass one taken from `entries`: the core reads config
   * entries from the log itself, and must be able to fall back past them
   * when a conflicting suffix is truncated. Default `voters` and `learners`.
   */
  configuration?: Configuration;
  /**
   * This node is not a member yet and waits to be added to an existing
   * cluster (as a learner, dissertation §4.2.1): `voters` may be empty and
   * need not name it. Until the configuration it learns from the leader's
   * appends makes it a voter it never stands for election, and while it is
   * in no configuration at all it accepts appends from a leader of any
   * term. Default false.
   */
  join?: boolean;
  /**
   * Ticks without word from a leader before a follower stands for election;
   * each election timeout is drawn from [electionTicks, 2 * electionTicks).
   * Default 10.
   */
  electionTicks?: number;
  /** Ticks between a leader's heartbeats; must be < electionTicks. Default 1. */
  heartbeatTicks?: number;
  /** Uniform random numbers in [0, 1) for election timeouts. Default Math.random. */
  random?: () => number;
  /** Persisted term, vote and commit index from a previous run. */
  hardState?: HardState;
  /**
   * Persisted log from a previous run, contiguous, from index 1 or (with
   * `snapshot`) from `snapshot.index + 1`; entries at or below the
   * snapshot's index are ignored.
   */
  entries?: readonly Entry[];
  /**
   * The persisted snapshot's point (Raft paper §7), if the log was
   * compacted: the log starts after it, and the commit index and applied
   * cursor start at it (the driver restores the state machine from the
   * snapshot before it feeds the core). Give `data` too so this node, as
   * leader, can send the snapshot to followers that need it; without it,
   * such a follower waits until {@link RaftCore.snapshotTaken} hands one.
   */
  snapshot?: SnapshotPoint & { data?: string };
  /** Most entries in one append message. Default 64. */
  maxEntriesPerAppend?: number;
  /**
   * Most unanswered appends per follower while pipelining (replicate
   * state). Default 64.
   */
  maxInflightAppends?: number;
  /**
   * Most entry data (sum of `data.length`, UTF-16 code units) in unanswered
   * appends per follower while pipelining; one append may exceed it when a
   * single entry is larger. Default 4 MiB (4,194,304).
   */
  maxInflightBytes?: number;
  /**
   * Size of one InstallSnapshot chunk, in UTF-16 code units of the
   * snapshot's data (dissertation §5.3). Default 256 Ki (262,144).
   */
  snapshotChunkChars?: number;
  /**
   * Largest snapshot a follower assembles from chunks, in UTF-16 code
   * units; a bigger one is refused (counted in
   * `stats.anomalies.snapshotTooLarge`). Default 256 Mi (268,435,456).
   */
  maxSnapshotChars?: number;
  /**
   * Checks a snapshot a follower assembled from InstallSnapshot chunks
   * before it takes it (the state machine's own reader, dry): returns why
   * the data cannot be read, or null. A refused snapshot is answered as a
   * failed chunk and counted in `stats.anomalies.snapshotUnreadable`, and
   * nothing of it is kept, so a broken or forged snapshot never reaches
   * storage or `restore`. Default: every snapshot is taken.
   */
  checkSnapshot?: (data: string) => string | null;
  /**
   * Leader steps down when it has not heard from a quorum within an election
   * timeout, and nodes that heard from a leader within the minimum election
   * timeout ignore vote requests. Default true.
   */
  checkQuorum?: boolean;
  /**
   * PreVote (Raft dissertation §9.6): a follower whose election timeout
   * fires first asks the voters whether they would vote for it in the next
   * term, without raising its own term, and stands for election only when
   * a quorum would. A voter says yes only when the asker's log is at least
   * as up to date as its own and it has not heard from a leader within the
   * last (minimum) election timeout. So a node that was cut off and comes
   * back neither raises the cluster's term nor deposes a healthy leader.
   * Default true.
   */
  preVote?: boolean;
}

/** Volatile facts a driver reports (who leads, which role this node has). */
export interface SoftState {
  /** Current term. */
  term: number;
  /** This node's role in `term`. */
  role: Role;
  /** Leader of `term` as far as this node knows, or null. */
  leader: NodeId | null;
  /**
   * Present (true) while this follower asks for pre-votes before an
   * election (Raft dissertation §9.6); absent otherwise.
   */
  preCandidate?: true;
}

/** A read that may be served once the state machine has applied `index`. */
export interface ReadState {
  /** The token passed to {@link RaftCore.readIndex}. */
  context: string;
  /** Serve the read once the state machine has applied this index. */
  index: number;
}

/**
 * A batch of work. The driver performs it in this order:
 *
 * 1. Send `leaderMessages` at any time from now on: before, during or
 *    after persisting (a leader writes its own log in parallel with
 *    replicating it, Raft dissertation §10.2.1; the core counts the
 *    leader's own copy toward the commit quorum only once `advance()` says
 *    it is durable).
 * 2. Persist, durably (fsync), in this order: `snapshot` (then drop the
 *    persisted log up to `snapshot.index`, and the entries after it too
 *    unless the persisted entry at `snapshot.index` has `snapshot.term`),
 *    `entries`, `hardState`.
 * 3. Send `messages` (they may promise what step 2 made durable: votes,
 *    append and snapshot acknowledgements).
 * 4. Restore the state machine from `snapshot`, if any; then apply
 *    `committedEntries`, then serve `readStates`.
 * 5. Call `advance(ready)`.
 */
export interface Ready {
  /** Changed term/vote/commit to persist, or null when unchanged. */
  hardState: HardState | null;
  /**
   * Entries to persist. If the first index is <= the last persisted index,
   * the persisted log from that index on is replaced (a conflict, §5.3).
   */
  entries: Entry[];
  /**
   * A snapshot received from the leader (InstallSnapshot, Raft paper §7),
   * or null: persist it before `entries`, and restore the state machine
   * from it before applying `committedEntries` (which then start at
   * `snapshot.index + 1`).
   */
  snapshot: Snapshot | null;
  /**
   * What this node sent as leader (appends, heartbeats, InstallSnapshot
   * chunks, timeoutNow): may be sent before `hardState` and `entries` are
   * durable (dissertation §10.2.1).
   */
  leaderMessages: Message[];
  /** Every other message: send once `snapshot`, `entries` and `hardState` are durable. */
  messages: Message[];
  /** Committed entries to apply to the state machine, in log order. */
  committedEntries: Entry[];
  /** ReadIndex answers: serve each once `index` has been applied. */
  readStates: ReadState[];
  /** New term/role/leader, or null when unchanged since the last Ready. */
  softState: SoftState | null;
  /**
   * The current configuration (the latest in the log, committed or not,
   * dissertation §4.1) when it changed since the last Ready, else null: the
   * driver opens connections to new members and closes those to removed ones.
   */
  configuration: Configuration | null;
}

/** What a leader knows of one other member's log ({@link RaftCore.progress}). */
export interface MemberProgress {
  /** Highest index known to match the leader's log. */
  match: number;
  /** Next index the leader will send. */
  next: number;
  /** Pacing state: "probe" or "replicate". */
  state: string;
  /** Whether the member is a learner (true) or a voter (false). */
  learner: boolean;
}

/**
 * Thrown by {@link RaftCore.propose} on a node that is not the leader.
 * `leader` names the leader this node knows of, or is null during an
 * election.
 */
export class NotLeaderError extends Error {
  /** The current leader's id, if known. */
  readonly leader: NodeId | null;

  /**
   * Makes the error; its message names the leader, if known.
   *
   * @param leader the leader's id, or null when unknown.
   */
  constructor(leader: NodeId | null) {
    super(
      leader === null
        ? "not the leader, and no leader is known yet (election in progress)"
        : `not the leader; the leader is ${leader}`,
    );
    this.name = "NotLeaderError";
    this.leader = leader;
  }
}

/**
 * Thrown by {@link RaftCore.propose} on a leader that is handing leadership
 * over ({@link RaftCore.transferLeadership}): retry shortly, at `leader`
 * (the transfer's target, the likely next leader).
 */
export class LeadershipTransferError extends NotLeaderError {
  /**
   * Makes the error; its message names the transfer's target.
   *
   * @param target the node leadership is being handed to.
   */
  constructor(target: NodeId) {
    super(target);
    this.message =
      `leadership is being transferred to ${target}; retry there shortly`;
    this.name = "LeadershipTransferError";
  }
}

/**
 * A leader's append or snapshot contradicts an entry this node has
 * committed: another term at a committed index. Committed entries never
 * change in a correct cluster (Raft paper §5.4: Leader Completeness and
 * State Machine Safety), so either this node's data is corrupt or the
 * sender is not to be trusted (a faulty or forged member). The core stops
 * taking messages once it threw this ({@link RaftCore.halted}); the driver
 * stops the node (`onFatal`).
 */
export class CommittedEntryConflictError extends Error {
  /** Machine-readable code: `RAFT_COMMITTED_ENTRY_CONFLICT`. */
  readonly code = "RAFT_COMMITTED_ENTRY_CONFLICT";
  /** The committed index the message contradicts. */
  readonly index: number;
  /** The term this node holds at `index`. */
  readonly localTerm: number;
  /** The term the sender claims at `index`. */
  readonly claimedTerm: number;
  /** The member that sent the message. */
  readonly from: NodeId;
  /** The term of the message. */
  readonly messageTerm: number;

  /**
   * Makes the error; its message names the index, both terms and the
   * sender, and what to do.
   */
  constructor(details: {
    self: NodeId;
    from: NodeId;
    messageTerm: number;
    index: number;
    localTerm: number;
    claimedTerm: number;
  }) {
    const { self, from, messageTerm, index, localTerm, claimedTerm } = details;
    super(
      `${RAFT_COMMITTED_ENTRY_CONFLICT}: ${self} holds committed entry ${index} ` +
        `of term ${localTerm}, but ${from} (leader of term ${messageTerm} as it claims) ` +
        `sent term ${claimedTerm} for that index. Committed entries never change ` +
        `(Raft paper §5.4), so either this node's data folder is corrupt or ` +
        `${from} is not to be trusted (a faulty or forged member). ${self} stopped ` +
        `rather than diverge: compare the data folders (or restore ${self} from a ` +
        `healthy member) and check ${from}'s credentials before restarting.`,
    );
    this.name = "CommittedEntryConflictError";
    this.index = index;
    this.localTerm = localTerm;
    this.claimedTerm = claimedTerm;
    this.from = from;
    this.messageTerm = messageTerm;
  }
}

/** The code of {@link CommittedEntryConflictError}. */
export const RAFT_COMMITTED_ENTRY_CONFLICT = "RAFT_COMMITTED_ENTRY_CONFLICT";

/**
 * Counters of messages the core dropped or found impossible, for the driver
 * to log or export (issue: defensive against bad peer messages). They only
 * grow.
 */
export interface RaftCoreStats {
  /** Messages whose `from` is not a current member (dropped). */
  droppedNotMember: number;
  /** Messages whose `to` is not this node (dropped). */
  droppedMisaddressed: number;
  /**
   * Messages of an older term (answered so the sender learns the term, not
   * acted on), and InstallSnapshot answers for a transfer no longer under
   * way.
   */
  droppedStale: number;
  /** Messages a correct cluster never sends. */
  anomalies: {
    /**
     * A follower acknowledged an index beyond this leader's last index
     * (corruption or a forged message): the claim was ignored and the
     * follower is probed again at the leader's last index, at the next
     * heartbeat.
     */
    ackBeyondLastIndex: number;
    /** A snapshot bigger than `maxSnapshotChars` was refused. */
    snapshotTooLarge: number;
    /**
     * A snapshot whose data the state machine cannot read
     * (`checkSnapshot`) was refused before it was kept.
     */
    snapshotUnreadable: number;
    /**
     * A `timeoutNow` (dissertation §3.10) that is not from the leader this
     * node follows in its own term was dropped: only that leader may hand
     * its leadership over, and a forged one would start a needless
     * election.
     */
    timeoutNowNotFromLeader: number;
    /**
     * An append, heartbeat or snapshot chunk of this node's term from a
     * member other than the term's leader as this node knows it (it heard
     * that leader, or is it): a term has at most one leader (Raft paper
     * §5.2, Election Safety), so the message is forged or broken. Dropped:
     * this node's leader, term and log stay as they were.
     */
    appendNotFromLeader: number;
    /**
     * A ReadIndex answer of this node's term from a member other than the
     * term's leader, or of a later term (a follower asks its own leader,
     * in its own term: dissertation §6.4). Dropped: no read completes.
     */
    readIndexNotFromLeader: number;
    /**
     * A granted vote, or a successful append or snapshot answer, in a term
     * later than this node's: a node grants and acknowledges only in the
     * term of the request, which was this node's or earlier (Raft paper
     * §5.1). Dropped before it can move this node's term.
     */
    successFromLaterTerm: number;
    /**
     * A vote for this candidate from a member that is not a voter of its
     * configuration (a candidate asks voters only; §5.2, §4.2.1). Dropped.
     */
    voteFromNonVoter: number;
    /** A message whose `from` is this node's own id (dropped). */
    fromSelf: number;
    /**
     * A message whose term is more than {@link MAX_TERM_STEP} past this
     * node's (dropped before it moves the term): no correct member gets
     * that far ahead, and a forged term near 2^53 would leave the cluster
     * no term to campaign in.
     */
    termJump: number;
    /**
     * A follower acknowledged a snapshot beyond its last chunk's end (it
     * can only acknowledge what it was sent, Raft paper §7): not taken as
     * installed.
     */
    snapshotAckBeyondEnd: number;
  };
}

/** What a leader knows of one follower (see {@link RaftCore.progressOf}). */
export interface ProgressView {
  /** Pacing state: probe, replicate or snapshot. */
  state: ProgressState;
  /** Highest index known to match the leader's log. */
  match: number;
  /** Next index to send. */
  next: number;
  /** Unanswered appends (replicate state). */
  inflightAppends: number;
  /** Entry data in unanswered appends, UTF-16 code units. */
  inflightBytes: number;
  /** Index of the snapshot being sent (snapshot state), else null. */
  snapshotIndex: number | null;
}

/** A snapshot a follower is assembling from InstallSnapshot chunks. */
interface IncomingSnapshot {
  from: NodeId;
  term: number;
  point: SnapshotPoint;
  chunks: string[];
  length: number;
}

interface PendingRead {
  /** Heartbeat context of the round that confirms this read. */
  round: string;
  /** The requester's token. */
  context: string;
  index: number;
  /** Node that asked: this node, or a follower that forwarded the read. */
  requester: NodeId;
  acks: Set<NodeId>;
}

/**
 * The most one message may move a node's term: 2^24 (16,777,216). A term
 * is one election, so no correct member is ever that far ahead of another
 * (with PreVote a partitioned node's term does not even grow); a message
 * beyond it is dropped and counted (`anomalies.termJump`). Without the
 * bound a single message of term 2^53 - 1 from any member holding the
 * secret (found by the peer-port fuzz) moved every node there, after
 * which no candidate could ask for a next term (2^53 is not a safe
 * integer, and refused): no leader, ever again. With it, a forger needs
 * 2^29 messages to get there.
 */
export const MAX_TERM_STEP = 2 ** 24;

/** Counters of a core that has dropped and seen nothing yet: all zero. */
export function emptyCoreStats(): RaftCoreStats {
  return {
    droppedNotMember: 0,
    droppedMisaddressed: 0,
    droppedStale: 0,
    anomalies: {
      ackBeyondLastIndex: 0,
      snapshotTooLarge: 0,
      snapshotUnreadable: 0,
      timeoutNowNotFromLeader: 0,
      appendNotFromLeader: 0,
      readIndexNotFromLeader: 0,
      successFromLaterTerm: 0,
      voteFromNonVoter: 0,
      fromSelf: 0,
      termJump: 0,
      snapshotAckBeyondEnd: 0,
    },
  };
}

/**
 * One Raft node's consensus state. Deterministic: for the same config
 * (including `random`) and the same calls it produces the same Readys.
 *
 * @example A single-node cluster elects itself and commits a proposal
 * ```ts
 * import assert from "node:assert/strict";
 * import { RaftCore } from "./core.ts";
 * const core = new RaftCore({ id: "n1", voters: ["n1"] });
 * core.campaign();
 * core.propose("hello");
 * let ready = core.ready();
 * // persist ready.entries and ready.hardState, send the messages, then:
 * core.advance(ready);
 * // Only now is the leader's own copy durable, and so the entries committed.
 * ready = core.ready();
 * assert.deepEqual(ready.committedEntries.map((e) => e.data), ["", "hello"]);
 * core.advance(ready);
 * ```
 */
export class RaftCore {
  /** This node's id. */
  readonly id: NodeId;
  /** The latest configuration in the log, or `#baseConfiguration` (§4.1). */
  #configuration: Configuration;
  /**
   * The configuration before the log's first entry (bootstrap or snapshot);
   * compaction folds the config entries it drops into it (dissertation §5.1).
   */
  #baseConfiguration: Configuration;
  /** The config entries in the log, oldest first. */
  #configEntries: ConfigEntry[] = [];
  #reportedConfiguration: Configuration;
  readonly #electionTicks: number;
  readonly #heartbeatTicks: number;
  readonly #random: () => number;
  readonly #maxEntriesPerAppend: number;
  readonly #inflightLimits: { maxAppends: number; maxBytes: number };
  readonly #snapshotChunkChars: number;
  readonly #maxSnapshotChars: number;
  readonly #checkSnapshot: ((data: string) => string | null) | undefined;
  readonly #checkQuorum: boolean;
  readonly #preVote: boolean;

  #term = 0;
  #vote: NodeId | null = null;
  #commit = 0;
  #role: Role = "follower";
  /**
   * A follower running a PreVote round (etcd's raft calls it a
   * pre-candidate); its role stays "follower" and its term does not move.
   */
  #preCandidate = false;
  #leader: NodeId | null = null;
  readonly #log: RaftLog;

  #electionElapsed = 0;
  #heartbeatElapsed = 0;
  #randomizedElectionTimeout = 0;
  #votes = new Map<NodeId, boolean>();
  #progress = new Map<NodeId, Progress>();

  #messages: Message[] = [];
  #leaderMessages: Message[] = [];
  #readStates: ReadState[] = [];
  #pendingReads: PendingRead[] = [];
  /** Reads that wait for the heartbeat round in flight to end (§6.4). */
  #nextReads: { context: string; requester: NodeId }[] = [];
  /** Whether the newest round's heartbeats are still queued here. */
  #roundUnsent = false;
  /** Reads received before this leader committed an entry of its term. */
  #deferredReads: { context: string; requester: NodeId }[] = [];
  #readSequence = 0;
  /** Target of a leadership transfer under way (dissertation §3.10), or null. */
  #transferee: NodeId | null = null;
  /** Leader ticks since the transfer began; it is abandoned at electionTicks. */
  #transferElapsed = 0;

  /** The latest snapshot this node holds (to send as leader), or null. */
  #snapshot: Snapshot | null;
  /** A snapshot installed from the leader, not yet handed out in a Ready. */
  #pendingSnapshot: Snapshot | null = null;
  /** The snapshot being assembled from chunks, or null. */
  #incoming: IncomingSnapshot | null = null;
  readonly #stats: RaftCoreStats = emptyCoreStats();
  /**
   * The leader of the current term as far as this node knows (it heard
   * its appends, or is it), kept while `#leader` is forgotten for
   * liveness (a lost connection, a PreVote round): a term has at most one
   * leader (Raft paper §5.2). Null until known; reset with the term.
   */
  #termLeader: NodeId | null = null;
  /** Set once a safety violation stopped this core; see {@link halted}. */
  #halted: CommittedEntryConflictError | null = null;

  /** Highest index handed to the driver for applying. */
  #appliedCursor: number;
  #persistedHardState: HardState;
  #reportedSoftState: SoftState;
  #outstanding: Ready | null = null;

  /**
   * Makes a follower in the persisted term, with no known leader.
   *
   * @throws {RangeError} when `id` is not among `voters`, ticks are not
   * positive integers with heartbeatTicks < electionTicks, or the persisted
   * state is inconsistent (entries not contiguous from 1 or from the
   * snapshot, terms decreasing, or commit beyond the log), or a size limit
   * is not a positive integer.
   */
  constructor(config: RaftCoreConfig) {
    this.id = config.id;
    this.#baseConfiguration = config.configuration ??
      makeConfiguration(config.voters, config.learners);
    if (
      config.configuration === undefined && !config.join &&
      !isMember(this.#baseConfiguration, this.id)
    ) {
      throw new RangeError(
        `node ${this.id} is not among voters or learners; list it there, ` +
          "or pass join: true to start a node that waits to be added to a cluster",
      );
    }
    this.#electionTicks = config.electionTicks ?? 10;
    this.#heartbeatTicks = config.heartbeatTicks ?? 1;
    if (
      !Number.isInteger(this.#electionTicks) ||
      !Number.isInteger(this.#heartbeatTicks) || this.#heartbeatTicks < 1 ||
      this.#heartbeatTicks >= this.#electionTicks
    ) {
      throw new RangeError(
        "electionTicks and heartbeatTicks must be integers with 1 <= heartbeatTicks < electionTicks",
      );
    }
    this.#random = config.random ?? Math.random;
    this.#maxEntriesPerAppend = config.maxEntriesPerAppend ?? 64;
    this.#inflightLimits = {
      maxAppends: positive(
        config.maxInflightAppends ?? 64,
        "maxInflightAppends",
      ),
      maxBytes: positive(
        config.maxInflightBytes ?? 4 << 20,
        "maxInflightBytes",
      ),
    };
    positive(this.#maxEntriesPerAppend, "maxEntriesPerAppend");
    this.#snapshotChunkChars = positive(
      config.snapshotChunkChars ?? 256 << 10,
      "snapshotChunkChars",
    );
    this.#checkSnapshot = config.checkSnapshot;
    this.#maxSnapshotChars = positive(
      config.maxSnapshotChars ?? 256 << 20,
      "maxSnapshotChars",
    );
    this.#checkQuorum = config.checkQuorum ?? true;
    this.#preVote = config.preVote ?? true;
    const snapshot = config.snapshot;
    this.#log = new RaftLog(
      config.entries ?? [],
      snapshot && { index: snapshot.index, term: snapshot.term },
    );
    this.#snapshot = snapshot?.data === undefined ? null : {
      index: snapshot.index,
      term: snapshot.term,
      data: snapshot.data,
      configuration: this.#baseConfiguration,
    };
    // Config entries at or below the snapshot are covered by
    // config.configuration (the snapshot's).
    this.#configEntries = configEntries(
      (config.entries ?? []).filter((entry) =>
        entry.index > this.#log.snapshot.index
      ),
    );
    this.#configuration = this.#configEntries.at(-1)?.configuration ??
      this.#baseConfiguration;
    this.#reportedConfiguration = this.#configuration;
    const persisted = config.hardState ?? { term: 0, vote: null, commit: 0 };
    const hardState = {
      ...persisted,
      commit: Math.max(persisted.commit, this.#log.snapshot.index),
    };
    if (hardState.commit > this.#log.lastIndex) {
      throw new RangeError(
        `persisted commit index ${hardState.commit} is beyond the last log index ${this.#log.lastIndex}`,
      );
    }
    this.#term = hardState.term;
    this.#vote = hardState.vote;
    this.#commit = hardState.commit;
    this.#persistedHardState = { ...persisted };
    this.#appliedCursor = this.#log.snapshot.index;
    this.#reportedSoftState = this.softState;
    this.#becomeFollower(this.#term, null);
  }

  /** Current term. */
  get term(): number {
    return this.#term;
  }
  /** Current role. */
  get role(): Role {
    return this.#role;
  }
  /** Known leader of the current term, or null. */
  get leader(): NodeId | null {
    return this.#leader;
  }
  /**
   * Whether this follower is asking for pre-votes (Raft dissertation §9.6)
   * before it stands for election.
   */
  get preCandidate(): boolean {
    return this.#preCandidate;
  }
  /** Highest index known to be committed. */
  get commitIndex(): number {
    return this.#commit;
  }
  /** Index of the last log entry. */
  get lastIndex(): number {
    return this.#log.lastIndex;
  }
  /** Ids of the voting members (of {@link configuration}). */
  get voters(): readonly NodeId[] {
    return this.#configuration.voters;
  }
  /**
   * The current configuration: the latest in the log, committed or not
   * (Raft dissertation §4.1), or the bootstrap/recovered one.
   */
  get configuration(): Configuration {
    return this.#configuration;
  }
  /**
   * Where {@link configuration} comes from: the index and term of the
   * latest config entry in the log (committed or not), or, when there is
   * none (a bootstrap configuration, or the entry is compacted), the
   * snapshot point, at which that configuration was in force. By Log
   * Matching (§5.3) one point never stands for two configurations, and
   * once a change is committed every leader's point is past those told
   * before it. Two nodes may tell different points for one configuration
   * (one compacted its entry), and compaction moves the point too.
   */
  get configurationPoint(): SnapshotPoint {
    const entry = this.#configEntries.at(-1);
    return entry === undefined
      ? this.#log.snapshot
      : { index: entry.index, term: entry.term };
  }
  /**
   * On a leader, what it knows of every other member's log (voters and
   * learners), for a driver deciding whether a learner has caught up
   * (dissertation §4.2.1); empty on any other node.
   */
  progress(): ReadonlyMap<NodeId, MemberProgress> {
    const out = new Map<NodeId, MemberProgress>();
    for (const [peer, progress] of this.#progress) {
      out.set(peer, {
        match: progress.match,
        next: progress.next,
        state: progress.state,
        learner: !this.#isVoter(peer),
      });
    }
    return out;
  }
  /**
   * The log's snapshot point: entries up to its index are compacted
   * (Raft paper §7); `{ index: 0, term: 0 }` before any compaction.
   */
  get snapshotPoint(): SnapshotPoint {
    return this.#log.snapshot;
  }
  /** Highest index the driver has persisted (acknowledged by advance()). */
  get stableIndex(): number {
    return this.#log.stableIndex;
  }

  /**
   * Counters of dropped and impossible messages (a copy); see
   * {@link RaftCoreStats}.
   */
  get stats(): RaftCoreStats {
    return { ...this.#stats, anomalies: { ...this.#stats.anomalies } };
  }

  /**
   * The safety violation that stopped this core (a leader's message that
   * contradicts a committed entry), or null. Once set, {@link step} throws
   * it again: the node must stop (see {@link CommittedEntryConflictError}).
   */
  get halted(): CommittedEntryConflictError | null {
    return this.#halted;
  }

  /**
   * On a leader, what it knows of follower `peer` (a copy); undefined on a
   * non-leader or for an unknown peer.
   */
  progressOf(peer: NodeId): ProgressView | undefined {
    const progress = this.#progress.get(peer);
    if (progress === undefined) return undefined;
    return {
      state: progress.state,
      match: progress.match,
      next: progress.next,
      inflightAppends: progress.inflightCount,
      inflightBytes: progress.inflightBytes,
      snapshotIndex: progress.transfer?.snapshot.index ?? null,
    };
  }
  /** Term, role and leader as a value. */
  get softState(): SoftState {
    const soft: SoftState = {
      term: this.#term,
      role: this.#role,
      leader: this.#leader,
    };
    if (this.#preCandidate) soft.preCandidate = true;
    return soft;
  }
  /** Term, vote and commit index as a value. */
  get hardState(): HardState {
    return { term: this.#term, vote: this.#vote, commit: this.#commit };
  }
  /**
   * While this leader hands leadership over, the target's id; null
   * otherwise (see {@link transferLeadership}).
   */
  get transferee(): NodeId | null {
    return this.#transferee;
  }
  /** The entry at `index`, if present (for tests and diagnostics). */
  entryAt(index: number): Entry | undefined {
    return this.#log.entryAt(index);
  }

  /**
   * Advances logical time by one tick (the driver calls it every tickMs).
   *
   * @throws {CommittedEntryConflictError} once the core {@link halted}.
   */
  tick(): void {
    if (this.#halted !== null) throw this.#halted;
    if (this.#role === "leader") {
      this.#tickLeader();
    } else {
      this.#electionElapsed++;
      if (
        this.#electionElapsed >= this.#randomizedElectionTimeout &&
        this.#mayStand() // learners, non-members never stand (§4.2.1, §4.2.2)
      ) {
        if (this.#preVote) this.#preCampaign();
        else this.campaign();
      }
    }
  }

  /**
   * The transport saw its connection to `id` end: the peer closed it, as
   * the operating system does for every socket of a process that exited.
   * A follower of `id` then forgets its leader and stands soon: after a
   * random 1 to ⌈electionTicks / 2⌉ ticks instead of the rest of a full
   * election timeout. A leader that merely goes quiet (a partition, a
   * paused process) still shows only through the election timeout.
   *
   * Safe whatever the cause: it changes no persistent state, and it only
   * hurries a PreVote round (Raft dissertation §9.6), so a voter that still
   * hears the leader refuses the pre-vote (it heard from a leader within
   * the minimum election timeout) and nobody's term moves. A spurious
   * report (the leader's connection merely reset) costs one pre-vote round.
   * Ignored unless this node is a voting follower of `id`, and without
   * PreVote, where a hurried election would raise the term.
   */
  leaderConnectionLost(id: NodeId): void {
    if (
      !this.#preVote || this.#role !== "follower" || this.#leader !== id ||
      !this.#mayStand()
    ) {
      return;
    }
    this.#leader = null;
    const wait = 1 +
      Math.floor(this.#random() * Math.ceil(this.#electionTicks / 2));
    this.#electionElapsed = Math.max(
      this.#electionElapsed,
      this.#randomizedElectionTimeout - wait,
    );
  }

  /**
   * Starts an election now (Raft paper §5.2): a new term, a vote for itself,
   * vote requests to every other voter. A leader ignores it. This skips the
   * PreVote round an election timeout starts (it is a forced election, as
   * for tests or a leadership transfer).
   */
  campaign(): void {
    this.#campaign(false);
  }

  /**
   * The election itself; `transfer` marks the vote requests of an election
   * a leader asked for (a {@link TimeoutNowRequest}).
   */
  #campaign(transfer: boolean): void {
    if (this.#role === "leader" || !this.#mayStand()) return;
    this.#becomeCandidate();
    if (this.#countVotes(true) >= this.#quorum) {
      this.#becomeLeader();
      return;
    }
    this.#requestVotes("vote", this.#term, transfer);
  }

  /** Asks every other voter for its (pre-)vote in `term`. */
  #requestVotes(
    type: "vote" | "preVote",
    term: number,
    transfer = false,
  ): void {
    for (const peer of this.#peers()) {
      const request: VoteRequest | PreVoteRequest = {
        type,
        from: this.id,
        to: peer,
        term,
        lastLogIndex: this.#log.lastIndex,
        lastLogTerm: this.#log.lastTerm,
      };
      if (transfer && request.type === "vote") request.transfer = true;
      this.#send(request);
    }
  }

  /**
   * Hands leadership to another voter (Raft dissertation §3.10). The leader
   * stops accepting proposals ({@link propose} throws
   * {@link LeadershipTransferError}), brings the target's log up to date
   * with the usual appends, then sends it a `timeoutNow`: the target stands
   * for election at once, in the next term, without PreVote, and the other
   * voters grant it even though they heard from this leader lately. If no
   * new leader has taken over within an election timeout (electionTicks
   * ticks) the transfer is abandoned and this node leads on as before.
   * Calling it again during a transfer restarts it, towards the new target.
   *
   * @param target the voter to hand over to; by default the most up to
   * date one (the highest match index, the first listed on a tie).
   * @returns the target's id (this node's own id, a no-op, when `target`
   * is this node).
   * @throws {NotLeaderError} when this node is not the leader.
   * @throws {RangeError} when `target` is not a voter, or there is no
   * other voter.
   */
  transferLeadership(target?: NodeId): NodeId {
    if (this.#role !== "leader") throw new NotLeaderError(this.#leader);
    if (target === this.id) return this.id;
    if (target === undefined) {
      let best: { id: NodeId; match: number } | null = null;
      for (const [peer, progress] of this.#progress) {
        if (!this.#isVoter(peer)) continue;
        if (best === null || progress.match > best.match) {
          best = { id: peer, match: progress.match };
        }
      }
      if (best === null) {
        throw new RangeError("no other voter to transfer leadership to");
      }
      target = best.id;
    } else if (!this.#progress.has(target) || !this.#isVoter(target)) {
      throw new RangeError(`${target} is not a voter of this cluster`);
    }
    this.#transferee = target;
    this.#transferElapsed = 0;
    if (this.#progress.get(target)!.match === this.#log.lastIndex) {
      this.#sendTimeoutNow(target);
    } else {
      this.#sendAppend(target);
    }
    return target;
  }

  #sendTimeoutNow(target: NodeId): void {
    this.#send<TimeoutNowRequest>({
      type: "timeoutNow",
      from: this.id,
      to: target,
      term: this.#term,
    });
  }

  /**
   * Starts a PreVote round (Raft dissertation §9.6): asks every other voter
   * whether it would vote for this node in term + 1, changing neither this
   * node's term nor its vote (so nothing is persisted).
   */
  #preCampaign(): void {
    this.#role = "follower";
    this.#leader = null;
    this.#preCandidate = true;
    this.#resetTimers();
    this.#votes = this.#ownVote();
    if (this.#countVotes(true) >= this.#quorum) {
      this.campaign();
      return;
    }
    this.#requestVotes("preVote", this.#term + 1);
  }

  /**
   * Appends `data` to the leader's log and starts replicating it.
   *
   * @returns the new entry's index and term; it is committed when it shows
   * up in a Ready's `committedEntries` with that same term.
   * @throws {NotLeaderError} when this node is not the leader, or (as
   * {@link LeadershipTransferError}) while it hands leadership over.
   */
  propose(data: string): { index: number; term: number } {
    if (this.#role !== "leader") throw new NotLeaderError(this.#leader);
    if (this.#transferee !== null) {
      throw new LeadershipTransferError(this.#transferee);
    }
    const entry = this.#log.appendNew(this.#term, data);
    this.#maybeCommit();
    this.#broadcastAppend();
    return { index: entry.index, term: entry.term };
  }

  /**
   * Proposes a single-server membership change (Raft dissertation §4.1): a
   * config entry holding the whole new configuration is appended and takes
   * effect on each node as soon as it is in its log. The leader starts or
   * stops replicating to the node at once; a learner (§4.2.1) receives the
   * log but does not count in any quorum until it is promoted. A leader that
   * removes itself (§4.2.2) leads on without counting itself until the entry
   * commits, then steps down.
   *
   * @param change what to do with which node.
   * @returns the config entry's index and term; the change is committed when
   * that entry shows up in a Ready's `committedEntries`.
   * @throws {NotLeaderError} when this node is not the leader, or (as
   * {@link LeadershipTransferError}) while it hands leadership over.
   * @throws {ConfChangeError} when an earlier change is not committed yet,
   * when no entry of this leader's term is committed yet (Ongaro's fix on
   * raft-dev, 2015: a new leader might otherwise overwrite a change an
   * earlier leader was making), or when the change does not apply (see
   * {@link applyConfChange}).
   */
  proposeConfChange(change: ConfChange): { index: number; term: number } {
    if (this.#role !== "leader") throw new NotLeaderError(this.#leader);
    if (this.#transferee !== null) {
      throw new LeadershipTransferError(this.#transferee);
    }
    const pending = this.#configEntries.at(-1)?.index ?? 0;
    if (pending > this.#commit) {
      throw new ConfChangeError(
        `the membership change at index ${pending} is not committed yet; ` +
          "wait until it commits, then retry (one change at a time, dissertation §4.1)",
      );
    }
    if (this.#log.termAt(this.#commit) !== this.#term) {
      throw new ConfChangeError(
        `this leader has not yet committed an entry of its term ${this.#term}; ` +
          "retry shortly (its first entry commits within a round trip)",
      );
    }
    const next = applyConfChange(this.#configuration, change);
    const entry = this.#log.appendNew(
      this.#term,
      encodeConfiguration(next),
      "config",
    );
    this.#syncConfiguration([{ ...entry, configuration: next }]);
    this.#maybeCommit();
    this.#broadcastAppend();
    return { index: entry.index, term: entry.term };
  }

  /**
   * Asks for a linearizable read (ReadIndex, Raft dissertation §6.4). A
   * {@link ReadState} with the same `context` appears in a later Ready once
   * the leader has confirmed it still leads; the read may then be served
   * from the state machine as soon as it has applied `index`. When no leader
   * is known the request is dropped: the caller retries after a timeout.
   *
   * @param context a token unique among this node's outstanding reads.
   */
  readIndex(context: string): void {
    if (this.#role === "leader") {
      this.#leaderRead(context, this.id);
    } else if (this.#leader !== null) {
      this.#send<ReadIndexRequest>({
        type: "readIndex",
        from: this.id,
        to: this.#leader,
        term: this.#term,
        context,
      });
    }
  }

  /**
   * Feeds a message from another node (Raft paper §5.1: a higher term makes
   * any node a follower; a lower term is stale). PreVote messages are the
   * exception (dissertation §9.6): a pre-vote request never changes the
   * receiver's term, nor does a granted pre-vote reply; a refused one, which
   * carries the refuser's term, does.
   *
   * Messages a correct cluster never sends are dropped and counted
   * ({@link stats}`.anomalies`): appends, snapshots and ReadIndex answers
   * of this node's term from a member other than the term's leader it
   * knows (§5.2, Election Safety), grants and acknowledgements of a later
   * term, votes from non-voters, messages from this node's own id.
   *
   * @throws {CommittedEntryConflictError} when a leader's append or
   * snapshot contradicts an entry this node committed (§5.4); from then on
   * the core is {@link halted}, and every later step or tick throws it.
   */
  step(message: Message): void {
    if (this.#halted !== null) throw this.#halted;
    if (message.to !== this.id) {
      this.#stats.droppedMisaddressed++;
      return;
    }
    if (message.from === this.id) {
      this.#stats.anomalies.fromSelf++;
      return;
    }
    if (message.term > this.#term + MAX_TERM_STEP) {
      this.#stats.anomalies.termJump++;
      return;
    }
    if (
      // Non-members are ignored, except the leader this node follows (it
      // leads on while its own removal commits, dissertation §4.2.2); a
      // node in no configuration (joining, or removed) takes any leader.
      // A leader's appends and snapshots are heard from anyone: this node's
      // configuration may be stale (it missed the change that added the
      // leader, §4.1), and following the leader of a term is always safe.
      isMember(this.#configuration, this.id) &&
      !isMember(this.#configuration, message.from) &&
      message.from !== this.#leader &&
      message.type !== "append" && message.type !== "installSnapshot" &&
      // So is a candidate whose log is at least as up to date as this
      // node's: it may hold the configuration this node missed, which
      // makes this node one of its voters (without that vote neither might
      // ever be elected). A removed node's log is behind the members' that
      // hold its removal, so it stays unheard.
      !((message.type === "vote" || message.type === "preVote") &&
        this.#log.isUpToDate(message.lastLogIndex, message.lastLogTerm))
    ) {
      this.#stats.droppedNotMember++;
      return;
    }
    if (message.type === "preVote") {
      return this.#onPreVote(message);
    }
    if (message.type === "preVoteResponse") {
      if (message.term > this.#term && !message.granted) {
        this.#becomeFollower(message.term, null);
        return;
      }
      return this.#onPreVoteResponse(message);
    }
    if (
      message.type === "timeoutNow" && message.term >= this.#term &&
      (message.term > this.#term || message.from !== this.#leader)
    ) {
      // A leader sends timeoutNow only to a follower that acknowledged its
      // appends of this term (§3.10), which knows it as the leader: any
      // other is forged or broken. Dropped before it can move the term.
      this.#stats.anomalies.timeoutNowNotFromLeader++;
      return;
    }
    if (message.term > this.#term && grantsOrAcknowledges(message)) {
      // A node grants a vote or acknowledges an append or snapshot in the
      // request's term (§5.1), and this node asked in its own term or an
      // earlier one: forged or broken. Dropped before it moves the term.
      this.#stats.anomalies.successFromLaterTerm++;
      return;
    }
    if (message.type === "readIndexResponse" && message.term > this.#term) {
      // A follower asks its leader in its own term (dissertation §6.4).
      this.#stats.anomalies.readIndexNotFromLeader++;
      return;
    }
    if (
      (message.type === "append" || message.type === "installSnapshot") &&
      (message.term > this.#term ||
        (message.term === this.#term &&
          (this.#termLeader === null || this.#termLeader === message.from)))
    ) {
      // Before the term moves: a halted node keeps the state it had.
      this.#refuseCommittedConflict(
        message,
        message.type === "append"
          ? [
            { index: message.prevLogIndex, term: message.prevLogTerm },
            ...message.entries,
          ]
          : [message.snapshot],
      );
    }
    if (message.term > this.#term) {
      if (message.type === "vote" && !message.transfer && this.#inLease()) {
        // A leader is alive as far as this node knows: a candidate that
        // cannot hear it must not depose it (dissertation §4.2.3), unless
        // that leader asked for this election (a leadership transfer).
        return;
      }
      const fromLeader = message.type === "append" ||
        message.type === "installSnapshot";
      this.#becomeFollower(message.term, fromLeader ? message.from : null);
    } else if (message.term < this.#term) {
      this.#stats.droppedStale++;
      this.#answerStale(message);
      return;
    }
    if (
      this.#termLeader !== null && message.from !== this.#termLeader &&
      (message.type === "append" || message.type === "installSnapshot" ||
        message.type === "readIndexResponse")
    ) {
      // Election Safety (Raft paper §5.2): at most one leader per term, and
      // this node knows this term's. Another member that sends as a leader
      // of it is forged or broken; heeding it would move this node's
      // leader, or its log, away from the real leader's.
      if (message.type === "readIndexResponse") {
        this.#stats.anomalies.readIndexNotFromLeader++;
      } else {
        this.#stats.anomalies.appendNotFromLeader++;
      }
      return;
    }
    switch (message.type) {
      case "vote":
        return this.#onVote(message);
      case "voteResponse":
        return this.#onVoteResponse(message);
      case "append":
        return this.#onAppend(message);
      case "appendResponse":
        return this.#onAppendResponse(message);
      case "readIndex":
        return this.#onReadIndex(message);
      case "readIndexResponse":
        return this.#onReadIndexResponse(message);
      case "timeoutNow":
        return this.#onTimeoutNow();
      case "installSnapshot":
        return this.#onInstallSnapshot(message);
      case "installSnapshotResponse":
        return this.#onInstallSnapshotResponse(message);
    }
  }

  /**
   * The application took a snapshot of its state machine at an applied
   * index (Raft paper §7). The core keeps it, to send to followers that
   * need entries it no longer has, and drops the log up to `compactTo`.
   * The snapshot records the configuration in force at its index (the
   * latest config entry at or below it, else the configuration the log
   * starts with; dissertation §5.1), and config entries at or below
   * `compactTo` are folded into the configuration the log starts with.
   * Hand the snapshot over only once it is durable: the core may send it
   * to a follower, and the log it replaces is gone from memory.
   *
   * @param snapshot the state machine after applying entries 1..index;
   * `term` is the term of the entry at `index`.
   * @param options.compactTo drop entries up to this index (default
   * `snapshot.index`; a driver that keeps a trailing window for slow
   * followers passes `snapshot.index - window`; at or below the current
   * snapshot point nothing is dropped).
   * @throws {RangeError} when `snapshot.index` is beyond the applied index
   * (what advance() acknowledged) or below the latest snapshot's, when
   * `snapshot.term` is not the term of the entry at `snapshot.index`, or
   * when `compactTo` is not an integer in 0..snapshot.index.
   */
  snapshotTaken(
    snapshot: SnapshotPoint & { data: string },
    options: { compactTo?: number } = {},
  ): void {
    const { index, term, data } = snapshot;
    if (!Number.isSafeInteger(index) || index > this.#appliedCursor) {
      throw new RangeError(
        `snapshot index ${index} is beyond the applied index ${this.#appliedCursor}`,
      );
    }
    const latest = Math.max(
      this.#snapshot?.index ?? 0,
      this.#log.snapshot.index,
    );
    if (index < latest) {
      throw new RangeError(
        `snapshot index ${index} is below the latest snapshot's (${latest})`,
      );
    }
    if (this.#log.termAt(index) !== term) {
      throw new RangeError(
        `snapshot term ${term} is not the term of entry ${index} (${
          this.#log.termAt(index)
        })`,
      );
    }
    const compactTo = options.compactTo ?? index;
    if (
      !Number.isSafeInteger(compactTo) || compactTo < 0 || compactTo > index
    ) {
      throw new RangeError(
        `compactTo ${compactTo} must be an integer in 0..${index} (the snapshot's index)`,
      );
    }
    this.#snapshot = {
      index,
      term,
      data,
      configuration: this.configurationAt(index),
    };
    this.#log.compact(compactTo);
    this.#foldConfigurations(compactTo);
  }

  /**
   * The configuration the snapshot at {@link snapshotPoint}, or the latest
   * taken or installed, records: the configuration in force at its index
   * (dissertation §5.1), or null when this node holds no snapshot data.
   */
  get snapshotConfiguration(): Configuration | null {
    return this.#snapshot?.configuration ?? null;
  }

  /**
   * The configuration in force at `index`: the latest config entry at or
   * below it, else the configuration the log starts with (dissertation
   * §5.1; what a snapshot at `index` records).
   *
   * @throws {RangeError} when `index` is below {@link snapshotPoint} (the
   * entries there are compacted).
   */
  configurationAt(index: number): Configuration {
    if (index < this.#log.snapshot.index) {
      throw new RangeError(
        `index ${index} is compacted (the log starts after ${this.#log.snapshot.index})`,
      );
    }
    let found = this.#baseConfiguration;
    for (const entry of this.#configEntries) {
      if (entry.index > index) break;
      found = entry.configuration;
    }
    return found;
  }

  /**
   * Log compaction up to `index` (dissertation §5.1): config entries at or
   * below it leave the log, so the latest of them becomes the base
   * configuration; the current configuration does not change.
   */
  #foldConfigurations(index: number): void {
    while (
      this.#configEntries.length > 0 && this.#configEntries[0].index <= index
    ) {
      this.#baseConfiguration = this.#configEntries.shift()!.configuration;
    }
  }

  /** Whether the hard state equals `h` (without building one: hot path). */
  #hardStateIs(h: HardState): boolean {
    return this.#term === h.term && this.#vote === h.vote &&
      this.#commit === h.commit;
  }

  /** Whether the soft state equals `s` (without building one: hot path). */
  #softStateIs(s: SoftState): boolean {
    return this.#term === s.term && this.#role === s.role &&
      this.#leader === s.leader &&
      (this.#preCandidate ? s.preCandidate === true : s.preCandidate !== true);
  }

  /** Whether {@link ready} has any work. */
  hasReady(): boolean {
    return this.#messages.length > 0 || this.#leaderMessages.length > 0 ||
      this.#pendingSnapshot !== null || this.#commitToAnnounce() ||
      this.#readStates.length > 0 ||
      this.#log.unstableEntries().length > 0 ||
      this.#commit > this.#appliedCursor ||
      !this.#hardStateIs(this.#persistedHardState) ||
      !this.#softStateIs(this.#reportedSoftState) ||
      !sameConfiguration(this.#configuration, this.#reportedConfiguration);
  }

  /**
   * Takes the pending work. Call {@link advance} with it before the next
   * `ready()`.
   *
   * @throws {Error} when the previous Ready was not advanced.
   */
  ready(): Ready {
    if (this.#outstanding !== null) {
      throw new Error("advance() the previous Ready before taking another");
    }
    this.#announceCommit();
    const hardState = this.hardState;
    const softState = this.softState;
    const snapshot = this.#pendingSnapshot;
    const applyFrom = Math.max(this.#appliedCursor, snapshot?.index ?? 0) + 1;
    // A leader's messages may leave before its own write only once its term
    // is durable: a single voter wins its election in the Ready that raises
    // its term, and after a crash before that write it could lead the same
    // term again with other entries at the same indices (§10.2.1 lets the
    // leader write its log in parallel, not its term).
    const termDurable = this.#term === this.#persistedHardState.term;
    const ready: Ready = {
      hardState: sameHardState(hardState, this.#persistedHardState)
        ? null
        : hardState,
      entries: this.#log.unstableEntries(),
      snapshot,
      leaderMessages: termDurable ? this.#leaderMessages : [],
      messages: termDurable
        ? this.#messages
        : [...this.#leaderMessages, ...this.#messages],
      committedEntries: applyFrom > this.#commit
        ? []
        : this.#log.slice(applyFrom, this.#commit),
      readStates: this.#readStates,
      softState: sameSoftState(softState, this.#reportedSoftState)
        ? null
        : softState,
      configuration:
        sameConfiguration(this.#configuration, this.#reportedConfiguration)
          ? null
          : this.#configuration,
    };
    this.#reportedConfiguration = this.#configuration;
    this.#messages = [];
    this.#leaderMessages = [];
    this.#roundUnsent = false;
    this.#pendingSnapshot = null;
    this.#readStates = [];
    this.#reportedSoftState = softState;
    this.#outstanding = ready;
    return ready;
  }

  /**
   * Acknowledges that `ready` was fully handled: its snapshot, entries and
   * hard state are durable and its committed entries applied. On a leader
   * this is when its own copy of the entries starts to count toward the
   * commit quorum (dissertation §10.2.1).
   *
   * @throws {Error} when `ready` is not the outstanding Ready.
   */
  advance(ready: Ready): void {
    if (ready !== this.#outstanding) {
      throw new Error("advance() takes the Ready last returned by ready()");
    }
    this.#outstanding = null;
    const last = ready.entries.at(-1);
    if (last !== undefined) this.#log.stableTo(last.index, last.term);
    if (ready.hardState !== null) this.#persistedHardState = ready.hardState;
    if (ready.snapshot !== null) {
      this.#appliedCursor = Math.max(this.#appliedCursor, ready.snapshot.index);
    }
    const applied = ready.committedEntries.at(-1);
    if (applied !== undefined) this.#appliedCursor = applied.index;
    if (this.#role === "leader") this.#maybeCommit();
  }

  // --- roles -------------------------------------------------------------

  // Membership lives here: #voters, #isMember, #quorum and #peers are the
  // only readers of it.

  get #quorum(): number {
    return quorumSize(this.#configuration);
  }

  /** The other voters: whom an election asks. */
  #peers(): NodeId[] {
    return this.#configuration.voters.filter((id) => id !== this.id);
  }

  #isVoter(id: NodeId): boolean {
    return isVoter(this.#configuration, id);
  }

  /**
   * Whether this node may stand for election: it is a voter, or it is
   * being removed by a config entry not committed yet (dissertation
   * §4.2.2: a server not in the new configuration may still time out and
   * lead until the change commits). The latter matters when this node alone
   * holds that entry: the new configuration's voters cannot elect one of
   * their own, as this node refuses them its vote for their shorter logs.
   * Its election counts the votes of its configuration's voters only.
   */
  #mayStand(): boolean {
    if (this.#isVoter(this.id)) return true;
    const known = this.#configEntries;
    const latest = known.at(-1);
    if (latest === undefined || latest.index <= this.#commit) return false;
    const before = known.at(-2)?.configuration ?? this.#baseConfiguration;
    return isVoter(before, this.id);
  }

  /** A candidate's own vote, counted only when it is a voter. */
  #ownVote(): Map<NodeId, boolean> {
    return new Map(this.#isVoter(this.id) ? [[this.id, true]] : []);
  }

  /**
   * Brings the configuration up to date with the log after `appended` went
   * in (dissertation §4.1: the latest config entry, committed or not): drops
   * config entries a conflicting suffix replaced (reverting to the latest
   * one left, or the base configuration), records new ones, and on a leader
   * adds a Progress for each new member and drops those of removed ones
   * (which are sent nothing more).
   */
  #syncConfiguration(appended: readonly ConfigEntry[]): void {
    const known = this.#configEntries;
    while (
      known.length > 0 &&
      this.#log.termAt(known.at(-1)!.index) !== known.at(-1)!.term
    ) known.pop();
    for (const entry of appended) {
      if (
        entry.index > (known.at(-1)?.index ?? 0) &&
        this.#log.termAt(entry.index) === entry.term
      ) known.push(entry);
    }
    const next = known.at(-1)?.configuration ?? this.#baseConfiguration;
    if (sameConfiguration(next, this.#configuration)) return;
    this.#configuration = next;
    if (this.#role !== "leader") return;
    const members = membersOf(next);
    for (const peer of this.#progress.keys()) {
      if (!members.includes(peer)) this.#progress.delete(peer);
    }
    for (const peer of members) {
      if (peer !== this.id && !this.#progress.has(peer)) {
        this.#progress.set(
          peer,
          new Progress(this.#log.lastIndex + 1, this.#inflightLimits),
        );
      }
    }
    if (this.#transferee !== null && !this.#isVoter(this.#transferee)) {
      this.#transferee = null;
    }
  }

  #resetTimers(): void {
    this.#electionElapsed = 0;
    this.#heartbeatElapsed = 0;
    this.#randomizedElectionTimeout = this.#electionTicks +
      Math.floor(this.#random() * this.#electionTicks);
  }

  #becomeFollower(term: number, leader: NodeId | null): void {
    if (term !== this.#term) {
      this.#term = term;
      this.#vote = null;
      this.#incoming = null;
      this.#termLeader = null;
    }
    if (leader !== null) this.#termLeader = leader;
    this.#role = "follower";
    this.#preCandidate = false;
    this.#leader = leader;
    this.#resetTimers();
    this.#progress.clear();
    this.#transferee = null;
    this.#dropReads();
  }

  #becomeCandidate(): void {
    this.#incoming = null;
    this.#term++;
    this.#termLeader = null;
    this.#vote = this.id;
    this.#role = "candidate";
    this.#preCandidate = false;
    this.#leader = null;
    this.#resetTimers();
    this.#votes = this.#ownVote();
    this.#dropReads();
  }

  #becomeLeader(): void {
    this.#role = "leader";
    this.#preCandidate = false;
    this.#leader = this.id;
    this.#termLeader = this.id;
    this.#resetTimers();
    this.#progress.clear();
    this.#transferee = null;
    for (const peer of membersOf(this.#configuration)) {
      if (peer === this.id) continue;
      this.#progress.set(
        peer,
        new Progress(this.#log.lastIndex + 1, this.#inflightLimits),
      );
    }
    // An empty entry of the new term lets the leader commit everything
    // before it (Raft paper §5.4.2, §8).
    this.#log.appendNew(this.#term, "");
    this.#maybeCommit();
    this.#broadcastAppend();
  }

  #inLease(): boolean {
    return this.#checkQuorum && this.#leader !== null &&
      this.#electionElapsed < this.#electionTicks;
  }

  #tickLeader(): void {
    this.#heartbeatElapsed++;
    this.#electionElapsed++;
    if (
      this.#transferee !== null &&
      ++this.#transferElapsed >= this.#electionTicks
    ) {
      // No new leader took over within an election timeout: lead on.
      this.#transferee = null;
    }
    if (this.#electionElapsed >= this.#electionTicks) {
      this.#electionElapsed = 0;
      if (this.#checkQuorum && !this.#quorumActive()) {
        this.#becomeFollower(this.#term, null);
        return;
      }
    }
    for (const progress of this.#progress.values()) {
      const transfer = progress.transfer;
      if (
        transfer !== null && ++transfer.elapsed >= this.#electionTicks &&
        transfer.inflight
      ) {
        // A chunk or its answer was lost: send it again (below).
        transfer.inflight = false;
      }
    }
    if (this.#heartbeatElapsed >= this.#heartbeatTicks) {
      this.#heartbeatElapsed = 0;
      this.#broadcastHeartbeat(this.#pendingReads.at(-1)?.round);
      for (const progress of this.#progress.values()) progress.onHeartbeat();
      this.#broadcastAppend();
      this.#probeTails();
    }
  }

  /**
   * While pipelining, a lost append is only noticed when a later one is
   * refused, and a full window sends no later one: so once per heartbeat
   * interval, ask each follower with unacknowledged appends whether it holds
   * the last entry sent (an empty append at `next - 1`). It answers a
   * success, which frees the window, or a rejection, which resends from
   * `match + 1`.
   */
  #probeTails(): void {
    for (const [peer, progress] of this.#progress) {
      if (
        progress.state !== "replicate" || progress.next - 1 <= progress.match
      ) {
        continue;
      }
      if (this.#log.termAt(progress.next - 1) < 0) {
        // Compacted since it was sent: unanswered, so it may be lost, and
        // resending it needs the snapshot. Probe from the match index.
        progress.become("probe");
        progress.next = progress.match + 1;
        this.#sendAppend(peer);
        continue;
      }
      this.#sendAppendRequest(peer, progress.next - 1, []);
    }
  }

  /** CheckQuorum: did a quorum (counting this node) answer lately? */
  #quorumActive(): boolean {
    let active = this.#isVoter(this.id) ? 1 : 0;
    for (const [peer, progress] of this.#progress) {
      if (progress.recentActive && this.#isVoter(peer)) active++;
      progress.recentActive = false;
    }
    return active >= this.#quorum;
  }

  // --- elections ---------------------------------------------------------

  #onVote(message: VoteRequest): void {
    const canVote = this.#vote === null || this.#vote === message.from;
    const granted = canVote &&
      this.#log.isUpToDate(message.lastLogIndex, message.lastLogTerm);
    if (granted) {
      this.#vote = message.from;
      this.#electionElapsed = 0;
    }
    this.#send<VoteResponse>({
      type: "voteResponse",
      from: this.id,
      to: message.from,
      term: this.#term,
      granted,
    });
  }

  #onVoteResponse(message: VoteResponse): void {
    if (this.#role !== "candidate") return;
    if (!this.#isVoter(message.from)) {
      // A candidate asks its configuration's voters only (§5.2), and its
      // configuration does not change while it stands.
      this.#stats.anomalies.voteFromNonVoter++;
      return;
    }
    if (!this.#votes.has(message.from)) {
      this.#votes.set(message.from, message.granted);
    }
    if (this.#countVotes(true) >= this.#quorum) {
      this.#becomeLeader();
    } else if (this.#countVotes(false) >= this.#quorum) {
      this.#becomeFollower(this.#term, null);
    }
  }

  /**
   * Answers a pre-vote (Raft dissertation §9.6) without changing this node's
   * term or vote. Granted when the request is for a term after this node's
   * (or for its own term, when it could still vote in it), the asker's log
   * is at least as up to date, and this node has not heard from a leader
   * within the minimum election timeout (a leader, which hears from itself,
   * always refuses).
   */
  #onPreVote(message: PreVoteRequest): void {
    const canVote = message.term > this.#term ||
      (message.term === this.#term &&
        (this.#vote === null || this.#vote === message.from));
    const heardFromLeader = this.#leader !== null &&
      this.#electionElapsed < this.#electionTicks;
    const granted = canVote && !heardFromLeader &&
      this.#log.isUpToDate(message.lastLogIndex, message.lastLogTerm);
    this.#send<PreVoteResponse>({
      type: "preVoteResponse",
      from: this.id,
      to: message.from,
      term: granted ? message.term : this.#term,
      granted,
    });
  }

  /** Counts a pre-vote; a quorum of them starts the real election. */
  #onPreVoteResponse(message: PreVoteResponse): void {
    if (!this.#preCandidate || !this.#isVoter(message.from)) return;
    // A grant is for term + 1; a refusal in this node's term counts too.
    // Anything else is left over from an earlier round.
    const expected = message.granted ? this.#term + 1 : this.#term;
    if (message.term !== expected) return;
    if (!this.#votes.has(message.from)) {
      this.#votes.set(message.from, message.granted);
    }
    if (this.#countVotes(true) >= this.#quorum) {
      this.campaign();
    } else if (this.#countVotes(false) >= this.#quorum) {
      this.#becomeFollower(this.#term, null);
    }
  }

  /**
   * The leader asks this node to take over (dissertation §3.10): stand for
   * election now, skipping PreVote, with requests voters grant despite
   * their lease. (A leader ignores it; it is already in the term.)
   */
  #onTimeoutNow(): void {
    if (this.#role === "leader") return;
    this.#campaign(true);
  }

  #countVotes(granted: boolean): number {
    let count = 0;
    for (const value of this.#votes.values()) if (value === granted) count++;
    return count;
  }

  // --- replication -------------------------------------------------------

  /** Sends entries to every follower that is not paused. */
  #broadcastAppend(): void {
    for (const peer of this.#progress.keys()) this.#sendAppend(peer);
  }

  /**
   * Sends the follower its next append, unless it is paused; a follower
   * that needs entries this leader has compacted is switched to snapshot
   * state and sent the snapshot instead (Raft paper §7).
   * @returns whether entries went out while pipelining (so another append
   * may follow at once).
   */
  #sendAppend(peer: NodeId): boolean {
    const progress = this.#progress.get(peer)!;
    if (progress.state === "snapshot") {
      this.#sendSnapshotChunk(peer, progress);
      return false;
    }
    if (progress.paused) return false;
    const prevLogIndex = progress.next - 1;
    if (prevLogIndex < this.#log.snapshot.index) {
      // The entry at prevLogIndex is compacted: only a snapshot helps. With
      // none to send (a restart without snapshot data) the follower waits
      // for snapshotTaken().
      if (this.#snapshot === null) return false;
      progress.become("snapshot", this.#snapshot);
      this.#sendSnapshotChunk(peer, progress);
      return false;
    }
    const replicating = progress.state === "replicate";
    const entries = this.#log.slice(
      progress.next,
      this.#log.lastIndex,
      this.#maxEntriesPerAppend,
      replicating ? progress.byteBudget : Infinity,
    );
    if (entries.length === 0 && replicating) return false;
    this.#sendAppendRequest(peer, prevLogIndex, entries);
    let bytes = 0;
    for (const entry of entries) bytes += entry.data.length;
    progress.onSent(prevLogIndex + entries.length, entries.length, bytes);
    return entries.length > 0 && replicating;
  }

  /**
   * Sends the next InstallSnapshot chunk of the transfer under way, unless
   * one is unanswered (one chunk in flight, dissertation §5.3).
   */
  #sendSnapshotChunk(peer: NodeId, progress: Progress): void {
    const transfer = progress.transfer!;
    if (transfer.inflight) return;
    if (
      transfer.offset === 0 && this.#snapshot !== null &&
      this.#snapshot.index > transfer.snapshot.index
    ) {
      // Nothing of it was taken yet, and a newer snapshot exists (the
      // follower was down while this leader took more): send the newest,
      // so the follower does not install a stale one and then need another.
      transfer.snapshot = this.#snapshot;
    }
    const { snapshot, offset } = transfer;
    const data = snapshot.data.slice(offset, offset + this.#snapshotChunkChars);
    this.#send<InstallSnapshotRequest>({
      type: "installSnapshot",
      from: this.id,
      to: peer,
      term: this.#term,
      snapshot: { index: snapshot.index, term: snapshot.term },
      configuration: snapshot.configuration,
      offset,
      data,
      done: offset + data.length >= snapshot.data.length,
    });
    transfer.inflight = true;
    transfer.elapsed = 0;
  }

  /**
   * Heartbeats anchored at each follower's match index: they always pass
   * the consistency check, carry the commit index (the follower caps it at
   * the match index) and, during a ReadIndex round, its context.
   */
  #broadcastHeartbeat(context?: string): void {
    for (const peer of this.#progress.keys()) {
      this.#sendHeartbeat(peer, context);
    }
  }

  /**
   * An empty append at the follower's match index (at 0 when that entry is
   * compacted: it still passes the check, carrying no commit index).
   */
  #sendHeartbeat(peer: NodeId, context?: string): void {
    const match = this.#progress.get(peer)!.match;
    const anchor = this.#log.termAt(match) < 0 ? 0 : match;
    this.#sendAppendRequest(peer, anchor, [], context);
  }

  /** Queues an AppendEntries for `peer` after `prevLogIndex`. */
  #sendAppendRequest(
    peer: NodeId,
    prevLogIndex: number,
    entries: Entry[],
    context?: string,
  ): void {
    const message: AppendRequest = {
      type: "append",
      from: this.id,
      to: peer,
      term: this.#term,
      prevLogIndex,
      prevLogTerm: this.#log.termAt(prevLogIndex),
      entries,
      commit: this.#commit,
    };
    if (context !== undefined) message.context = context;
    this.#noteSentCommit(message);
    this.#send(message);
  }

  /** Records what commit index `message` tells its follower. */
  #noteSentCommit(message: AppendRequest): void {
    const progress = this.#progress.get(message.to);
    if (progress === undefined) return;
    progress.sentCommit = Math.max(
      progress.sentCommit,
      Math.min(message.commit, message.prevLogIndex + message.entries.length),
    );
  }

  /** Whether a follower has not been told the commit index it could learn. */
  #commitToAnnounce(): boolean {
    if (this.#role !== "leader") return false;
    for (const progress of this.#progress.values()) {
      if (this.#owesCommit(progress)) return true;
    }
    return false;
  }

  /**
   * Whether an empty append at the follower's match index would tell it a
   * commit index it has not been sent. (Not when that entry is compacted:
   * such a heartbeat carries no commit index; the follower learns it from
   * the snapshot or the appends it needs anyway.)
   */
  #owesCommit(progress: Progress): boolean {
    return Math.min(this.#commit, progress.match) > progress.sentCommit &&
      this.#log.termAt(progress.match) >= 0;
  }

  /**
   * Coalesced commit announcements, at ready() time: every append of this
   * term still waiting to go out carries the current commit index, and a
   * follower that has not been told the commit index (capped at its match)
   * and gets no append in this Ready gets one empty append. So however many
   * acknowledgements moved the commit index since the last Ready, each
   * follower gets at most one extra message, and learns it without waiting
   * for a heartbeat.
   */
  #announceCommit(): void {
    if (this.#role !== "leader") return;
    const appended = new Set<NodeId>();
    for (const message of this.#leaderMessages) {
      if (message.type !== "append" || message.term !== this.#term) continue;
      message.commit = this.#commit;
      this.#noteSentCommit(message);
      appended.add(message.to);
    }
    for (const [peer, progress] of this.#progress) {
      if (!appended.has(peer) && this.#owesCommit(progress)) {
        this.#sendHeartbeat(peer);
      }
    }
  }

  #onAppend(message: AppendRequest): void {
    this.#hearFromLeader(message.from);
    const reply = (
      success: boolean,
      index: number,
      conflictTerm = 0,
      conflictIndex = 0,
    ) =>
      this.#sendAppendResponse(message.from, success, index, {
        conflictTerm,
        conflictIndex,
        context: message.context,
      });
    if (message.prevLogIndex < this.#commit) {
      // A delayed message: everything up to our commit index agrees with
      // any current leader's log.
      return reply(true, this.#commit);
    }
    const term = this.#log.termAt(message.prevLogIndex);
    if (term !== message.prevLogTerm) {
      // Fast backtracking (Raft paper §5.3; dissertation §5.3): name the
      // conflicting term and the first index this log holds of it.
      if (term === MISSING_TERM) {
        return reply(false, message.prevLogIndex, 0, this.#log.lastIndex + 1);
      }
      let first = message.prevLogIndex;
      while (
        first - 1 > this.#log.snapshot.index &&
        this.#log.termAt(first - 1) === term
      ) {
        first--;
      }
      return reply(false, message.prevLogIndex, term, first);
    }
    let received: ConfigEntry[];
    try {
      received = configEntries(message.entries);
    } catch {
      return; // a malformed config entry: no correct leader sends one
    }
    this.#log.merge(message.entries, this.#commit);
    this.#syncConfiguration(received);
    const lastNew = message.prevLogIndex + message.entries.length;
    const commit = Math.min(message.commit, lastNew);
    if (commit > this.#commit) this.#commit = commit;
    reply(true, lastNew);
  }

  /**
   * Stops this core with {@link CommittedEntryConflictError} when one of
   * the `claims` (index and term, from a leader's append or snapshot)
   * contradicts an entry this node has committed. By Leader Completeness
   * (Raft paper §5.4.1) every leader of this node's term or a later one
   * holds the committed entries, and a leader never changes its own, so no
   * correct leader can send such a claim, late or not. (A leader of an
   * older term can, legitimately: those messages are stale and never
   * reach this check.) Indexes compacted here, or beyond the commit index,
   * are not compared.
   */
  #refuseCommittedConflict(
    message: AppendRequest | InstallSnapshotRequest,
    claims: readonly { index: number; term: number }[],
  ): void {
    for (const claim of claims) {
      if (claim.index > this.#commit) break;
      const local = this.#log.termAt(claim.index);
      if (local < 0 || local === claim.term) continue;
      this.#halted = new CommittedEntryConflictError({
        self: this.id,
        from: message.from,
        messageTerm: message.term,
        index: claim.index,
        localTerm: local,
        claimedTerm: claim.term,
      });
      throw this.#halted;
    }
  }

  /** Queues an AppendEntries reply (no conflict and no context by default). */
  #sendAppendResponse(
    to: NodeId,
    success: boolean,
    index: number,
    extra: {
      conflictTerm?: number;
      conflictIndex?: number;
      context?: string;
    } = {},
  ): void {
    const response: AppendResponse = {
      type: "appendResponse",
      from: this.id,
      to,
      term: this.#term,
      success,
      index,
      conflictTerm: extra.conflictTerm ?? 0,
      conflictIndex: extra.conflictIndex ?? 0,
    };
    if (extra.context !== undefined) response.context = extra.context;
    this.#send(response);
  }

  /** An append or snapshot chunk from the leader of this term. */
  #hearFromLeader(leader: NodeId): void {
    if (this.#role !== "follower") {
      this.#becomeFollower(this.#term, leader);
    }
    this.#leader = leader;
    this.#termLeader = leader;
    this.#preCandidate = false;
    this.#electionElapsed = 0;
  }

  /**
   * Where a rejected follower's log may match (Raft paper §5.3, last
   * paragraph): after this leader's last entry of `conflictTerm`, if it has
   * entries of that term; at `conflictIndex` otherwise.
   */
  #nextAfterConflict(message: AppendResponse): number {
    if (message.conflictTerm > 0) {
      let index = Math.min(message.index, this.#log.lastIndex);
      while (
        index > this.#log.snapshot.index &&
        this.#log.termAt(index) > message.conflictTerm
      ) {
        index--;
      }
      if (this.#log.termAt(index) === message.conflictTerm) return index + 1;
    }
    return message.conflictIndex;
  }

  #onAppendResponse(message: AppendResponse): void {
    if (this.#role !== "leader") return;
    const progress = this.#progress.get(message.from);
    if (progress === undefined) return;
    progress.recentActive = true;
    if (message.success && message.index > this.#log.lastIndex) {
      // Impossible in a correct cluster (corruption or a forged message):
      // trusting it would set next past the log, and every later append
      // would carry an unknown prevLogTerm. Verify from the last index.
      this.#stats.anomalies.ackBeyondLastIndex++;
      progress.become("probe");
      progress.next = this.#log.lastIndex + 1;
      // Probed at the next heartbeat, not at once: a follower whose log
      // runs past this leader's (it took a forged append, issue #16)
      // answers every probe so, and an immediate one per answer made the
      // two re-replicate in a tight loop.
      progress.probeSent = true;
      return;
    }
    if (message.success) {
      if (progress.onSuccess(message.index)) this.#maybeCommit();
      if (message.context !== undefined) {
        this.#ackRead(message.context, message.from);
      }
      // Fill the window: a follower far behind gets up to maxInflight
      // appends per round trip, not one.
      while (this.#sendAppend(message.from));
      if (
        message.from === this.#transferee &&
        progress.match === this.#log.lastIndex
      ) {
        // The transfer's target has caught up: it may take over now.
        this.#sendTimeoutNow(message.from);
      }
    } else if (
      progress.onReject(message.index, this.#nextAfterConflict(message))
    ) {
      this.#sendAppend(message.from);
    }
    if (
      !this.#isVoter(this.id) &&
      this.#commit >= (this.#configEntries.at(-1)?.index ?? 0)
    ) {
      // This leader's removal has committed (dissertation §4.2.2): tell
      // the remaining members the commit index (their next leader may need
      // it at once), then step down.
      this.#announceCommit();
      this.#becomeFollower(this.#term, null);
    }
  }

  /**
   * A follower receives one InstallSnapshot chunk (Raft paper §7, Figure
   * 13; chunked as in dissertation §5.3). Chunks must come in order from
   * offset 0; one at offset 0 starts the assembly again. A snapshot at or
   * below this node's commit index is not needed: it is answered as an
   * append at the commit index. On the last chunk the snapshot is
   * installed: the log is kept after its point if the entry there has the
   * snapshot's term (receiver rule 6), else discarded (rule 7); the commit
   * index moves to it and the next Ready carries it.
   */
  #onInstallSnapshot(message: InstallSnapshotRequest): void {
    this.#hearFromLeader(message.from);
    const point = message.snapshot;
    const reply = (success: boolean, offset: number) =>
      this.#send<InstallSnapshotResponse>({
        type: "installSnapshotResponse",
        from: this.id,
        to: message.from,
        term: this.#term,
        snapshotIndex: point.index,
        offset,
        success,
      });
    if (point.index <= this.#commit) {
      this.#incoming = null;
      this.#sendAppendResponse(message.from, true, this.#commit);
      return;
    }
    let incoming = this.#incoming;
    if (message.offset === 0) {
      incoming = {
        from: message.from,
        term: message.term,
        point: { index: point.index, term: point.term },
        chunks: [],
        length: 0,
      };
    } else if (
      incoming === null || incoming.from !== message.from ||
      incoming.term !== message.term || incoming.point.index !== point.index ||
      incoming.point.term !== point.term
    ) {
      this.#incoming = null;
      return reply(false, 0);
    } else if (message.offset < incoming.length) {
      return reply(true, incoming.length); // a duplicate chunk
    } else if (message.offset > incoming.length) {
      return reply(false, incoming.length); // a chunk was lost
    }
    if (incoming.length + message.data.length > this.#maxSnapshotChars) {
      this.#stats.anomalies.snapshotTooLarge++;
      this.#incoming = null;
      return reply(false, 0);
    }
    incoming.chunks.push(message.data);
    incoming.length += message.data.length;
    if (!message.done) {
      this.#incoming = incoming;
      return reply(true, incoming.length);
    }
    this.#incoming = null;
    const snapshot: Snapshot = {
      index: point.index,
      term: point.term,
      data: incoming.chunks.join(""),
      configuration: message.configuration,
    };
    if (this.#checkSnapshot?.(snapshot.data) != null) {
      // Nothing changes: the log, commit index and snapshot stay.
      this.#stats.anomalies.snapshotUnreadable++;
      return reply(false, 0);
    }
    this.#log.restore(point);
    // The snapshot's configuration is the one in force at its point; config
    // entries kept after the point (receiver rule 6) still follow it
    // (dissertation §5.1).
    this.#configEntries = this.#configEntries.filter((entry) =>
      entry.index > point.index
    );
    this.#baseConfiguration = message.configuration;
    this.#syncConfiguration([]);
    this.#commit = point.index;
    this.#snapshot = snapshot;
    this.#pendingSnapshot = snapshot;
    reply(true, incoming.length);
  }

  /** The leader hears how a follower takes the snapshot it sends. */
  #onInstallSnapshotResponse(message: InstallSnapshotResponse): void {
    if (this.#role !== "leader") return;
    const progress = this.#progress.get(message.from);
    if (progress === undefined) return;
    progress.recentActive = true;
    const transfer = progress.transfer;
    if (
      transfer === null || transfer.snapshot.index !== message.snapshotIndex
    ) {
      this.#stats.droppedStale++;
      return;
    }
    transfer.inflight = false;
    transfer.elapsed = 0;
    const length = transfer.snapshot.data.length;
    if (message.success && message.offset > length) {
      // A follower acknowledges at most what it was sent (§7): forged or
      // broken. Not taken as installed; the chunk goes again later.
      this.#stats.anomalies.snapshotAckBeyondEnd++;
      return;
    }
    if (!message.success) {
      // Start again where the follower says (0: from scratch), at the next
      // heartbeat, so a follower that keeps refusing is not flooded.
      transfer.offset = message.offset <= length ? message.offset : 0;
      return;
    }
    if (message.offset < length) {
      transfer.offset = message.offset;
      this.#sendSnapshotChunk(message.from, progress);
      return;
    }
    // Installed: the follower's log matches up to the snapshot's index.
    if (progress.onSuccess(transfer.snapshot.index)) this.#maybeCommit();
    while (this.#sendAppend(message.from));
  }

  /**
   * Advances the commit index to the highest index stored durably on a
   * quorum, if that entry is of the current term (Raft paper §5.4.2). The
   * leader's own copy counts only up to its persisted index (dissertation
   * §10.2.1: it writes its log in parallel with sending it).
   * @returns whether it advanced.
   */
  #maybeCommit(): boolean {
    // Only voters count; a leader removing itself does not (§4.2.2). The
    // leader's own copy counts once persisted (dissertation §10.2.1).
    const matches = this.#isVoter(this.id) ? [this.#log.stableIndex] : [];
    for (const [peer, progress] of this.#progress) {
      if (this.#isVoter(peer)) matches.push(progress.match);
    }
    matches.sort((a, b) => b - a);
    const quorumIndex = matches[this.#quorum - 1];
    if (
      quorumIndex > this.#commit &&
      this.#log.termAt(quorumIndex) === this.#term
    ) {
      this.#commit = quorumIndex;
      this.#releaseDeferredReads();
      return true;
    }
    return false;
  }

  /** Answers a message from an older term so its sender learns the new term. */
  #answerStale(message: Message): void {
    if (message.type === "append") {
      this.#sendAppendResponse(message.from, false, message.prevLogIndex);
    } else if (message.type === "installSnapshot") {
      this.#send<InstallSnapshotResponse>({
        type: "installSnapshotResponse",
        from: this.id,
        to: message.from,
        term: this.#term,
        snapshotIndex: message.snapshot.index,
        offset: 0,
        success: false,
      });
    } else if (message.type === "vote") {
      this.#send<VoteResponse>({
        type: "voteResponse",
        from: this.id,
        to: message.from,
        term: this.#term,
        granted: false,
      });
    }
  }

  // --- ReadIndex ---------------------------------------------------------

  #leaderRead(context: string, requester: NodeId): void {
    if (this.#log.termAt(this.#commit) !== this.#term) {
      // Until an entry of this term commits, the leader's commit index may
      // lag what earlier leaders committed (dissertation §6.4 step 1).
      this.#deferredReads.push({ context, requester });
      return;
    }
    if (this.#isVoter(this.id) && this.#quorum === 1) {
      this.#answerRead(context, requester, this.#commit);
      return;
    }
    // ReadIndex batching (dissertation §6.4): one heartbeat round at a
    // time. A read joins the newest round while its heartbeats have not
    // left (their acks come after the read arrived); otherwise it waits,
    // with every read arriving meanwhile, for the next round, which starts
    // once this one is confirmed. One round then confirms many reads
    // (the reads of this node and those its followers forward), instead
    // of a broadcast and its acks for each.
    const current = this.#pendingReads.at(-1);
    if (current !== undefined && this.#roundUnsent) {
      this.#pendingReads.push({
        ...current,
        context,
        requester,
        index: this.#commit,
      });
      return;
    }
    if (current !== undefined) {
      this.#nextReads.push({ context, requester });
      return;
    }
    this.#startReadRound([{ context, requester }]);
  }

  #startReadRound(reads: { context: string; requester: NodeId }[]): void {
    const round = `${this.#term}:${++this.#readSequence}`;
    const acks = new Set(this.#isVoter(this.id) ? [this.id] : []);
    for (const { context, requester } of reads) {
      this.#pendingReads.push({
        round,
        context,
        index: this.#commit,
        requester,
        acks,
      });
    }
    this.#roundUnsent = true;
    this.#broadcastHeartbeat(round);
  }

  #ackRead(round: string, from: NodeId): void {
    const position = this.#pendingReads.findLastIndex((r) => r.round === round);
    if (position === -1) return;
    const read = this.#pendingReads[position];
    if (this.#isVoter(from)) read.acks.add(from);
    if (read.acks.size < this.#quorum) return;
    // A quorum confirmed leadership after this read arrived, and so after
    // every earlier one too.
    for (const done of this.#pendingReads.splice(0, position + 1)) {
      this.#answerRead(done.context, done.requester, done.index);
    }
    if (this.#pendingReads.length === 0 && this.#nextReads.length > 0) {
      const next = this.#nextReads;
      this.#nextReads = [];
      this.#startReadRound(next);
    }
  }

  #answerRead(context: string, requester: NodeId, index: number): void {
    if (requester === this.id) {
      this.#readStates.push({ context, index });
    } else {
      this.#send<ReadIndexResponse>({
        type: "readIndexResponse",
        from: this.id,
        to: requester,
        term: this.#term,
        context,
        index,
      });
    }
  }

  #releaseDeferredReads(): void {
    const deferred = this.#deferredReads;
    this.#deferredReads = [];
    for (const read of deferred) this.#leaderRead(read.context, read.requester);
  }

  #onReadIndex(message: ReadIndexRequest): void {
    if (this.#role === "leader") {
      this.#leaderRead(message.context, message.from);
    }
  }

  #onReadIndexResponse(message: ReadIndexResponse): void {
    this.#readStates.push({ context: message.context, index: message.index });
  }

  #dropReads(): void {
    this.#pendingReads = [];
    this.#nextReads = [];
    this.#roundUnsent = false;
    this.#deferredReads = [];
  }

  /**
   * Queues a message: what a leader sends its followers goes to
   * `leaderMessages` (it may leave before this node's own writes are
   * durable), everything else to `messages`.
   */
  #send<M extends Message>(message: M): void {
    if (
      message.type === "append" || message.type === "installSnapshot" ||
      message.type === "timeoutNow"
    ) {
      this.#leaderMessages.push(message);
    } else {
      this.#messages.push(message);
    }
  }
}

/** A granted vote, or a successful append or snapshot answer. */
function grantsOrAcknowledges(message: Message): boolean {
  return (message.type === "voteResponse" && message.granted) ||
    ((message.type === "appendResponse" ||
      message.type === "installSnapshotResponse") && message.success);
}

function positive(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
  }
  return value;
}

function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

function sameSoftState(a: SoftState, b: SoftState): boolean {
  return a.term === b.term && a.role === b.role && a.leader === b.leader &&
    a.preCandidate === b.preCandidate;
}
