/**
 * The one Raft driver: runs a pure {@link RaftCore} on storage, a network
 * and a clock that the caller provides, so the Deno node (`node.ts`: a
 * write-ahead log, real timers, TCP peers), the deterministic simulator
 * (`sim/`: simulated disks and network, a virtual clock) and the core's unit
 * tests all run the same loop.
 *
 * The loop follows the core's Ready contract (etcd's raft model): take a
 * {@link Ready}, persist its hard state and entries (and wait until they are
 * durable), send its messages, apply its committed entries, serve the reads
 * they complete, report the soft state, then `advance()`. It also holds what
 * waits on the log: pending proposals (resolved with the state machine's
 * result when their entry is applied in their term, rejected when a new
 * leader's entry replaced it or this node lost leadership), linearizable
 * reads (ReadIndex, Raft dissertation §6.4) and leadership-transfer waiters
 * (dissertation §3.10).
 *
 * Nothing here uses real time or I/O: storage completion is a callback, and
 * the driver runs its loop when the clock's `defer` says so. A simulator can
 * therefore run many drivers in one process, complete disk writes when it
 * chooses, crash a node with its unfinished writes lost, and replay a seed
 * exactly.
 *
 * @module
 */

import {
  type ConfChange,
  type Configuration,
  decodeConfiguration,
} from "./configuration.ts";
import {
  CommittedEntryConflictError,
  type RaftCore,
  type Ready,
  type SoftState,
} from "./core.ts";
import type {
  Entry,
  HardState,
  Message,
  NodeId,
  Snapshot,
  SnapshotPoint,
} from "./types.ts";

/** What one Ready, or one snapshot, asks storage to make durable. */
export interface StorageWrite {
  /** New term, vote and commit index, or undefined when unchanged. */
  hardState?: HardState;
  /**
   * Entries to append. When the first index is at or below the last stored
   * index, the stored log from that index on is replaced first (a conflict,
   * Raft paper §5.3).
   */
  entries: Entry[];
  /**
   * False when the write holds no entries and the hard state's term and
   * vote are unchanged (only the commit index moved, which Raft keeps in
   * volatile state): storage may then write it without an fsync and call
   * `done` at once (etcd's raft calls this MustSync). True (or absent)
   * otherwise.
   */
  mustSync?: boolean;
  /**
   * A snapshot to store (Raft paper §7): one this node took of its state
   * machine (the write then has no entries and no hard state), or one it
   * received from the leader (InstallSnapshot). Store it first, durably;
   * only then drop the log up to `compactTo`. A restart loads the newest
   * stored snapshot and the log after it.
   */
  snapshot?: Snapshot;
  /**
   * With `snapshot`: the point the stored log now starts after (its index
   * and term); the entries up to it are dropped. For a snapshot this node
   * took it is `snapshot.index - trailingEntries` or later (the trailing
   * window kept for slow followers); for a received one, the snapshot's
   * own point.
   */
  compactTo?: SnapshotPoint;
  /**
   * With a received snapshot: also drop every stored entry after
   * `snapshot.index` (Raft paper §7 receiver rule 7: the log disagreed with
   * the snapshot at its index). `entries`, if any, then start at
   * `snapshot.index + 1`.
   */
  discardLog?: boolean;
  /**
   * With `snapshot`: true when it was received from the leader
   * (InstallSnapshot), absent for one this node took.
   */
  received?: boolean;
}

/**
 * Durable storage of the hard state, the log and snapshots (Raft paper
 * Figure 2, "Persistent state"; §7). One write is in flight at a time: the
 * driver waits for `done` before the next `persist`.
 *
 * Order within one write: `snapshot` (durable), then the log marked as
 * starting after `compactTo` (durable), then `entries`, then `hardState`;
 * `done()` once all of it is durable. A crash between the first two steps
 * leaves a snapshot newer than the log's start, which is fine; the other
 * way round (a log starting after the newest snapshot) would lose state,
 * so never mark the log first.
 */
export interface RaftStorage {
  /**
   * Starts making `write` durable (written and fsynced) and calls `done()`
   * once it is, or `done(error)` when it failed (the driver then stops and
   * reports the error, since it can no longer promise durability). `done` may
   * be called before `persist` returns (in-memory storage), or later (a
   * write-ahead log; a simulated disk when the simulator decides).
   */
  persist(write: StorageWrite, done: (error?: unknown) => void): void;
}

/**
 * When and how the driver snapshots the application's state machine and
 * compacts the log (Raft paper §7; dissertation §5.1: each server
 * snapshots on its own, when its log grows past a threshold).
 */
