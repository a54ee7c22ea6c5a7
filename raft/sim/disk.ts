/**
 * A simulated disk: a {@link RaftStorage} whose writes become durable only
 * when the simulator completes them (a slow disk is one the simulator
 * completes late). A crash drops the write in flight, or tears it: like the
 * write-ahead log, a write is the entries then the hard state as one
 * sequence of records, and a torn write keeps a prefix of the entries and
 * never the hard state. A crash may also strike after the write became
 * durable but before the driver heard so (nothing of that Ready was sent).
 *
 * A full disk fails every write with a {@link DiskFullError}, after
 * maybe a prefix of its entries reached the disk.
 *
 * Snapshots (Raft paper §7): the disk keeps the newest snapshot and the
 * log after the point the last `compactTo` marked. A write with a snapshot
 * is, in RaftNode's order, the snapshot (one record: wholly there or not),
 * the log marker, the entries, the hard state; a torn or full write keeps
 * a prefix of those records.
 *
 * The disk also checks what the core asks it to write: no gap in the log,
 * no committed entry overwritten, no commit index beyond the log.
 *
 * @module
 */

import type { RaftStorage, StorageWrite } from "../driver.ts";
import type { Entry, HardState, Snapshot, SnapshotPoint } from "../types.ts";

/** What a node's driver has made durable. */
export interface SimulatedDisk {
  /** Last persisted hard state, if any was ever written. */
  hardState: HardState | undefined;
  /** The persisted log, contiguous from `logStart.index + 1`. */
  entries: Entry[];
  /**
   * The point the log starts after (the last `compactTo` made durable);
   * `{ index: 0, term: 0 }` before any compaction.
   */
  logStart: SnapshotPoint;
  /** The newest durable snapshot (Raft paper §7), if any. */
  snapshot: Snapshot | undefined;
}

/** The durable entry at `index`, or undefined (compacted or missing). */
export function diskEntryAt(
  disk: SimulatedDisk,
  index: number,
): Entry | undefined {
  if (index <= disk.logStart.index) return undefined;
  return disk.entries[index - disk.logStart.index - 1];
}

/** Index of the last durable entry (or of the log start, or snapshot). */
export function diskLastIndex(disk: SimulatedDisk): number {
  return Math.max(
    disk.logStart.index + disk.entries.length,
    disk.snapshot?.index ?? 0,
  );
}

/** The error a full disk fails a write with (like Deno's ENOSPC error). */
export class DiskFullError extends Error {
  /** The errno name, as a real file system reports it. */
  readonly code = "ENOSPC";

  /**
   * Makes the error.
   *
   * @param message what failed, and what to do.
   */
  constructor(message: string) {
    super(message);
    this.name = "DiskFullError";
  }
}

/** How a crash treats the write in flight. */
export type CrashedWrite =
  | { kind: "none" }
  | { kind: "lost"; entries: number }
  | { kind: "torn"; kept: number; entries: number }
  | { kind: "durable, unacknowledged" };

/**
 * One node's disk; it outlives the node's crashes.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SimDisk } from "./disk.ts";
 * const disk = new SimDisk((detail) => { throw new Error(detail); });
 * let durable = false;
 * disk.persist({ entries: [{ index: 1, term: 1, data: "" }] }, () => durable = true);
 * assert.equal(durable, false);
 * assert.equal(disk.durable.entries.length, 0);
 * disk.complete();
 * assert.equal(durable, true);
 * assert.equal(disk.durable.entries.length, 1);
 * ```
 */
export class SimDisk implements RaftStorage {
  /** What survives a crash. Live: do not modify. */
  readonly durable: SimulatedDisk = {
    hardState: undefined,
    entries: [],
    logStart: { index: 0, term: 0 },
    snapshot: undefined,
  };
  readonly #fail: (detail: string) => never;
  #pending: { write: StorageWrite; done: (error?: unknown) => void } | null =
    null;

  /**
   * Makes an empty disk.
   *
   * @param fail reports a write the core should never have asked for.
   */
  constructor(fail: (detail: string) => never) {
    this.#fail = fail;
  }

  /** True while a write waits for the simulator to complete it. */
  get pending(): boolean {
    return this.#pending !== null;
  }

