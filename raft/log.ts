/**
 * The in-memory Raft log of one node, with the boundary between entries the
 * driver has persisted (stable) and entries it has not yet (unstable), as in
 * etcd's raftLog/unstable split.
 *
 * @module
 */

import type { Entry } from "./types.ts";

/**
 * A node's log: entries 1..lastIndex, plus how far they are persisted.
 *
 * Invariants: entries are contiguous from index 1; terms never decrease
 * along the log; `stableIndex <= lastIndex`.
 *
 * @example
 * ```ts
 * import { RaftLog } from "./log.ts";
 * const log = new RaftLog([{ index: 1, term: 1, data: "" }]);
 * console.log(log.lastIndex, log.termAt(1), log.termAt(0)); // 1 1 0
 * ```
 */
export class RaftLog {
  #entries: Entry[] = [];
  #stableIndex = 0;

  /**
   * Makes a log holding `persisted` (copied), all of it stable.
   *
   * @param persisted entries reloaded from storage, contiguous from index 1;
   * they count as stable.
   * @throws {RangeError} when `persisted` is not contiguous from 1 or its
   * terms decrease.
   */
  constructor(persisted: readonly Entry[] = []) {
    persisted.forEach((entry, i) => {
      if (entry.index !== i + 1) {
        throw new RangeError(
          `log entry ${i} has index ${entry.index}, expected ${i + 1}`,
        );
      }
      if (i > 0 && entry.term < persisted[i - 1].term) {
        throw new RangeError(`log term decreases at index ${entry.index}`);
      }
    });
    this.#entries = persisted.map((entry) => ({ ...entry }));
    this.#stableIndex = this.#entries.length;
  }

  /** Index of the last entry, 0 when empty. */
  get lastIndex(): number {
    return this.#entries.length;
  }

  /** Term of the last entry, 0 when empty. */
  get lastTerm(): number {
    return this.termAt(this.lastIndex);
  }

  /** Highest index the driver has acknowledged as persisted. */
  get stableIndex(): number {
    return this.#stableIndex;
  }

  /**
   * Term of the entry at `index`; 0 for index 0; -1 when there is no entry
   * there (so it never equals a real term).
   */
  termAt(index: number): number {
    if (index === 0) return 0;
    const entry = this.#entries[index - 1];
    return entry === undefined ? -1 : entry.term;
  }

  /** The entry at `index`, or undefined. */
  entryAt(index: number): Entry | undefined {
    return this.#entries[index - 1];
  }

  /**
   * Entries with `from <= index <= to`, at most `maxEntries` of them.
   * Returns copies the caller may keep.
   */
  slice(from: number, to: number, maxEntries = Infinity): Entry[] {
    const end = Math.min(to, this.lastIndex, from + maxEntries - 1);
    return this.#entries.slice(from - 1, end);
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
   * receiver steps 3 and 4): an entry already present with the same term is
   * skipped; at the first conflict the existing entry and all after it are
   * deleted, then the rest are appended.
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
      if (existing === entry.term) continue;
      if (existing !== -1) {
        if (entry.index <= commitIndex) {
          throw new Error(
            `refusing to overwrite committed entry ${entry.index} ` +
              `(term ${existing}) with term ${entry.term}`,
          );
        }
        this.#entries.length = entry.index - 1;
        this.#stableIndex = Math.min(this.#stableIndex, entry.index - 1);
      }
      for (const rest of entries.slice(i)) this.#entries.push({ ...rest });
      return;
    }
  }

  /** Entries not yet persisted: indexes `stableIndex + 1 .. lastIndex`. */
  unstableEntries(): Entry[] {
    return this.#entries.slice(this.#stableIndex);
  }

  /**
   * Marks entries up to `index` as persisted, if the entry at `index` still
   * has `term` (it may have been replaced while the driver was writing; by
   * the Log Matching Property a same-term entry means nothing before it
   * changed either).
   */
  stableTo(index: number, term: number): void {
    if (this.termAt(index) === term && index > this.#stableIndex) {
      this.#stableIndex = index;
    }
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
