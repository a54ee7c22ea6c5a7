/**
 * What a leader knows of one follower's log, and how it paces replication
 * to it (Raft paper §5.3 nextIndex/matchIndex; etcd's probe / replicate /
 * snapshot states, with in-flight appends bounded by count and by bytes).
 *
 * @module
 */

import type { Snapshot } from "./types.ts";

/**
 * `probe`: the leader does not know where the follower's log matches and
 * sends one append per heartbeat interval until one succeeds.
 * `replicate`: the logs match up to `match`; appends are pipelined, within a
 * window of in-flight appends bounded by count and by data size.
 * `snapshot`: the follower needs entries the leader has compacted; the
 * leader sends it a snapshot in chunks (Raft paper §7) and no appends.
 */
export type ProgressState = "probe" | "replicate" | "snapshot";

/** Limits on what a leader has in flight to one follower. */
export interface InflightLimits {
  /** Most unanswered appends (replicate state). */
  maxAppends: number;
  /** Most entry data, in UTF-16 code units, in unanswered appends. */
  maxBytes: number;
}

/** A snapshot transfer under way to one follower (`snapshot` state). */
export interface SnapshotTransfer {
  /** The snapshot being sent. */
  snapshot: Snapshot;
  /** Data the follower acknowledged holding: the next chunk starts here. */
  offset: number;
  /** Whether a chunk is unanswered. */
  inflight: boolean;
  /** Leader ticks since the last chunk was sent or answered. */
  elapsed: number;
}

/**
 * Replication progress of one follower, kept by the leader.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { Progress } from "./progress.ts";
 * const progress = new Progress(11, { maxAppends: 4, maxBytes: 1 << 20 });
 * progress.onSuccess(10);
 * assert.equal(progress.state, "replicate");
 * assert.equal(progress.match, 10);
 * assert.equal(progress.next, 11);
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
  /** In `snapshot` state, the transfer under way; null otherwise. */
  transfer: SnapshotTransfer | null = null;
  /** Appends in flight (replicate state), oldest first. */
  #inflight: { last: number; bytes: number }[] = [];
  #inflightBytes = 0;
  readonly #limits: InflightLimits;

  /**
   * Starts in probe state, with nothing known to match (`match` 0).
   *
   * @param next the first index to offer (the leader's lastIndex + 1).
   * @param limits bounds on unanswered appends in replicate state.
   */
  constructor(next: number, limits: InflightLimits) {
    this.next = next;
    this.#limits = limits;
  }

  /** Whether the leader should hold further appends to this follower. */
  get paused(): boolean {
    if (this.state === "probe") return this.probeSent;
    if (this.state === "snapshot") return true;
    return this.#inflight.length >= this.#limits.maxAppends ||
      this.#inflightBytes >= this.#limits.maxBytes;
  }

  /** Entry data the next append may carry without exceeding the byte window. */
  get byteBudget(): number {
    return Math.max(0, this.#limits.maxBytes - this.#inflightBytes);
  }

  /** Number of appends in flight (replicate state). */
  get inflightCount(): number {
    return this.#inflight.length;
  }

  /** Entry data in flight (replicate state), in UTF-16 code units. */
  get inflightBytes(): number {
    return this.#inflightBytes;
  }

  /**
   * Records that an append whose last entry is `lastIndex` was sent, with
   * `entryCount` entries of `bytes` data in all.
   */
  onSent(lastIndex: number, entryCount: number, bytes = 0): void {
    if (this.state === "probe") {
      this.probeSent = true;
    } else if (this.state === "replicate" && entryCount > 0) {
      this.#inflight.push({ last: lastIndex, bytes });
      this.#inflightBytes += bytes;
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
    while (this.#inflight.length > 0 && this.#inflight[0].last <= index) {
      this.#inflightBytes -= this.#inflight.shift()!.bytes;
    }
    if (this.state === "probe") {
      this.become("replicate");
    } else if (
      this.state === "snapshot" &&
      this.match >= this.transfer!.snapshot.index
    ) {
      // The follower holds everything the snapshot covers (it caught up
      // some other way, or it answered a stale snapshot at its commit).
      this.become("replicate");
    }
    return advanced;
  }

  /**
   * A rejection of the append whose `prevLogIndex` was `rejected`;
   * `hintNext` is where the leader's fast backtracking (Raft paper §5.3)
   * says to try next. The new `next` stays within
   * `match + 1 .. rejected`, so every rejection moves the probe back.
   * @returns false when the rejection is stale and was ignored.
   */
  onReject(rejected: number, hintNext: number): boolean {
    if (this.state === "snapshot") return false;
    if (this.state === "replicate") {
      if (rejected <= this.match) return false;
      this.become("probe");
    } else if (this.next - 1 !== rejected) {
      return false;
    }
    this.next = Math.max(Math.min(rejected, hintNext), this.match + 1, 1);
    this.probeSent = false;
    return true;
  }

  /** A heartbeat interval passed: allow the next probe. */
  onHeartbeat(): void {
    this.probeSent = false;
  }

  /**
   * Moves to `state`, clearing the in-flight window. Replicate restarts at
   * `match + 1`; snapshot takes the transfer to run.
   */
  become(state: ProgressState, snapshot?: Snapshot): void {
    this.state = state;
    this.probeSent = false;
    this.#inflight = [];
    this.#inflightBytes = 0;
    this.transfer = state === "snapshot"
      ? { snapshot: snapshot!, offset: 0, inflight: false, elapsed: 0 }
      : null;
    if (state === "replicate") this.next = this.match + 1;
  }
}
