/**
 * The in-memory Raft log of one node, with the boundary between entries the
 * driver has persisted (stable) and entries it has not yet (unstable), as in
 * etcd's raftLog/unstable split, and a snapshot point before its first entry
 * once the log has been compacted (Raft paper §7).
 *
 * @module
 */

import type { Entry, SnapshotPoint } from "./types.ts";

/** What {@link RaftLog.termAt} returns for an index past the last entry. */
export const MISSING_TERM = -1;
/**
 * What {@link RaftLog.termAt} returns for an index below the snapshot point:
 * the entry existed but was compacted into a snapshot (Raft paper §7).
 */
export const COMPACTED_TERM = -2;

/**
 * A node's log: a snapshot point `{index, term}` (0/0 for a log never
 * compacted), then entries `snapshot.index + 1 .. lastIndex`, plus how far
 * they are persisted.
 *
 * Invariants: entries are contiguous from `snapshot.index + 1`; terms never
 * decrease along the log (and are >= the snapshot's term);
 * `snapshot.index <= stableIndex <= lastIndex`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RaftLog } from "./log.ts";
 * const log = new RaftLog([{ index: 1, term: 1, data: "" }]);
 * assert.equal(log.lastIndex, 1);
 * assert.equal(log.termAt(1), 1);
 * assert.equal(log.termAt(0), 0);
 * ```
 */
export class RaftLog {
  #entries: Entry[] = [];
  #snapshot: SnapshotPoint = { index: 0, term: 0 };
  #stableIndex = 0;

  /**
   * Makes a log holding `persisted` (copied), all of it stable.
   *
   * @param persisted entries reloaded from storage, contiguous from
   * `snapshot.index + 1`; they count as stable. Entries at or below the
   * snapshot's index are ignored (a trailing window the driver kept).
   * @param snapshot the persisted snapshot's point, if any: the log starts
   * after it. Default `{ index: 0, term: 0 }`.
   * @throws {RangeError} when `persisted` is not contiguous, its terms
   * decrease, or an entry at the snapshot's index has another term.
   */
  constructor(
    persisted: readonly Entry[] = [],
    snapshot: SnapshotPoint = { index: 0, term: 0 },
  ) {
    if (
      !Number.isSafeInteger(snapshot.index) || snapshot.index < 0 ||
      !Number.isSafeInteger(snapshot.term) || snapshot.term < 0 ||
      (snapshot.index === 0) !== (snapshot.term === 0)
    ) {
      throw new RangeError(
        `snapshot point ${
          JSON.stringify(snapshot)
        } must be two non-negative integers, both 0 or both > 0`,
      );
    }
    const first = persisted[0]?.index ?? snapshot.index + 1;
    if (first > snapshot.index + 1) {
      throw new RangeError(
        `persisted log starts at ${first}, after a gap from the snapshot at ${snapshot.index}`,
      );
    }
    persisted.forEach((entry, i) => {
      if (entry.index !== first + i) {
        throw new RangeError(
          `log entry ${i} has index ${entry.index}, expected ${first + i}`,
        );
      }
      if (i > 0 && entry.term < persisted[i - 1].term) {
        throw new RangeError(`log term decreases at index ${entry.index}`);
      }
      if (entry.index === snapshot.index && entry.term !== snapshot.term) {
        throw new RangeError(
          `log entry ${entry.index} has term ${entry.term}, but the snapshot at that index has term ${snapshot.term}`,
        );
      }
    });
    const kept = persisted.filter((entry) => entry.index > snapshot.index);
    if (kept.length > 0 && kept[0].term < snapshot.term) {
      throw new RangeError(
        `log entry ${
          kept[0].index
        } has a term below the snapshot's (${snapshot.term})`,
      );
    }
    this.#snapshot = { index: snapshot.index, term: snapshot.term };
    this.#entries = kept.map((entry) => ({ ...entry }));
    this.#stableIndex = this.lastIndex;
  }