export interface SnapshotPolicy {
  /**
   * Serialises the state machine as it is now: after applying every entry
   * up to the driver's applied index, and nothing later (the driver calls
   * it between two applies). The string is given back to `restore` after a
   * restart or on a follower that installs it.
   */
  take(): string;
  /**
   * Take a snapshot once this many entries were applied since the last
   * one. Default 10,000.
   */
  everyEntries?: number;
  /**
   * Or once this much entry data (UTF-16 code units of `Entry.data`, about
   * bytes for ASCII) was applied since the last one. Default 64 Mi
   * (67,108,864).
   */
  everyBytes?: number;
  /**
   * Once the last snapshot this node took held at least
   * {@linkcode AMORTIZE_FROM_CHARS} UTF-16 code units, the next one waits
   * (past `everyEntries`) until the entry data applied since is at least
   * this fraction of the last snapshot's size: `take()` costs time in
   * proportion to the state (it runs on the event loop, and the snapshot is
   * written and fsynced), so a large state re-serialised every
   * `everyEntries` entries cost more than the entries did. This keeps
   * snapshot work proportional to the data appended, and the log a restart
   * replays at most this fraction of the snapshot (plus `everyEntries`).
   * `everyBytes` still takes one regardless. 0 turns it off. Default 0.5.
   */
  growthFraction?: number;
  /**
   * Entries kept before the snapshot's index when the log is compacted, so
   * a follower slightly behind still gets appends rather than the whole
   * snapshot. Default 5,000.
   */
  trailingEntries?: number;
}

/**
 * Snapshot size (UTF-16 code units of `take()`'s string, about bytes) from
 * which {@link SnapshotPolicy.growthFraction} applies: a smaller state is
 * serialised in a few milliseconds, so snapshots of it follow
 * `everyEntries` alone.
 */
export const AMORTIZE_FROM_CHARS = 1 << 20;

/** Where the driver sends its messages. */
export interface RaftNetwork {
  /** Queues messages for their `to`; never blocks, may drop. */
  send(messages: readonly Message[]): void;
}

/** The driver's time and scheduling. */
export interface RaftClock {
  /** Calls `callback` once after `ms` milliseconds; returns a handle. */
  setTimeout(callback: () => void, ms: number): unknown;
  /** Cancels a timer `setTimeout` returned; a fired or unknown one is ignored. */
  clearTimeout(handle: unknown): void;
  /**
   * Calls `callback` soon, after the current call stack (real time:
   * `queueMicrotask`; a simulator: at the point of its step it chooses).
   * The driver runs its Ready loop there, so the work of several inputs is
   * batched into one Ready.
   */
  defer(callback: () => void): void;
}

/** Real time: the global timers and `queueMicrotask`. */
export const realClock: RaftClock = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as number),
  defer: (callback) => queueMicrotask(callback),
};

/** Settings of a {@link RaftDriver}. */
export interface RaftDriverOptions<R> {
  /** The consensus core to run; the driver owns it from now on. */
  core: RaftCore;
  /** Where hard state and entries are made durable. */
  storage: RaftStorage;
  /** Where messages go. */
  network: RaftNetwork;
  /** Timers for timeouts, and when to run the loop. */
  clock: RaftClock;
  /**
   * Applies one committed entry to the state machine and returns the result
   * the proposer receives. Called in log order, once per entry per driver
   * (a core rebuilt from storage re-emits its log from index 1). Entries
   * whose `data` is "" are the leaders' empty entries (Raft paper §8).
   * Membership change entries (`type: "config"`) are not passed here.
   */
  apply(entry: Entry): R;
  /**
   * Replaces the state machine's state with a snapshot's (Raft paper §7):
   * called with a snapshot this node received from the leader, once it is
   * durable and before the entries after it are applied (`apply` then goes
   * on from `snapshot.index + 1`). Required for a node that may fall behind
   * a compacted log; without it such a snapshot stops the driver
   * (`onFatal`). A core built from a stored snapshot expects the state
   * machine restored from it before the driver starts (the caller's part).
   */
  restore?(snapshot: Snapshot): void;
  /**
   * Automatic snapshots and log compaction; without it the log is never
   * compacted by this driver.
   */
  snapshot?: SnapshotPolicy;
  /** Called when the term, role or leader changes. */
  onSoftState?(state: SoftState): void;
  /**
   * Called when this node's configuration (voters and learners) changed:
   * a membership change entry reached its log, or a truncation undid one
   * (Raft dissertation §4.1: a node uses the latest configuration in its
   * log, committed or not). Called before the Ready's messages are sent,
   * so that a connection to a new member can be opened first.
   */
  onConfiguration?(configuration: Configuration): void;
  /**
   * Called once with each Ready, before it is handled (tracing; tests that
   * watch read states).
   */
  onReady?(ready: Ready): void;
  /**
   * Called when storage failed, `apply` threw, or the core found a safety
   * violation (a `CommittedEntryConflictError`: a leader's append
   * contradicts a committed entry, naming the index, both terms and the
   * sender): the driver has stopped taking work (pending proposals, reads
   * and transfers are rejected). Default: log to stderr.
   */
  onFatal?(error: unknown): void;
  /**
   * Prefix of the contexts that tell this driver's reads apart
   * (`<prefix>:<sequence>`). It must differ between two drivers of one node
   * id, a restarted node included: a leader's late answer to the previous
   * incarnation's read would otherwise complete a new read with an old
   * index. Default: the node id and 8 random bytes (hex).
   */
  readContextPrefix?: string;
  /** Default timeout of {@link RaftDriver.propose}, ms. Default 5000. */
  proposeTimeoutMs?: number;
  /** Default timeout of {@link RaftDriver.readIndex}, ms. Default 2000. */
  readTimeoutMs?: number;
  /**
   * How long a follower waits for the leader's answer to a ReadIndex
   * request before asking again (the request or the answer may have been
   * lost; later reads wait for this round), ms. Default 500.
   */
  readRetryMs?: number;
  /** Default timeout of {@link RaftDriver.transferLeadership}, ms. Default 2000. */
  transferTimeoutMs?: number;
}

