/**
 * Data shapes shared by the Raft core, its storage and its driver
 * (Ongaro & Ousterhout, "In Search of an Understandable Consensus
 * Algorithm", 2014, Figure 2).
 *
 * @module
 */

/** A node's id, unique within its cluster (e.g. `"n1"`). */
export type NodeId = string;

/** One log entry. Indexes start at 1; index 0 is the empty log's sentinel. */
export interface Entry {
  /** Position in the log, >= 1. */
  index: number;
  /** Term of the leader that created the entry. */
  term: number;
  /**
   * Opaque payload for the state machine. The empty string marks the entry a
   * new leader appends at the start of its term (Raft paper §8); state
   * machines skip it, and entries whose `type` is `"config"`.
   */
  data: string;
  /**
   * Absent for an ordinary entry. `"config"` marks a membership change
   * (Raft dissertation §4.1): `data` is then the JSON of the whole new
   * configuration, `{"voters":[...],"learners":[...]}` (see
   * `configuration.ts`). Every node uses the latest such entry in its log
   * from the moment it is appended, committed or not; state machines skip
   * these entries, as they skip the empty ones.
   */
  type?: "config";
}

/**
 * The members of a cluster at one point of its log.
 *
 * `voters` elect the leader and form quorums; `learners` receive the log
 * but never vote, never count towards a quorum and never stand for election
 * (dissertation §4.2.1, catching up new servers). A node is in at most one
 * of the two lists. The lists are sorted and free of duplicates when made
 * by `makeConfiguration` (`configuration.ts`).
 */
export interface Configuration {
  /** Voting members. Empty only for a node that is waiting to join. */
  readonly voters: readonly NodeId[];
  /** Non-voting members that receive the log. */
  readonly learners: readonly NodeId[];
  /**
   * Member id → its peer URL (`tcp://host:port` of its peer port), for the
   * members whose address the log carries: set by an `addLearner` or
   * `addVoter` change that gives `peerUrl`, or by the bootstrap
   * configuration (the `--peers` list); dropped with the member. Absent
   * when no member has one. Replicated with the configuration, so every
   * member (and a restart, and a snapshot) knows where the others are.
   */
  readonly peerUrls?: Readonly<Record<NodeId, string>>;
  /**
   * Member id → its client URL (where its registry API listens), for the
   * members whose change gave one; like {@link Configuration.peerUrls}.
   */
  readonly clientUrls?: Readonly<Record<NodeId, string>>;
}

/**
 * The state a node must persist before it answers any message
 * (Raft paper Figure 2, "Persistent state on all servers").
 */
export interface HardState {
  /** Latest term this node has seen, >= 0. */
  term: number;
  /** Candidate this node voted for in `term`, or null. */
  vote: NodeId | null;
  /** Highest log index known to be committed (kept so a restart can apply at once). */
  commit: number;
}

/** A RequestVote RPC (Raft paper §5.2, §5.4.1). */
export interface VoteRequest {
  /** Message kind. */
  type: "vote";
  /** Sender's id. */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** Sender's current term. */
  term: number;
  /** Index of the candidate's last log entry (0 when its log is empty). */
  lastLogIndex: number;
  /** Term of the candidate's last log entry (0 when its log is empty). */
  lastLogTerm: number;
  /**
   * Set when the candidate stands because the leader handed leadership to
   * it (a {@link TimeoutNowRequest}, Raft dissertation §3.10): voters then
   * grant it even though they heard from that leader within the minimum
   * election timeout (the exception to §4.2.3's rule the dissertation
   * makes for leadership transfer).
   */
  transfer?: true;
}

/** A RequestVote reply. */
export interface VoteResponse {
  /** Message kind. */
  type: "voteResponse";
  /** Sender's id. */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** Sender's current term. */
  term: number;
  /** Whether the sender voted for the candidate in `term`. */
  granted: boolean;
}

/**
 * A PreVote request (Raft dissertation §9.6): "would you vote for me in
 * `term`?", asked before a real election. The sender's own term stays one
 * below `term`, and no receiver changes its term or its vote because of it.
 */
export interface PreVoteRequest {
  /** Message kind. */
  type: "preVote";
  /** Sender's id. */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** The term the sender would stand in: its current term + 1. */
  term: number;
  /** Index of the sender's last log entry (0 when its log is empty). */
  lastLogIndex: number;
  /** Term of the sender's last log entry (0 when its log is empty). */
  lastLogTerm: number;
}

/**
 * A PreVote reply. A grant carries the request's `term`; a refusal carries
 * the sender's current term, so a stale pre-candidate learns a newer term.
 */
export interface PreVoteResponse {
  /** Message kind. */
  type: "preVoteResponse";
  /** Sender's id. */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** The request's term when granted; the sender's current term when refused. */
  term: number;
  /** Whether the sender would vote for the pre-candidate in that term. */
  granted: boolean;
}

/**
 * An AppendEntries RPC (Raft paper §5.3); with no entries it is a heartbeat.
 */
export interface AppendRequest {
  /** Message kind. */
  type: "append";
  /** Sender's id. */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** Sender's current term. */
  term: number;
  /** Index of the entry just before `entries` (0 for the log's start). */
  prevLogIndex: number;
  /** Term of the entry at `prevLogIndex` (0 for index 0). */
  prevLogTerm: number;
  /** Entries from `prevLogIndex + 1` on; empty for a heartbeat or probe. */
  entries: Entry[];
  /** Leader's commit index. */
  commit: number;
  /**
   * Set on the heartbeats of a ReadIndex round (Raft dissertation §6.4): the
   * follower echoes it so the leader can count a quorum for that read.
   */
  context?: string;
}