  /** Accepts a write; it becomes durable at {@link complete}. */
  persist(write: StorageWrite, done: (error?: unknown) => void): void {
    if (this.#pending !== null) {
      this.#fail("a second write was started before the first completed");
    }
    this.#pending = {
      write: {
        hardState: write.hardState && { ...write.hardState },
        entries: write.entries.map((e) => ({ ...e })),
        ...(write.snapshot !== undefined && {
          snapshot: structuredClone(write.snapshot),
          compactTo: write.compactTo && { ...write.compactTo },
          discardLog: write.discardLog,
        }),
      },
      done,
    };
  }

  /**
   * Makes the write in flight durable and tells the driver; while the disk
   * is {@link full}, fails it instead (see {@link failFull}).
   *
   * @param keptIfFull when full, how many of the write's entries still
   * reached the disk before it ran out of room.
   */
  complete(keptIfFull = 0): void {
    const pending = this.#pending;
    if (pending === null) return;
    if (this.#full) return this.#failFull(keptIfFull);
    this.#pending = null;
    this.#write(pending.write);
    pending.done();
  }

  /**
   * The node crashed: the write in flight is lost, torn (`torn` entries
   * kept, 0 ≤ torn ≤ its entry count) or durable without the driver knowing.
   */
  crash(mode: "lost" | "torn" | "durable", torn = 0): CrashedWrite {
    const pending = this.#pending;
    this.#pending = null;
    if (pending === null) return { kind: "none" };
    const entries = pending.write.entries.length;
    if (mode === "durable") {
      this.#write(pending.write);
      return { kind: "durable, unacknowledged" };
    }
    if (mode === "torn" && torn > 0) {
      this.#writePrefix(pending.write, torn);
      return { kind: "torn", kept: Math.min(torn, entries), entries };
    }
    return { kind: "lost", entries };
  }

  // --- disk full (issue 8 item 6) ----------------------------------------

  #full = false;

  /** While true, every write fails with a {@link DiskFullError}. */
  get full(): boolean {
    return this.#full;
  }

  /** Fills the disk (`true`) or frees room on it (`false`). */
  setFull(full: boolean): void {
    this.#full = full;
  }

  /**
   * The write in flight fails for want of room: like a torn write, `kept`
   * of its entries may have reached the disk, never its hard state (a WAL
   * cuts a half-written record off at restart); the driver is told
   * `done(error)` with a {@link DiskFullError}.
   */
  #failFull(kept: number): void {
    const pending = this.#pending!;
    this.#pending = null;
    if (kept > 0) this.#writePrefix(pending.write, kept);
    pending.done(
      new DiskFullError(
        `no space left on device writing ${pending.write.entries.length} ` +
          "entries; free disk space, then restart the node",
      ),
    );
  }

  // --- snapshots (issue 8 item 9) ------------------------------------------

  /**
   * A write cut short (a crash or a full disk): its records are, in order,
   * the snapshot, the log marker (`compactTo`), then the entries; the first
   * `kept` of them reached the disk, never the hard state. A snapshot is
   * one record: wholly there or not, and the marker only after it (the
   * order RaftNode's storage writes them in).
   */
  #writePrefix(write: StorageWrite, kept: number): void {
    if (write.snapshot !== undefined) {
      this.#storeSnapshot(write);
      if (--kept === 0) return;
      this.#markLog(write);
      if (--kept === 0) return;
    }
    this.#write({ entries: write.entries.slice(0, kept) });
  }

  /** The snapshot record: kept if newer than the stored one. */
  #storeSnapshot(write: StorageWrite): void {
    const snapshot = write.snapshot!;
    const disk = this.durable;
    if ((disk.snapshot?.index ?? 0) <= snapshot.index) disk.snapshot = snapshot;
  }

  /**
   * The log marker: the log now starts after `compactTo` (entries up to it
   * dropped; with `discardLog`, every entry dropped).
   */
  #markLog(write: StorageWrite): void {
    const disk = this.durable;
    const to = write.compactTo;
    if (to === undefined) return;
    if (to.index > (disk.snapshot?.index ?? 0)) {
      this.#fail(
        `log marked as starting after ${to.index}, beyond the newest ` +
          `durable snapshot (${disk.snapshot?.index ?? "none"})`,
      );
    }
    if (to.index < disk.logStart.index) return; // an older point: no-op
    const last = disk.logStart.index + disk.entries.length;
    disk.entries = write.discardLog || last < to.index
      ? []
      : disk.entries.slice(to.index - disk.logStart.index);
    disk.logStart = { ...to };
  }

  /**
   * At a restart from a snapshot saved before its log marker (an install
   * cut short): marks the log as starting after the snapshot, dropping the
   * log after it too when it disagrees there (`discard`).
   */
  markLogAtStart(point: SnapshotPoint, discard: boolean): void {
    this.#markLog({ entries: [], compactTo: point, discardLog: discard });
  }

  #write(write: StorageWrite): void {
    const disk = this.durable;
    const oldCommit = disk.hardState?.commit ?? 0;
    if (write.snapshot !== undefined) {
      this.#storeSnapshot(write);
      this.#markLog(write);
    }
    if (write.hardState !== undefined) disk.hardState = write.hardState;
    if (write.entries.length > 0) {
      const first = write.entries[0].index;
      const start = disk.logStart.index;
      if (first > start + disk.entries.length + 1 || first <= start) {
        this.#fail(
          `Ready entries start at ${first}, outside the log ` +
            `(disk holds ${start + 1}..${start + disk.entries.length})`,
        );
      }
      for (const entry of write.entries) {
        const old = disk.entries[entry.index - start - 1];
        if (
          entry.index <= oldCommit && old !== undefined &&
          (old.term !== entry.term || old.data !== entry.data)
        ) {
          this.#fail(
            `Ready overwrites persisted committed entry ` +
              `${entry.index} (persisted commit ${oldCommit})`,
          );
        }
      }
      disk.entries.length = first - start - 1;
      for (const entry of write.entries) disk.entries.push(entry);
    }
    const commit = disk.hardState?.commit ?? 0;
    if (commit > diskLastIndex(disk)) {
      this.#fail(
        `persisted commit ${commit} beyond its persisted log ` +
          `(${diskLastIndex(disk)})`,
      );
    }
  }
}