/** Thrown when a proposal or read cannot complete; the caller may retry. */
export class RaftUnavailableError extends Error {
  /**
   * For a proposal: `false` when its entry will never be applied (it was
   * not appended, or a new leader's entry replaced it), `"unknown"` when it
   * may still commit (a timeout, leadership lost, the node stopped while
   * it was pending). Undefined for reads and leadership transfers.
   */
  readonly applied: false | "unknown" | undefined;
  /**
   * `"storageFailed"` when the node stopped because its storage could not
   * persist a write (disk full, read-only, I/O error): `cause` is the
   * storage's error, whose message names the file and what to do, and the
   * other members may still serve. Undefined otherwise.
   */
  readonly reason: "storageFailed" | undefined;

  /**
   * Makes the error.
   *
   * @param message what failed and what to do.
   * @param applied whether the proposal may still take effect (see
   * {@link RaftUnavailableError.applied}).
   * @param failure what stopped the node, if storage did (see
   * {@link RaftUnavailableError.reason}).
   */
  constructor(
    message: string,
    applied?: false | "unknown",
    failure?: { reason: "storageFailed"; cause: unknown },
  ) {
    super(
      message,
      failure === undefined ? undefined : { cause: failure.cause },
    );
    this.name = "RaftUnavailableError";
    this.applied = applied;
    this.reason = failure?.reason;
  }
}

interface PendingProposal {
  term: number;
  resolve(result: unknown): void;
  reject(error: Error): void;
  timer: unknown;
}

interface PendingRead {
  index: number | null;
  /** Whether a round carrying this read was sent to a leader. */
  asked: boolean;
  resolve(index: number): void;
  reject(error: Error): void;
  timer: unknown;
}

/**
 * One ReadIndex request (one context) that carries every read that was
 * waiting when it was sent (dissertation §6.4, batched as etcd's server
 * does).
 */
interface ReadRound {
  context: string;
  reads: Set<PendingRead>;
  /** Term and leader the round was last sent to. */
  term: number;
  leader: NodeId;
  /** Timer that asks again, on a follower; undefined on the leader. */
  retry: unknown;
}

interface TransferWaiter {
  check(state: SoftState): void;
  fail(error: Error): void;
}

/**
 * Runs one {@link RaftCore} on the given storage, network and clock. Feed it
 * ticks ({@link tick}) and peers' messages ({@link step}); ask it to
 * {@link propose}, {@link readIndex} and {@link transferLeadership}.
 *
 * @example A single node on in-memory storage
 * ```ts
 * import assert from "node:assert/strict";
 * import { RaftCore } from "./core.ts";
 * import { RaftDriver, realClock } from "./driver.ts";
 * const driver = new RaftDriver({
 *   core: new RaftCore({ id: "n1", voters: ["n1"] }),
 *   storage: { persist: (_write, done) => done() },
 *   network: { send: () => {} },
 *   clock: realClock,
 *   apply: (entry) => entry.data.length,
 * });
 * driver.core.campaign();
 * assert.equal(await driver.propose("hello"), 5);
 * await driver.stop();
 * ```
 */
