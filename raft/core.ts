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
 * reads (dissertation §6.4), leadership transfer (dissertation §3.10) and
 * single-server membership changes with learners (dissertation §4.1, §4.2;
 * see `configuration.ts`).
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
import { RaftLog } from "./log.ts";
import { Progress } from "./progress.ts";
import type {
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
  /** Persisted log from a previous run, contiguous from index 1. */
  entries?: readonly Entry[];
  /** Most entries in one append message. Default 64. */
  maxEntriesPerAppend?: number;
  /** Most unanswered appends per follower while pipelining. Default 64. */
  maxInflightAppends?: number;
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
 * A batch of work the driver must perform, in this order: persist
 * `hardState` and `entries` (fsync), send `messages`, apply
 * `committedEntries`, serve `readStates`; then call `advance(ready)`.
 */
export interface Ready {
  /** Changed term/vote/commit to persist, or null when unchanged. */
  hardState: HardState | null;
  /**
   * Entries to persist. If the first index is <= the last persisted index,
   * the persisted log from that index on is replaced (a conflict, §5.3).
   */
  entries: Entry[];
  /** Messages to send once `hardState` and `entries` are durable. */
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
 * One Raft node's consensus state. Deterministic: for the same config
 * (including `random`) and the same calls it produces the same Readys.
 *
 * @example A single-node cluster elects itself and commits a proposal
 * ```ts
 * import { RaftCore } from "./core.ts";
 * const core = new RaftCore({ id: "n1", voters: ["n1"] });
 * core.campaign();
 * core.propose("hello");
 * const ready = core.ready();
 * // persist ready.entries and ready.hardState, send ready.messages, then:
 * console.log(ready.committedEntries.map((e) => e.data)); // ["", "hello"]
 * core.advance(ready);
 * ```
 */
export class RaftCore {
  /** This node's id. */
  readonly id: NodeId;
  /** The latest configuration in the log, or `#baseConfiguration` (§4.1). */
  #configuration: Configuration;
  /** The configuration before the log's first entry (bootstrap or snapshot). */
  readonly #baseConfiguration: Configuration;
  /** The config entries in the log, oldest first. */
  #configEntries: ConfigEntry[] = [];
  #reportedConfiguration: Configuration;
  readonly #electionTicks: number;
  readonly #heartbeatTicks: number;
  readonly #random: () => number;
  readonly #maxEntriesPerAppend: number;
  readonly #maxInflight: number;
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
  #readStates: ReadState[] = [];
  #pendingReads: PendingRead[] = [];
  /** Reads received before this leader committed an entry of its term. */
  #deferredReads: { context: string; requester: NodeId }[] = [];
  #readSequence = 0;
  /** Target of a leadership transfer under way (dissertation §3.10), or null. */
  #transferee: NodeId | null = null;
  /** Leader ticks since the transfer began; it is abandoned at electionTicks. */
  #transferElapsed = 0;

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
   * state is inconsistent (entries not contiguous from 1, terms decreasing,
   * or commit beyond the log).
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
    this.#maxInflight = config.maxInflightAppends ?? 64;
    this.#checkQuorum = config.checkQuorum ?? true;
    this.#preVote = config.preVote ?? true;
    this.#log = new RaftLog(config.entries ?? []);
    this.#configEntries = configEntries(config.entries ?? []);
    this.#configuration = this.#configEntries.at(-1)?.configuration ??
      this.#baseConfiguration;
    this.#reportedConfiguration = this.#configuration;
    const hardState = config.hardState ?? { term: 0, vote: null, commit: 0 };
    if (hardState.commit > this.#log.lastIndex) {
      throw new RangeError(
        `persisted commit index ${hardState.commit} is beyond the last log index ${this.#log.lastIndex}`,
      );
    }
    this.#term = hardState.term;
    this.#vote = hardState.vote;
    this.#commit = hardState.commit;
    this.#persistedHardState = { ...hardState };
    this.#appliedCursor = 0;
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

  /** Advances logical time by one tick (the driver calls it every tickMs). */
  tick(): void {
    if (this.#role === "leader") {
      this.#tickLeader();
    } else {
      this.#electionElapsed++;
      if (
        this.#electionElapsed >= this.#randomizedElectionTimeout &&
        this.#isVoter(this.id) // learners and non-members never stand (§4.2.1)
      ) {
        if (this.#preVote) this.#preCampaign();
        else this.campaign();
      }
    }
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
    if (this.#role === "leader" || !this.#isVoter(this.id)) return;
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
    this.#votes = new Map([[this.id, true]]);
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
   */
  step(message: Message): void {
    if (
      message.to !== this.id ||
      // Non-members are ignored, except the leader this node follows (it
      // leads on while its own removal commits, dissertation §4.2.2); a
      // node in no configuration (joining, or removed) takes any leader.
      (isMember(this.#configuration, this.id) &&
        !isMember(this.#configuration, message.from) &&
        message.from !== this.#leader)
    ) return;
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
    if (message.term > this.#term) {
      if (message.type === "vote" && !message.transfer && this.#inLease()) {
        // A leader is alive as far as this node knows: a candidate that
        // cannot hear it must not depose it (dissertation §4.2.3), unless
        // that leader asked for this election (a leadership transfer).
        return;
      }
      const leader = message.type === "append" ? message.from : null;
      this.#becomeFollower(message.term, leader);
    } else if (message.term < this.#term) {
      this.#answerStale(message);
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
    }
  }

  /** Whether {@link ready} has any work. */
  hasReady(): boolean {
    return this.#messages.length > 0 ||
      this.#readStates.length > 0 ||
      this.#log.unstableEntries().length > 0 ||
      this.#commit > this.#appliedCursor ||
      !sameHardState(this.hardState, this.#persistedHardState) ||
      !sameSoftState(this.softState, this.#reportedSoftState) ||
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
    const hardState = this.hardState;
    const softState = this.softState;
    const ready: Ready = {
      hardState: sameHardState(hardState, this.#persistedHardState)
        ? null
        : hardState,
      entries: this.#log.unstableEntries(),
      messages: this.#messages,
      committedEntries: this.#log.slice(this.#appliedCursor + 1, this.#commit),
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
    this.#readStates = [];
    this.#reportedSoftState = softState;
    this.#outstanding = ready;
    return ready;
  }

  /**
   * Acknowledges that `ready` was fully handled: its entries and hard state
   * are durable and its committed entries applied.
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
    const applied = ready.committedEntries.at(-1);
    if (applied !== undefined) this.#appliedCursor = applied.index;
  }

  // --- roles -------------------------------------------------------------

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
          new Progress(this.#log.lastIndex, this.#maxInflight),
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
    }
    this.#role = "follower";
    this.#preCandidate = false;
    this.#leader = leader;
    this.#resetTimers();
    this.#progress.clear();
    this.#transferee = null;
    this.#dropReads();
  }

  #becomeCandidate(): void {
    this.#term++;
    this.#vote = this.id;
    this.#role = "candidate";
    this.#preCandidate = false;
    this.#leader = null;
    this.#resetTimers();
    this.#votes = new Map([[this.id, true]]);
    this.#dropReads();
  }

  #becomeLeader(): void {
    this.#role = "leader";
    this.#preCandidate = false;
    this.#leader = this.id;
    this.#resetTimers();
    this.#progress.clear();
    this.#transferee = null;
    for (const peer of membersOf(this.#configuration)) {
      if (peer === this.id) continue;
      this.#progress.set(
        peer,
        new Progress(this.#log.lastIndex + 1, this.#maxInflight),
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
    if (this.#role !== "candidate" || !this.#isVoter(message.from)) return;
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
   * Sends the follower its next append, unless it is paused.
   * @returns whether entries went out while pipelining (so another append
   * may follow at once).
   */
  #sendAppend(peer: NodeId): boolean {
    const progress = this.#progress.get(peer)!;
    if (progress.paused) return false;
    const prevLogIndex = progress.next - 1;
    const entries = this.#log.slice(
      progress.next,
      this.#log.lastIndex,
      this.#maxEntriesPerAppend,
    );
    if (entries.length === 0 && progress.state === "replicate") return false;
    this.#sendAppendRequest(peer, prevLogIndex, entries);
    progress.onSent(prevLogIndex + entries.length, entries.length);
    return entries.length > 0 && progress.state === "replicate";
  }

  /**
   * Heartbeats anchored at each follower's match index: they always pass
   * the consistency check, carry the commit index (the follower caps it at
   * the match index) and, during a ReadIndex round, its context.
   */
  #broadcastHeartbeat(context?: string): void {
    for (const [peer, progress] of this.#progress) {
      this.#sendAppendRequest(peer, progress.match, [], context);
    }
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
    const progress = this.#progress.get(peer);
    if (progress !== undefined) {
      progress.sentCommit = Math.max(
        progress.sentCommit,
        Math.min(this.#commit, prevLogIndex + entries.length),
      );
    }
    this.#send(message);
  }

  #onAppend(message: AppendRequest): void {
    if (this.#role !== "follower") {
      this.#becomeFollower(this.#term, message.from);
    }
    this.#leader = message.from;
    this.#preCandidate = false;
    this.#electionElapsed = 0;
    const reply = (success: boolean, index: number, rejectHint = 0) => {
      const response: AppendResponse = {
        type: "appendResponse",
        from: this.id,
        to: message.from,
        term: this.#term,
        success,
        index,
        rejectHint,
      };
      if (message.context !== undefined) response.context = message.context;
      this.#send(response);
    };
    if (message.prevLogIndex < this.#commit) {
      // A delayed message: everything up to our commit index agrees with
      // any current leader's log.
      return reply(true, this.#commit);
    }
    if (this.#log.termAt(message.prevLogIndex) !== message.prevLogTerm) {
      let hint = Math.min(message.prevLogIndex - 1, this.#log.lastIndex);
      while (hint > 0 && this.#log.termAt(hint) > message.prevLogTerm) hint--;
      return reply(false, message.prevLogIndex, Math.max(hint, 0));
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

  #onAppendResponse(message: AppendResponse): void {
    if (this.#role !== "leader") return;
    const progress = this.#progress.get(message.from);
    if (progress === undefined) return;
    progress.recentActive = true;
    if (message.success) {
      if (progress.onSuccess(message.index) && this.#maybeCommit()) {
        this.#broadcastHeartbeat();
      }
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
      // A follower whose ack came after the commit index moved (the
      // heartbeat that announced it was anchored below its match) learns
      // the new commit index now, not at the next heartbeat (as etcd's
      // raft does with Progress.CanBumpCommit).
      if (Math.min(this.#commit, progress.match) > progress.sentCommit) {
        this.#sendAppendRequest(message.from, progress.match, []);
      }
    } else if (progress.onReject(message.index, message.rejectHint)) {
      this.#sendAppend(message.from);
    }
    if (
      !this.#isVoter(this.id) &&
      this.#commit >= (this.#configEntries.at(-1)?.index ?? 0)
    ) {
      // This leader's removal has committed (dissertation §4.2.2).
      this.#becomeFollower(this.#term, null);
    }
  }

  /**
   * Advances the commit index to the highest index stored on a quorum, if
   * that entry is of the current term (Raft paper §5.4.2).
   * @returns whether it advanced.
   */
  #maybeCommit(): boolean {
    // Only voters count; a leader removing itself does not (§4.2.2).
    const matches = this.#isVoter(this.id) ? [this.#log.lastIndex] : [];
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
      this.#send<AppendResponse>({
        type: "appendResponse",
        from: this.id,
        to: message.from,
        term: this.#term,
        success: false,
        index: message.prevLogIndex,
        rejectHint: 0,
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
    const round = `${this.#term}:${++this.#readSequence}`;
    this.#pendingReads.push({
      round,
      context,
      index: this.#commit,
      requester,
      acks: new Set(this.#isVoter(this.id) ? [this.id] : []),
    });
    this.#broadcastHeartbeat(round);
  }

  #ackRead(round: string, from: NodeId): void {
    const position = this.#pendingReads.findIndex((r) => r.round === round);
    if (position === -1) return;
    const read = this.#pendingReads[position];
    if (this.#isVoter(from)) read.acks.add(from);
    if (read.acks.size < this.#quorum) return;
    // A quorum confirmed leadership after this read arrived, and so after
    // every earlier one too.
    for (const done of this.#pendingReads.splice(0, position + 1)) {
      this.#answerRead(done.context, done.requester, done.index);
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
    this.#deferredReads = [];
  }

  #send<M extends Message>(message: M): void {
    this.#messages.push(message);
  }
}

function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

function sameSoftState(a: SoftState, b: SoftState): boolean {
  return a.term === b.term && a.role === b.role && a.leader === b.leader &&
    a.preCandidate === b.preCandidate;
}