  /** The point before the first entry: the last compacted index and its term. */
  get snapshot(): SnapshotPoint {
    return { ...this.#snapshot };
  }

  /** Index of the first entry held (snapshot index + 1; may be > lastIndex). */
  get firstIndex(): number {
    return this.#snapshot.index + 1;
  }

  /** Index of the last entry; the snapshot's index when no entry follows it. */
  get lastIndex(): number {
    return this.#snapshot.index + this.#entries.length;
  }

  /** Term of the last entry (the snapshot's term when no entry follows it). */
  get lastTerm(): number {
    return this.termAt(this.lastIndex);
  }

  /** Highest index the driver has acknowledged as persisted. */
  get stableIndex(): number {
    return this.#stableIndex;
  }

  /**
   * Term of the entry at `index`: 0 at index 0 (the empty log's sentinel,
   * which every log agrees on); the snapshot's term at its index;
   * {@link COMPACTED_TERM} below it; {@link MISSING_TERM} past the last
   * entry. Neither marker equals a real term.
   */
  termAt(index: number): number {
    if (index === 0) return 0;
    if (index === this.#snapshot.index) return this.#snapshot.term;
    if (index < this.#snapshot.index) return COMPACTED_TERM;
    const entry = this.#entries[index - this.#snapshot.index - 1];
    return entry === undefined ? MISSING_TERM : entry.term;
  }

  /** The entry at `index`, or undefined (compacted or missing). */
  entryAt(index: number): Entry | undefined {
    if (index <= this.#snapshot.index) return undefined;
    return this.#entries[index - this.#snapshot.index - 1];
  }

  /**
   * Entries with `from <= index <= to`, at most `maxEntries` of them and, past
   * the first, at most `maxChars` of data in all. Returns copies the caller
   * may keep.
   *
   * @throws {RangeError} when `from` is at or below the snapshot's index
   * (those entries are compacted).
   */
  slice(
    from: number,
    to: number,
    maxEntries = Infinity,
    maxChars = Infinity,
  ): Entry[] {
    if (from <= this.#snapshot.index) {
      throw new RangeError(
        `entries from ${from} are compacted (snapshot at ${this.#snapshot.index})`,
      );
    }
    const end = Math.min(to, this.lastIndex, from + maxEntries - 1);
    const out: Entry[] = [];
    let chars = 0;
    for (let index = from; index <= end; index++) {
      const entry = this.#entries[index - this.#snapshot.index - 1];
      chars += entry.data.length;
      if (out.length > 0 && chars > maxChars) break;
      out.push({ ...entry });
    }
    return out;
  }

  /**
   * Appends one entry at `lastIndex + 1` for `term` (of `type`, when given:
   * see {@link Entry.type}); returns it.
   */
  appendNew(term: number, data: string, type?: "config"): Entry {
    const entry: Entry = { index: this.lastIndex + 1, term, data };
    if (type !== undefined) entry.type = type;
    this.#entries.push(entry);
    return entry;
  }

  /**
   * Merges entries received from a leader (Raft paper §5.3, AppendEntries
   * receiver steps 3 and 4): an entry already present with the same term, or
   * compacted into the snapshot, is skipped; at the first conflict the
   * existing entry and all after it are deleted, then the rest are appended.
   *
   * @param entries contiguous entries whose first index is <= lastIndex + 1.
   * @param commitIndex the caller's commit index; committed entries never
   * conflict in a correct cluster.
   * @throws {Error} when a committed entry would be overwritten (a safety
   * violation: the caller has a bug or its storage lost data).
   */
  merge(entries: readonly Entry[], commitIndex: number): void {
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i];
      const existing = this.termAt(entry.index);
      if (existing === entry.term || existing === COMPACTED_TERM) continue;
      if (existing !== MISSING_TERM) {
        if (entry.index <= commitIndex || entry.index <= this.#snapshot.index) {
          throw new Error(
            `refusing to overwrite committed entry ${entry.index} ` +
              `(term ${existing}) with term ${entry.term}`,
          );
        }
        this.#entries.length = entry.index - this.#snapshot.index - 1;
        this.#stableIndex = Math.min(this.#stableIndex, entry.index - 1);
      }
      for (const rest of entries.slice(i)) this.#entries.push({ ...rest });
      return;
    }
  }

  /** Entries not yet persisted: indexes `stableIndex + 1 .. lastIndex`. */
  unstableEntries(): Entry[] {
    return this.#entries.slice(this.#stableIndex - this.#snapshot.index)
      .map((entry) => ({ ...entry }));
  }

  /**
   * Marks entries up to `index` as persisted, if the entry at `index` still
   * has `term` (it may have been replaced while the driver was writing; by
   * the Log Matching Property a same-term entry means nothing before it
   * changed either).
   */
  stableTo(index: number, term: number): void {
    if (
      index > this.#snapshot.index && this.termAt(index) === term &&
      index > this.#stableIndex
    ) {
      this.#stableIndex = index;
    }
  }

  /**
   * Drops the entries up to `index` (log compaction, Raft paper §7): the
   * entry at `index` becomes the snapshot point. A no-op when `index` is at
   * or below the current snapshot point.
   *
   * @throws {RangeError} when `index` is beyond the persisted entries.
   */
  compact(index: number): void {
    if (index <= this.#snapshot.index) return;
    if (index > this.#stableIndex) {
      throw new RangeError(
        `cannot compact to ${index}: entries are persisted only to ${this.#stableIndex}`,
      );
    }
    const term = this.termAt(index);
    this.#entries = this.#entries.slice(index - this.#snapshot.index);
    this.#snapshot = { index, term };
  }

  /**
   * Installs a snapshot received from the leader (Raft paper §7, receiver
   * rules 6 and 7): if the entry at `point.index` has `point.term`, the
   * entries after it are kept; otherwise the whole log is discarded. The
   * snapshot point then starts the log, and counts as persisted (the driver
   * persists the snapshot before anything else in that Ready).
   *
   * @returns whether the entries after the point were kept.
   */
  restore(point: SnapshotPoint): boolean {
    const keep = point.index <= this.lastIndex &&
      this.termAt(point.index) === point.term;
    if (keep && point.index >= this.#snapshot.index) {
      this.#entries = this.#entries.slice(point.index - this.#snapshot.index);
    } else {
      this.#entries = [];
    }
    this.#snapshot = { index: point.index, term: point.term };
    this.#stableIndex = keep
      ? Math.max(this.#stableIndex, point.index)
      : point.index;
    return keep;
  }

  /**
   * Whether a log ending at (`lastIndex`, `lastTerm`) is at least as
   * up-to-date as this one (Raft paper §5.4.1).
   */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    return lastTerm > this.lastTerm ||
      (lastTerm === this.lastTerm && lastIndex >= this.lastIndex);
  }
}