export class RaftDriver<R = unknown> {
  /** The core being driven (read its state; feed it through the driver). */
  readonly core: RaftCore;
  readonly #options: RaftDriverOptions<R>;
  readonly #proposals = new Map<number, PendingProposal>();
  /** Every read not served yet: waiting, in the round, or to be applied. */
  readonly #reads = new Set<PendingRead>();
  /** Reads that wait for the next round. */
  #waitingReads = new Set<PendingRead>();
  /** The ReadIndex round asked and not answered yet, or null. */
  #readRound: ReadRound | null = null;
  readonly #transfers = new Set<TransferWaiter>();
  readonly #readPrefix: string;
  #readSequence = 0;
  #applied: number;
  #scheduled = false;
  /** A Ready (or a snapshot taken here) whose write is in flight, or null. */
  #persisting: Ready | Snapshot | null = null;
  /** The storage error that stopped the driver, or null. */
  #storageFailure: unknown = null;
  /** Index of the newest durable snapshot (0: none). */
  #snapshotIndex: number;
  /** Entries and entry data applied since that snapshot. */
  #sinceSnapshot = { entries: 0, chars: 0 };
  /** Size of the last snapshot this node took or installed (0: none yet). */
  #lastSnapshotChars = 0;
  readonly #policy:
    | (Required<Omit<SnapshotPolicy, "take">> & { take(): string })
    | null;
  #idle: (() => void) | null = null;
  #stopped = false;
  /** Term and vote last handed to storage (to tell MustSync). */
  #storedTerm: number;
  #storedVote: NodeId | null;