/**
 * An AppendEntries reply. On success `index` is the last index the follower
 * now holds in agreement with the leader. On a rejection `index` is the
 * `prevLogIndex` that was refused, and the follower says where its log
 * parts from the leader's (Raft paper §5.3, last paragraph; dissertation
 * §5.3): `conflictTerm` is the term of its entry at `prevLogIndex` (0 when
 * its log is shorter than that) and `conflictIndex` the first index it
 * holds of that term (its lastIndex + 1 when its log is shorter). The
 * leader then skips a whole term per round trip instead of one entry.
 */
export interface AppendResponse {
  /** Message kind. */
  type: "appendResponse";
  /** Sender's id. */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** Sender's current term. */
  term: number;
  /** Whether the follower accepted the append (its log matched at `prevLogIndex`). */
  success: boolean;
  /** On success the last index in agreement; on rejection the refused `prevLogIndex`. */
  index: number;
  /**
   * On rejection, the term of the follower's entry at `prevLogIndex`, or 0
   * when it holds no entry there; 0 on success.
   */
  conflictTerm: number;
  /**
   * On rejection, the first index the follower holds of `conflictTerm`, or
   * its lastIndex + 1 when `conflictTerm` is 0; 0 on success.
   */
  conflictIndex: number;
  /** Echo of the request's `context`, if it had one. */
  context?: string;
}

/**
 * The point a snapshot covers the log up to: the index and term of the last
 * entry it includes (Raft paper §7, "last included index/term").
 */
export interface SnapshotPoint {
  /** Last log index the snapshot includes, >= 0. */
  index: number;
  /** Term of the entry at `index` (0 for index 0). */
  term: number;
}

/**
 * An application snapshot: the state machine after applying every entry up
 * to `index` (Raft paper §7), serialised by the application as a string.
 */
export interface Snapshot extends SnapshotPoint {
  /** The serialised state machine; opaque to Raft. */
  data: string;
  /**
   * The configuration in force at `index` (Raft dissertation §5.1: a
   * snapshot records the latest configuration as of its last included
   * index, since the log entries that held it are discarded). Kept as an
   * opaque value: every field of it is stored and sent as it is.
   */
  configuration: Configuration;
}

/**
 * One chunk of an InstallSnapshot RPC (Raft paper §7, Figure 13;
 * dissertation §5.3, sent in chunks). The leader sends it to a follower
 * that needs entries the leader has compacted away. Chunks go one at a
 * time; the follower answers each with an {@link InstallSnapshotResponse}.
 */
export interface InstallSnapshotRequest {
  /** Message kind. */
  type: "installSnapshot";
  /** Sender's id (the leader). */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** The leader's current term. */
  term: number;
  /** The snapshot's last included index and term. */
  snapshot: SnapshotPoint;
  /** Position of `data` in the snapshot's data string, in UTF-16 code units. */
  offset: number;
  /** This chunk of the snapshot's data string. */
  data: string;
  /** Whether this is the last chunk. */
  done: boolean;
  /**
   * The configuration in force at the snapshot's index (dissertation
   * §5.1), carried by every chunk; the follower installs it with the last.
   */
  configuration: Configuration;
}

/**
 * A follower's answer to an {@link InstallSnapshotRequest} chunk. On success
 * `offset` is the length of data it now holds (after the last chunk, the
 * whole data's length: the snapshot is installed and durable); on failure
 * it is the offset it expects next (0: start again). A snapshot the
 * follower no longer needs (its index is at or below the follower's commit
 * index) is answered with a successful {@link AppendResponse} at the
 * follower's commit index instead.
 */
export interface InstallSnapshotResponse {
  /** Message kind. */
  type: "installSnapshotResponse";
  /** Sender's id. */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** Sender's current term. */
  term: number;
  /** Index of the snapshot being transferred (its `snapshot.index`). */
  snapshotIndex: number;
  /** Data held so far on success; the offset expected next on failure. */
  offset: number;
  /** Whether the chunk was taken. */
  success: boolean;
}

/**
 * A follower asks the leader for a read index on behalf of a client
 * (Raft dissertation §6.4, "ReadIndex").
 */
export interface ReadIndexRequest {
  /** Message kind. */
  type: "readIndex";
  /** Sender's id. */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** Sender's current term. */
  term: number;
  /** Caller's unique token for the read. */
  context: string;
}

/** The leader's answer: reads are linearizable once `index` is applied. */
export interface ReadIndexResponse {
  /** Message kind. */
  type: "readIndexResponse";
  /** Sender's id. */
  from: NodeId;
  /** Recipient's id. */
  to: NodeId;
  /** Sender's current term. */
  term: number;
  /** The request's `context`, echoed. */
  context: string;
  /** Leader's commit index when it received the read; serve once applied. */
  index: number;
}

/**
 * A leader handing leadership over (Raft dissertation §3.10): once the
 * target's log matches the leader's, the leader tells it to start an
 * election at once, as if its election timeout had fired, skipping PreVote.
 */
export interface TimeoutNowRequest {
  /** Message kind. */
  type: "timeoutNow";
  /** Sender's id (the leader). */
  from: NodeId;
  /** Recipient's id (the transfer's target). */
  to: NodeId;
  /** The leader's current term. */
  term: number;
}

/** Any message one Raft node sends another. */
export type Message =
  | VoteRequest
  | VoteResponse
  | PreVoteRequest
  | PreVoteResponse
  | AppendRequest
  | AppendResponse
  | ReadIndexRequest
  | ReadIndexResponse
  | TimeoutNowRequest
  | InstallSnapshotRequest
  | InstallSnapshotResponse;

/** The role a node plays in its current term (Raft paper §5.1). */
export type Role = "follower" | "candidate" | "leader";
