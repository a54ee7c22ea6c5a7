/**
 * What a leader knows of one follower's log, and how it paces replication
 * to it (Raft paper §5.3 nextIndex/matchIndex; etcd's probe/replicate
 * states with a bounded window of in-flight appends).
 *
 * @module
 */

/**
 * `probe`: the leader does not know where the follower's log matches and
 * sends one append per heartbeat interval until one succeeds.
 * `replicate`: the logs match up to `match`; appends are pipelined.
 */
export type ProgressState = "probe" | "replicate";

/**
 * Replication progress of one follower, kept by the leader.
 *
 * @example
 * ```ts
 * import { Progress } from "./progress.ts";
 * const progress = new Progress(11, 4);
 * progress.onSuccess(10);
 * console.log(progress.state, progress.match, progress.next); // replicate 10 11
 * ```
 */
export class Progress {
  /** Highest index known to match the leader's log. */
  match = 0;
  /** Index of the next entry to send. */
  next: number;
  /** Current pacing state. */
  state: ProgressState = "probe";
  /** In probe state: an append is outstanding; wait for its answer or the next heartbeat. */
  probeSent = false;
  /** Whether the follower answered since the last CheckQuorum round. */
  recentActive = false;
  /**
   * Highest commit index the follower was sent with entries it holds (an
   * append carries `commit`, which the follower caps at the append's last
   * index): what it may have learnt is committed.
   */
  sentCommit = 0;
  /** Last indexes of the appends in flight (replicate state), oldest first. */
  #inflight: number[] = [];
  readonly #maxInflight: number;

  /**
   * Starts in probe state, with nothing known to match (`match` 0).
   *
   * @param next the first index to offer (the leader's lastIndex + 1).
   * @param maxInflight how many appends may be unanswered in replicate state.
   */
  constructor(next: number, maxInflight: number) {
    this.next = next;
    this.#maxInflight = maxInflight;
  }

  /** Whether the leader should hold further appends to this follower. */
  get paused(): boolean {
    return this.state === "probe"
      ? this.probeSent
      : this.#inflight.length >= this.#maxInflight;
  }

  /** Records that an append whose last entry is `lastIndex` was sent. */
  onSent(lastIndex: number, entryCount: number): void {
    if (this.state === "probe") {
      this.probeSent = true;
    } else if (entryCount > 0) {
      this.#inflight.push(lastIndex);
      this.next = lastIndex + 1;
    }
  }

  /**
   * A successful answer: the follower matches up to `index`.
   * @returns whether `match` advanced.
   */
  onSuccess(index: number): boolean {
    let advanced = false;
    if (index > this.match) {
      this.match = index;
      advanced = true;
    }
    this.next = Math.max(this.next, index + 1);
    while (this.#inflight.length > 0 && this.#inflight[0] <= index) {
      this.#inflight.shift();
    }
    if (this.state === "probe") this.#become("replicate");
    return advanced;
  }

  /**
   * A rejection of the append whose `prevLogIndex` was `rejected`, with the
   * follower's hint of where its log may match.
   * @returns false when the rejection is stale and was ignored.
   */
  onReject(rejected: number, hint: number): boolean {
    if (this.state === "replicate") {
      if (rejected <= this.match) return false;
      this.#become("probe");
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, hint + 1), this.match + 1, 1);
    this.probeSent = false;
    return true;
  }

  /** A heartbeat interval passed: allow the next probe. */
  onHeartbeat(): void {
    this.probeSent = false;
  }

  #become(state: ProgressState): void {
    this.state = state;
    this.probeSent = false;
    this.#inflight = [];
    if (state === "replicate") this.next = this.match + 1;
  }
}