  /**
   * Starts driving `options.core`; the first Ready is handled at the
   * clock's next `defer`.
   */
  constructor(options: RaftDriverOptions<R>) {
    this.#options = options;
    this.core = options.core;
    this.#readPrefix = options.readContextPrefix ??
      `${options.core.id}.${randomHex(8)}`;
    this.#storedTerm = options.core.hardState.term;
    this.#storedVote = options.core.hardState.vote;
    this.#applied = options.core.snapshotPoint.index;
    this.#snapshotIndex = options.core.snapshotPoint.index;
    const policy = options.snapshot;
    this.#policy = policy === undefined ? null : {
      take: () => policy.take(),
      everyEntries: atLeastOne(policy.everyEntries ?? 10_000, "everyEntries"),
      everyBytes: atLeastOne(policy.everyBytes ?? 64 << 20, "everyBytes"),
      growthFraction: fraction(policy.growthFraction ?? 0.5),
      trailingEntries: count(
        policy.trailingEntries ?? 5_000,
        "trailingEntries",
      ),
    };
    this.#schedule();
  }

  /**
   * Highest log index applied to the state machine: by this driver, or by
   * the snapshot the core started from.
   */
  get appliedIndex(): number {
    return this.#applied;
  }

  /**
   * Index of the newest durable snapshot: taken here, installed from the
   * leader, or the one the core started from; 0 for none.
   */
  get snapshotIndex(): number {
    return this.#snapshotIndex;
  }

  /** True once {@link stop} was called or a fatal error stopped the driver. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** True while a write is in flight to storage. */
  get persisting(): boolean {
    return this.#persisting !== null;
  }

  /** Advances the core's logical clock by one tick (Raft paper §5.2 timeouts). */
  tick(): void {
    if (this.#stopped) return;
    try {
      this.core.tick();
    } catch (error) {
      if (!(error instanceof CommittedEntryConflictError)) throw error;
      this.#fatal(error);
      return;
    }
    this.#schedule();
  }

  /**
   * The transport's connection to peer `id` ended from the other side; a
   * follower of `id` stands for election soon (see
   * {@linkcode RaftCore.leaderConnectionLost}).
   */
  peerConnectionLost(id: NodeId): void {
    if (this.#stopped) return;
    this.core.leaderConnectionLost(id);
    this.#schedule();
  }

  /**
   * Delivers messages from peers to the core. The caller vouches for them:
   * validated and sent by the member their `from` names.
   */
  step(messages: readonly Message[]): void {
    if (this.#stopped) return;
    try {
      for (const message of messages) this.core.step(message);
    } catch (error) {
      // A safety violation: the core halted, and this node must not go on
      // with a log it cannot trust. (Anything else is thrown to the caller
      // as before: one bad message does not stop a node.)
      if (!(error instanceof CommittedEntryConflictError)) throw error;
      this.#fatal(error);
      return;
    }
    this.#schedule();
  }

  /**
   * Replicates `data` and resolves with the state machine's result once the
   * entry is committed and applied here.
   *
   * @param options.timeoutMs give up after this long (default
   * `proposeTimeoutMs`, 5000 ms); the entry may still commit later.
   * @throws {import("./core.ts").NotLeaderError} (rejects at once) when this node is not the
   * leader (a `LeadershipTransferError` while it hands leadership over).
   * @throws {RaftUnavailableError} at once when this node loses leadership
   * before the entry is applied (it may still commit: retry if the write is
   * idempotent), when a new leader's entry replaced it, when the timeout
   * passed, or when the driver stopped.
   */
  propose(data: string, options: { timeoutMs?: number } = {}): Promise<R> {
    if (this.#stopped) return Promise.reject(this.#stoppedError(false));
    let index: number, term: number;
    try {
      ({ index, term } = this.core.propose(data));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#track<R>(index, term, options.timeoutMs);
  }

  /**
   * Proposes a membership change (Raft dissertation §4.1: one server at a
   * time; learners §4.2.1; see `RaftCore.proposeConfChange`) and resolves
   * with the new configuration once its entry is committed and applied
   * here. The change takes effect on each member as soon as the entry
   * reaches its log; the state machine's `apply` never sees it.
   *
   * @param options.timeoutMs give up after this long (default
   * `proposeTimeoutMs`, 5000 ms); the change may still commit later.
   * @throws {import("./core.ts").NotLeaderError} (rejects at once) on a
   * non-leader, or as `LeadershipTransferError` during a transfer.
   * @throws {import("./configuration.ts").ConfChangeError} (rejects at
   * once) when the change is refused (another one is pending, nothing
   * changes, more than one voter changes, ...).
   * @throws {RaftUnavailableError} as for {@link propose}.
   */
  proposeConfChange(
    change: ConfChange,
    options: { timeoutMs?: number } = {},
  ): Promise<Configuration> {
    if (this.#stopped) return Promise.reject(this.#stoppedError(false));
    let index: number, term: number;
    try {
      ({ index, term } = this.core.proposeConfChange(change));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#track<Configuration>(index, term, options.timeoutMs);
  }

  /** Waits for the entry at `index` of `term` to be applied. */
  #track<T>(index: number, term: number, timeoutMs?: number): Promise<T> {
    const ms = timeoutMs ?? this.#options.proposeTimeoutMs ?? 5000;
    // Registered before anything that may let the Ready loop run (a timer
    // call can drain microtasks): the entry may be applied at once.
    const promise = new Promise<T>((resolve, reject) => {
      this.#proposals.set(index, {
        term,
        resolve: resolve as (result: unknown) => void,
        reject,
        timer: undefined,
      });
    });
    const proposal = this.#proposals.get(index)!;
    proposal.timer = this.#options.clock.setTimeout(() => {
      if (this.#proposals.get(index) !== proposal) return;
      this.#proposals.delete(index);
      proposal.reject(
        new RaftUnavailableError(
          `proposal at index ${index} not committed within ${ms} ms; it may still commit, retry if the write is idempotent`,
          "unknown",
        ),
      );
    }, ms);
    this.#schedule();
    return promise;
  }

  /**
   * A linearizable read barrier (ReadIndex, Raft dissertation §6.4):
   * resolves with a read index once this node's state machine has applied
   * it, so a read served then reflects every write committed before the
   * call. While no leader is known it waits for one; when the leader
   * changes it asks the new one, all within the timeout.
   *
   * @param options.timeoutMs give up after this long (default
   * `readTimeoutMs`, 2000 ms).
   * @returns the read index (a log index, already applied here).
   * @throws {RaftUnavailableError} when no leader confirmed in time, or the
   * driver stopped.
   */
  readIndex(options: { timeoutMs?: number } = {}): Promise<number> {
    if (this.#stopped) return Promise.reject(this.#stoppedError());
    const timeoutMs = options.timeoutMs ?? this.#options.readTimeoutMs ??
      2000;
    let read!: PendingRead;
    const promise = new Promise<number>((resolve, reject) => {
      read = { index: null, asked: false, resolve, reject, timer: undefined };
    });
    this.#reads.add(read);
    this.#waitingReads.add(read);
    read.timer = this.#options.clock.setTimeout(() => {
      if (!this.#reads.delete(read)) return;
      this.#waitingReads.delete(read);
      this.#readRound?.reads.delete(read);
      read.reject(
        new RaftUnavailableError(
          read.asked
            ? `the leader did not confirm the read within ${timeoutMs} ms; retry`
            : `no leader was elected within ${timeoutMs} ms to confirm the read; retry`,
        ),
      );
    }, timeoutMs);
    this.#startReadRound();
    return promise;
  }

  /**
   * Hands leadership to another voter (Raft dissertation §3.10, see
   * {@link RaftCore.transferLeadership}) and waits until another node
   * leads. Meanwhile proposals fail at once with `LeadershipTransferError`.
   *
   * @param options.target the voter to hand over to; default the most up
   * to date.
   * @param options.timeoutMs give up after this long (default
   * `transferTimeoutMs`, 2000 ms).
   * @returns the new leader's id (this node's own id when it is the only
   * voter named).
   * @throws {import("./core.ts").NotLeaderError} (rejects at once) when this node is not the
   * leader.
   * @throws {RangeError} (rejects at once) when `target` is not a voter or
   * there is no other voter.
   * @throws {RaftUnavailableError} when no other node took over in time, or
   * the driver stopped.
   */
  transferLeadership(
    options: { target?: NodeId; timeoutMs?: number } = {},
  ): Promise<NodeId> {
    if (this.#stopped) return Promise.reject(this.#stoppedError());
    let target: NodeId;
    try {
      target = this.core.transferLeadership(options.target);
    } catch (error) {
      return Promise.reject(error);
    }
    if (target === this.core.id) return Promise.resolve(target);
    const timeoutMs = options.timeoutMs ?? this.#options.transferTimeoutMs ??
      2000;
    const clock = this.#options.clock;
    const armed: { timer?: unknown } = {};
    let settle!: { resolve(leader: NodeId): void; reject(error: Error): void };
    const promise = new Promise<NodeId>((resolve, reject) => {
      settle = { resolve, reject };
    });
    const waiter: TransferWaiter = {
      check: (state) => {
        if (state.leader === null || state.leader === this.core.id) return;
        this.#transfers.delete(waiter);
        clock.clearTimeout(armed.timer);
        settle.resolve(state.leader);
      },
      fail: (error) => {
        this.#transfers.delete(waiter);
        clock.clearTimeout(armed.timer);
        settle.reject(error);
      },
    };
    // Registered before the timer call, which may let the Ready loop run.
    this.#transfers.add(waiter);
    armed.timer = clock.setTimeout(() =>
      waiter.fail(
        new RaftUnavailableError(
          `no other node took over leadership (to ${target}) within ${timeoutMs} ms`,
        ),
      ), timeoutMs);
    this.#schedule();
    return promise;
  }

  /**
   * Runs the Ready loop now, until nothing is ready or a write is in flight.
   * The clock's `defer` calls it; a test harness may call it directly.
   */
  process(): void {
    this.#scheduled = false;
    try {
      while (
        !this.#stopped && this.#persisting === null && this.core.hasReady()
      ) {
        this.#handle(this.core.ready());
      }
    } catch (error) {
      this.#fatal(error);
    }
  }

  /**
   * Stops taking work and rejects pending proposals, reads and transfers
   * with `RaftUnavailableError`; resolves once no write is in flight (a
   * write in flight still completes; what it made durable stays). Safe to
   * call twice. Closing storage and network is the caller's part.
   */
  stop(): Promise<void> {
    if (!this.#stopped) {
      this.#stopped = true;
      this.#rejectAll(stoppedError("unknown"));
    }
    if (this.#persisting === null) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const previous = this.#idle;
      this.#idle = () => {
        previous?.();
        resolve();
      };
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#stopped) return;
    this.#scheduled = true;
    this.#options.clock.defer(() => this.process());
  }

  /** One Ready: persist → send → apply → serve reads → soft state → advance. */
  #handle(ready: Ready): void {
    this.#options.onReady?.(ready);
    if (ready.snapshot !== null && this.#options.restore === undefined) {
      throw new Error(
        `received a snapshot at index ${ready.snapshot.index} from the leader, but no restore() was given to install it; ` +
          "pass RaftDriverOptions.restore",
      );
    }
    if (ready.configuration !== null) {
      // First, so that connections to new members exist for what follows.
      this.#options.onConfiguration?.(ready.configuration);
    }
    // Dissertation §10.2.1: a leader's appends to followers go out now,
    // in parallel with its own write (the core counts its own copy toward
    // commit only once advance() says it is durable); every other message
    // waits for durability below.
    if (ready.leaderMessages.length > 0) {
      this.#options.network.send(ready.leaderMessages);
    }
    if (
      ready.hardState === null && ready.entries.length === 0 &&
      ready.snapshot === null
    ) {
      this.#afterPersist(ready);
      return;
    }
    const hard = ready.hardState;
    const write: StorageWrite = {
      hardState: hard ?? undefined,
      entries: ready.entries,
      mustSync: ready.entries.length > 0 || ready.snapshot !== null ||
        (hard !== null &&
          (hard.term !== this.#storedTerm || hard.vote !== this.#storedVote)),
    };
    if (hard !== null) {
      this.#storedTerm = hard.term;
      this.#storedVote = hard.vote;
    }
    if (ready.snapshot !== null) {
      const { index, term } = ready.snapshot;
      write.snapshot = ready.snapshot;
      write.received = true;
      write.compactTo = { index, term };
      // Receiver rule 7 (Raft paper §7): the core kept no entry after the
      // point as persisted, so whatever storage holds there is replaced.
      write.discardLog = this.core.stableIndex === index;
    }
    this.#write(ready, write, () => this.#afterPersist(ready));
  }

  /**
   * Hands `write` to storage with `owner` as the write in flight, and runs
   * `then` once it is durable (at once for synchronous storage).
   */
  #write(owner: Ready | Snapshot, write: StorageWrite, then: () => void): void {
    this.#persisting = owner;
    let returned = false, durableEarly = false;
    this.#options.storage.persist(write, (error) => {
      if (this.#persisting !== owner) return; // called twice: ignore
      this.#persisting = null;
      if (error !== undefined) {
        this.#fatal(error, true);
      } else if (this.#stopped) {
        // Durable, but nobody listens: send and apply nothing.
      } else if (!returned) {
        durableEarly = true; // synchronous storage: continue below
        return;
      } else {
        try {
          then();
        } catch (failure) {
          this.#fatal(failure);
        }
        this.process();
      }
      if (this.#persisting !== null) return; // `then` started another write
      const idle = this.#idle;
      this.#idle = null;
      idle?.();
    });
    returned = true;
    if (durableEarly) then();
  }

  #afterPersist(ready: Ready): void {
    this.#options.network.send(ready.messages);
    if (ready.snapshot !== null) {
      this.#options.restore!(ready.snapshot);
      this.#applied = ready.snapshot.index;
      this.#snapshotIndex = ready.snapshot.index;
      this.#sinceSnapshot = { entries: 0, chars: 0 };
      this.#lastSnapshotChars = ready.snapshot.data.length;
    }
    for (const entry of ready.committedEntries) this.#apply(entry);
    const round = this.#readRound;
    if (
      round !== null &&
      ready.readStates.some((state) => state.context === round.context)
    ) {
      const { index } = ready.readStates.find((state) =>
        state.context === round.context
      )!;
      for (const read of round.reads) read.index = index;
      this.#cancelRetry(round);
      this.#readRound = null;
    }
    this.#serveReads();
    this.#startReadRound();
    if (ready.softState !== null) this.#onSoftState(ready.softState);
    this.core.advance(ready);
    this.#maybeSnapshot();
  }

  /**
   * Takes a snapshot at the applied index when the policy's threshold is
   * passed (Raft paper §7), stores it, and only once it is durable hands it
   * to the core (which may then send it to followers) and compacts the log
   * to `trailingEntries` before it.
   */
  #maybeSnapshot(): void {
    const policy = this.#policy;
    if (policy === null || this.#persisting !== null || this.#stopped) return;
    const since = this.#sinceSnapshot;
    if (
      since.entries < policy.everyEntries && since.chars < policy.everyBytes
    ) return;
    if (
      since.chars < policy.everyBytes &&
      this.#lastSnapshotChars >= AMORTIZE_FROM_CHARS &&
      since.chars < policy.growthFraction * this.#lastSnapshotChars
    ) return;
    const core = this.core;
    const index = this.#applied;
    const start = core.snapshotPoint;
    if (index <= this.#snapshotIndex || index <= start.index) return;
    const snapshot: Snapshot = {
      index,
      term: core.entryAt(index)!.term,
      data: policy.take(),
      configuration: core.configurationAt(index),
    };
    this.#lastSnapshotChars = snapshot.data.length;
    const floor = Math.max(index - policy.trailingEntries, start.index);
    const compactTo: SnapshotPoint = floor === start.index
      ? start
      : { index: floor, term: core.entryAt(floor)!.term };
    this.#sinceSnapshot = { entries: 0, chars: 0 };
    this.#write(snapshot, { entries: [], snapshot, compactTo }, () => {
      this.#snapshotIndex = Math.max(this.#snapshotIndex, index);
      // A snapshot installed from the leader meanwhile supersedes this one.
      if (core.snapshotPoint.index > index) return;
      core.snapshotTaken(snapshot, { compactTo: compactTo.index });
    });
  }

  #apply(entry: Entry): void {
    const result = entry.type === "config"
      ? decodeConfiguration(entry.data)
      : this.#options.apply(entry);
    this.#applied = entry.index;
    this.#sinceSnapshot.entries++;
    this.#sinceSnapshot.chars += entry.data.length;
    const proposal = this.#proposals.get(entry.index);
    if (proposal === undefined) return;
    this.#proposals.delete(entry.index);
    this.#options.clock.clearTimeout(proposal.timer);
    if (proposal.term === entry.term) {
      proposal.resolve(result);
    } else {
      proposal.reject(
        new RaftUnavailableError(
          `proposal at index ${entry.index} was replaced by a new leader's entry; retry`,
          false,
        ),
      );
    }
  }

  #serveReads(): void {
    for (const read of this.#reads) {
      if (read.index !== null && read.index <= this.#applied) {
        this.#reads.delete(read);
        this.#options.clock.clearTimeout(read.timer);
        read.resolve(read.index);
      }
    }
  }

  /**
   * ReadIndex batching (dissertation §6.4; etcd's server does the same):
   * at most one round is asked at a time, and it carries every read that
   * was waiting when it was sent; reads arriving meanwhile wait for the
   * next round, which starts once this one is answered. So under load one
   * leader confirmation (one heartbeat round) serves many reads, not one
   * each. A read may not join a round already sent: that round's
   * confirmation may have begun before the read arrived.
   */
  #startReadRound(): void {
    if (this.#readRound !== null || this.#waitingReads.size === 0) return;
    const { term, leader } = this.core.softState;
    if (leader === null) return; // asked once a leader is known
    this.#readRound = {
      context: `${this.#readPrefix}:${++this.#readSequence}`,
      reads: this.#waitingReads,
      term,
      leader,
      retry: undefined,
    };
    this.#waitingReads = new Set();
    this.#askRound();
  }

  /**
   * Sends the round to the current leader, if one is known. A follower
   * asks again (the same context) every `readRetryMs` until answered: its
   * request or the answer may be lost, and every later read waits on it.
   */
  #askRound(): void {
    const round = this.#readRound;
    if (round === null) return;
    this.#cancelRetry(round);
    const { term, leader } = this.core.softState;
    if (leader === null) return;
    round.term = term;
    round.leader = leader;
    for (const read of round.reads) read.asked = true;
    this.core.readIndex(round.context);
    if (leader !== this.core.id) {
      round.retry = this.#options.clock.setTimeout(
        () => this.#askRound(),
        this.#options.readRetryMs ?? 500,
      );
    }
    this.#schedule();
  }

  #cancelRetry(round: ReadRound): void {
    if (round.retry !== undefined) {
      this.#options.clock.clearTimeout(round.retry);
    }
    round.retry = undefined;
  }

  #onSoftState(state: SoftState): void {
    // A leader that lost leadership (or led again in a later term, having
    // lost it in between) fails its pending proposals now: their entries
    // may still commit under the next leader, or be replaced; the proposer
    // learns which only by retrying (idempotently) or reading.
    for (const [index, proposal] of this.#proposals) {
      if (state.role === "leader" && state.term === proposal.term) continue;
      this.#proposals.delete(index);
      this.#options.clock.clearTimeout(proposal.timer);
      proposal.reject(
        new RaftUnavailableError(
          `leadership lost (term ${proposal.term}) before the proposal at index ${index} committed; it may still commit, retry if the write is idempotent`,
          "unknown",
        ),
      );
    }
    // Reads waiting for a leader's confirmation go to the new leader: the
    // old one (or the core, on a change of role) dropped them. An answer the
    // old leader still sends is valid too: it confirmed its leadership after
    // the read began.
    const round = this.#readRound;
    if (
      round !== null &&
      (round.term !== state.term || round.leader !== state.leader)
    ) {
      this.#askRound();
    }
    this.#startReadRound();
    for (const transfer of [...this.#transfers]) transfer.check(state);
    this.#options.onSoftState?.(state);
  }

  #rejectAll(error: Error): void {
    const clock = this.#options.clock;
    for (const proposal of this.#proposals.values()) {
      clock.clearTimeout(proposal.timer);
      proposal.reject(error);
    }
    this.#proposals.clear();
    for (const read of this.#reads) {
      clock.clearTimeout(read.timer);
      read.reject(error);
    }
    this.#reads.clear();
    this.#waitingReads.clear();
    if (this.#readRound !== null) this.#cancelRetry(this.#readRound);
    this.#readRound = null;
    for (const transfer of [...this.#transfers]) transfer.fail(error);
  }

  /**
   * What a call gets once the driver stopped: after a storage failure, the
   * storage's error (file, errno, what to do) in the message and as cause.
   */
  #stoppedError(applied?: false | "unknown"): RaftUnavailableError {
    const failure = this.#storageFailure;
    if (failure === null) return stoppedError(applied);
    const detail = failure instanceof Error ? failure.message : String(failure);
    return new RaftUnavailableError(
      `the Raft node stopped: its storage failed: ${detail}`,
      applied,
      { reason: "storageFailed", cause: failure },
    );
  }

  #fatal(error: unknown, storage = false): void {
    if (this.#stopped) return;
    this.#stopped = true;
    if (storage) this.#storageFailure = error ?? new Error("storage failed");
    this.#rejectAll(this.#stoppedError("unknown"));
    const onFatal = this.#options.onFatal ??
      ((e: unknown) => console.error("raft: driver failed, node stopped:", e));
    onFatal(error);
  }
}

function atLeastOne(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(
      `snapshot.${name} must be an integer >= 1, got ${value}`,
    );
  }
  return value;
}

function count(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(
      `snapshot.${name} must be an integer >= 0, got ${value}`,
    );
  }
  return value;
}

function randomHex(bytes: number): string {
  const random = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The node stopped: a proposal made before is `"unknown"` (it may have
 * been replicated), one refused at once `false`.
 */
function stoppedError(applied?: false | "unknown"): RaftUnavailableError {
  return new RaftUnavailableError("the Raft node stopped", applied);
}

function fraction(value: number): number {
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(
      `snapshot.growthFraction must be a number >= 0, got ${value}`,
    );
  }
  return value;
}
