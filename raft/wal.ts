/**
 * Segmented write-ahead log for a Raft node's persistent state (Raft paper
 * Figure 2: `currentTerm`, `votedFor`, `log[]`), plus the marker of the
 * snapshot that covers the log's compacted prefix (Raft paper §7).
 *
 * ## Folder layout
 * The log folder holds only segment files, named
 * `<sequence>-<firstIndex>.wal` (16 lowercase hex digits each, e.g.
 * `0000000000000001-0000000000000001.wal`), so names sort in write order and
 * show the first log index each segment was started for. Appends go to the
 * last segment; once it holds {@link WalOptions.segmentBytes} or more, the
 * next write starts a new one. {@link Wal.compact} deletes the segments a
 * snapshot covers.
 *
 * ## Record format
 * Each record is
 * `[u32 big-endian payload length][u32 big-endian crc32c(payload)][payload]`
 * (CRC-32C, RFC 3720), where the payload is UTF-8 JSON, one of
 * - `{"t":"h","term":n,"vote":string|null,"commit":n}`: a hard state; the
 *   last one in the log wins;
 * - `{"t":"e","index":n,"term":n,"data":string,"type"?:"config"}`: one log
 *   entry (`type` only on a membership change, see `Entry.type`). An entry
 *   whose index is at or below the current last index first drops every entry
 *   from that index on (the log truncation after a conflict, Raft §5.3);
 * - `{"t":"s","index":n,"term":n[,"reset":true]}`: a snapshot marker (with
 *   `reset`, the entries after it are dropped too): the entries up to
 *   `index` (whose term is `term`) are covered by a snapshot kept elsewhere
 *   (Raft §7); the log continues at `index + 1`.
 *
 * ## Crash safety
 * An append resolves only once its records are written and fdatasynced, so a
 * resolved append survives a crash or power loss. Appends made while a write
 * is in flight are written together with one fdatasync (group commit). A
 * crash during a write can leave a torn tail in the last segment: a cut
 * header, a record whose length runs past the end of the file, a last record
 * with a bad CRC, or zero bytes where the file grew but its data never
 * reached the disk. {@link Wal.open} cuts such a tail off (none of it was
 * ever acknowledged) and fsyncs the truncation. A bad record followed by
 * valid data, or any damage in a segment before the last (which was
 * fdatasynced in full before the next one was started), is not a torn write
 * but corruption of acknowledged data, and {@link Wal.open} throws
 * {@link WalCorruptError} rather than guess.
 *
 * @module
 */

import {
  adviceFor,
  describeErrno,
  errnoOf,
  parentDir,
  syncDir,
  writeAll,
  writeFileAtomicWith,
} from "./_atomic_file.ts";
import { crc32, crc32c } from "./_crc32.ts";
import {
  type Checksum,
  DEFAULT_READ_BUFFER_BYTES,
  frameRecords,
  frameTextRecords,
  RecordReader,
} from "./_wal_record.ts";
import { listSegments, type SegmentInfo, segmentName } from "./_wal_segment.ts";
import type { Entry, HardState } from "./types.ts";

/** Default {@link WalOptions.segmentBytes}: 64 MiB. */
const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
/** Bytes of legacy-import records buffered before each write. */
const IMPORT_CHUNK_BYTES = 1024 * 1024;

const encoder = new TextEncoder();

/**
 * Thrown by {@link Wal.open} when the log holds damage that a crash during a
 * write cannot explain (a bad record followed by more data, damage in a
 * segment before the last, a missing segment), or a record that decodes but
 * does not fit (wrong shape, or an entry index that leaves a gap).
 * The node must not start from such a folder. Moving the data folder aside
 * and restarting the node empty lets it catch up from the leader; do it only
 * once the other nodes have a leader, since an empty node has forgotten the
 * votes it cast (Raft paper Figure 2: votedFor must be persistent).
 *
 * @example Tell the operator what to do
 * ```ts
 * import assert from "node:assert/strict";
 * import { Wal, WalCorruptError } from "./wal.ts";
 * const dir = await Deno.makeTempDir();
 * const { wal } = await Wal.open(dir, { segmentBytes: 100 });
 * for (let i = 1; i <= 10; i++) await wal.append({ entries: [{ index: i, term: 1, data: "x" }] });
 * await wal.close();
 * // Damage a segment before the last: no crash during a write explains it.
 * const first = [...Deno.readDirSync(dir)].map((e) => e.name).sort()[0];
 * const bytes = await Deno.readFile(`${dir}/${first}`);
 * bytes[bytes.length - 2] ^= 0xff;
 * await Deno.writeFile(`${dir}/${first}`, bytes);
 * await assert.rejects(Wal.open(dir), (err) => {
 *   // Tell the operator what to do: err.message names the file and offset.
 *   return err instanceof WalCorruptError && err.message.includes(first);
 * });
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class WalCorruptError extends Error {
  /** Path of the damaged segment file (or of the log folder). */
  readonly path: string;
  /** Byte offset, from the start of the file, of the first bad record. */
  readonly offset: number;

  /**
   * Builds the error and its message (file, offset, reason, what to do).
   *
   * @param path Path of the segment file.
   * @param offset Byte offset of the first bad record's header.
   * @param reason What is wrong with the record, e.g. `"CRC mismatch"`.
   */
  constructor(path: string, offset: number, reason: string) {
    super(
      `write-ahead log ${path} is corrupt at byte offset ${offset}: ${reason}. ` +
        `The data directory cannot be trusted; move it aside, wait until the ` +
        `other nodes have a leader, then restart the node empty so it catches ` +
        `up from the leader (an empty node has forgotten its votes, so it must ` +
        `not rejoin during an election).`,
    );
    this.name = "WalCorruptError";
    this.path = path;
    this.offset = offset;
  }
}

/**
 * Thrown when the log cannot write or fsync (by {@link Wal.append} and
 * {@link Wal.compact}) or cannot open its folder for writing (by
 * {@link Wal.open}): disk full (`ENOSPC`), a read-only file system
 * (`EROFS`), missing permissions (`EACCES`), an I/O error (`EIO`). The
 * message names the path and the errno and says what to do. A failed append
 * never resolved, so nothing acknowledged is lost; the log then refuses every
 * later append (what reached the disk is unknown until it is reopened, which
 * cuts a torn tail off).
 *
 * @example Report a full disk
 * ```ts
 * import assert from "node:assert/strict";
 * import { WalWriteError } from "./wal.ts";
 * const err = new WalWriteError("/data/wal/x.wal", "write", Object.assign(new Error("No space left on device"), { code: "ENOSPC" }));
 * assert.equal(err.code, "ENOSPC");
 * assert.match(err.message, /disk full/);
 * ```
 */
export class WalWriteError extends Error {
  /** The file or folder the failed operation was on. */
  readonly path: string;
  /** The errno name, e.g. `"ENOSPC"`, `"EROFS"`; `null` if unknown. */
  readonly code: string | null;

  /**
   * Builds the error and its message.
   *
   * @param path The file or folder.
   * @param operation What failed, e.g. `"write"`, `"fdatasync"`, `"open"`.
   * @param cause The error the runtime threw (its `code` names the errno).
   */
  constructor(path: string, operation: string, cause: unknown) {
    const code = errnoOf(cause);
    // Only a failed append leaves the log refusing further appends.
    const appending = /^(write|fdatasync|start of a new segment|append)/.test(
      operation,
    );
    super(
      `write-ahead log ${path}: ${operation} failed: ${
        describeErrno(code, cause)
      }. ` +
        `${adviceFor(code)}` +
        (!appending
          ? ""
          : " Nothing acknowledged is lost: the append that failed never resolved. " +
            "The log refuses further appends until the node is restarted (reopening cuts off a torn tail)."),
      { cause },
    );
    this.name = "WalWriteError";
    this.path = path;
    this.code = code;
  }
}

/** Wraps an I/O error as a {@link WalWriteError}; other errors pass. */
function asWriteError(path: string, operation: string, err: unknown): unknown {
  if (err instanceof WalWriteError || err instanceof WalCorruptError) {
    return err;
  }
  if (err instanceof TypeError || err instanceof RangeError) return err;
  return new WalWriteError(path, operation, err);
}

/** Settings of {@link Wal.open}. */
export interface WalOptions {
  /**
   * Size in bytes after which the next write starts a new segment (a segment
   * may exceed it by one write). Default 64 MiB.
   * @default {67108864}
   */
  segmentBytes?: number;
  /**
   * Group commit: appends made while a write and fdatasync are in flight are
   * written together with one write and one fdatasync. When false, every
   * entry record is written and fdatasynced on its own (slow; for
   * benchmarks). Default true.
   * @default {true}
   */
  groupCommit?: boolean;
  /**
   * Path of an old single-file log (`<data>/wal.log`, CRC-32 records). If it
   * exists and the folder holds no segment, its records are imported into
   * the first segment (written as a temp file, fsynced, renamed), then it is
   * removed. If segments exist already (a crash after an import), it is
   * removed. Default: none.
   */
  legacyFile?: string;
  /**
   * Bytes of the buffer {@link Wal.open} reads segments through (grown only
   * to fit one larger record). Default 64 KiB.
   * @default {65536}
   */
  readBufferBytes?: number;
  /**
   * Called after each fdatasync of appended records (for metrics), with
   * how long that fdatasync took, ms.
   */
  onSync?: (ms: number) => void;
}

/** The snapshot that covers a log's compacted prefix (Raft §7). */
export interface WalSnapshotMarker {
  /** Last log index the snapshot covers. */
  index: number;
  /** Term of the entry at `index`. */
  term: number;
}

/** Counters of an open {@link Wal}, since it was opened. */
export interface WalStats {
  /** Write calls that appended records (one per group with group commit). */
  writes: number;
  /** fdatasync calls after appended records. */
  syncs: number;
  /** Bytes of records appended. */
  bytes: number;
  /** The largest read buffer {@link Wal.open} used, in bytes. */
  peakReadBufferBytes: number;
}

/** What {@link Wal.open} recovered from disk. */
export interface WalOpenResult {
  /** The open log, ready for {@link Wal.append}. */
  wal: Wal;
  /**
   * The last hard state written, or `{ term: 0, vote: null, commit: 0 }` if
   * none was.
   */
  hardState: HardState;
  /**
   * The log entries after the snapshot, contiguous from
   * `snapshot.index + 1` (from 1 without a snapshot); empty for a new log.
   */
  entries: Entry[];
  /** The newest snapshot marker written by {@link Wal.compact}, or null. */
  snapshot: WalSnapshotMarker | null;
  /** Bytes of torn tail cut off the last segment (0 for a clean log). */
  repairedBytes: number;
}

/** One batch of state to persist with {@link Wal.append}. */
export interface WalUpdate {
  /** A new hard state to persist, written after `entries`. */
  hardState?: HardState;
  /**
   * Entries with contiguous indexes. The first index may be at most
   * `lastIndex + 1` and must be above the snapshot's index; a smaller one
   * replaces the entries from that index on.
   */
  entries?: Entry[];
  /**
   * Whether the records must be fdatasynced before the promise resolves.
   * `false` only suits a hard state whose term and vote are unchanged (a
   * new commit index, which Raft keeps in volatile state; etcd's raft calls
   * this MustSync): its records are written at once and become durable with
   * the next synced append or a segment roll; after a crash it may be lost,
   * never torn into a later record. Default true.
   */
  sync?: boolean;
}

/** One framed record; `index` is the entry's index, null for others. */
interface Chunk {
  bytes: Uint8Array;
  index: number | null;
}

/** One append, encoded and checked except for its fit with the log. */
interface Batch {
  /** Whether the batch must be fdatasynced (WalUpdate.sync). */
  sync: boolean;
  firstIndex: number | null;
  lastIndex: number;
  hardState: HardState | null;
  /** Entry records in order, then the hard state record. */
  chunks: Chunk[];
}

type Item =
  | {
    kind: "append";
    batch: Batch;
    resolve(): void;
    reject(err: unknown): void;
  }
  | {
    kind: "compact";
    marker: WalSnapshotMarker;
    discardAfter: boolean;
    resolve(): void;
    reject(err: unknown): void;
  };

interface Segment extends SegmentInfo {
  size: number;
}

/**
 * An open write-ahead log. Open it with {@link Wal.open}; persist hard states
 * and entries with {@link Wal.append}; drop a snapshot's prefix with
 * {@link Wal.compact}; {@link Wal.close} it when done. One process at a time
 * may open a given folder (this is not checked; the data folder's lock is).
 *
 * @example Persist a vote and an entry, then recover them
 * ```ts
 * import assert from "node:assert/strict";
 * import { Wal } from "./wal.ts";
 * const dir = await Deno.makeTempDir();
 * const { wal } = await Wal.open(dir);
 * await wal.append({
 *   entries: [{ index: 1, term: 2, data: "" }],
 *   hardState: { term: 2, vote: "n1", commit: 0 },
 * });
 * await wal.close();
 * const again = await Wal.open(dir);
 * assert.equal(again.entries.length, 1);
 * assert.equal(again.hardState.vote, "n1");
 * await again.wal.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class Wal {
  readonly #dir: string;
  readonly #segmentBytes: number;
  readonly #groupCommit: boolean;
  readonly #onSync: ((ms: number) => void) | undefined;
  #file: Deno.FsFile | null;
  readonly #segments: Segment[];
  #lastIndex: number;
  #snapshot: WalSnapshotMarker | null;
  #hardState: HardState;
  #pending: Item[] = [];
  #draining: Promise<void> | null = null;
  #closing = false;
  /** Set when a write or sync failed: the segment's tail is then unknown. */
  #failure: WalWriteError | null = null;
  /** Records were written to the current segment after its last sync. */
  #unsynced = false;
  #stats: WalStats;

  private constructor(
    dir: string,
    options: WalOptions,
    file: Deno.FsFile,
    segments: Segment[],
    state: RecoveredState,
    peakReadBufferBytes: number,
  ) {
    this.#dir = dir;
    this.#segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
    this.#groupCommit = options.groupCommit ?? true;
    this.#onSync = options.onSync;
    this.#file = file;
    this.#segments = segments;
    this.#lastIndex = state.lastIndex;
    this.#snapshot = state.snapshot;
    this.#hardState = state.hardState;
    this.#stats = { writes: 0, syncs: 0, bytes: 0, peakReadBufferBytes };
  }

  /**
   * Opens (creating if needed) the log in folder `dir` and replays it,
   * reading each segment as a stream through a bounded buffer.
   *
   * Creates `dir` (recursively) and its first segment if missing, fsyncing
   * the new file and its folder; imports {@link WalOptions.legacyFile} if
   * given and present. Cuts a torn tail off the last segment and fsyncs the
   * truncation (see the module documentation).
   *
   * @param dir The log folder (it must hold only the log's segments).
   * @param options Segment size, group commit, legacy file; see
   *   {@link WalOptions}.
   * @returns The open log, the recovered hard state, snapshot marker and
   *   entries after it, and how many bytes of torn tail were cut off.
   * @throws {WalCorruptError} If a segment holds a bad record followed by
   *   more non-zero data, any damage in a segment before the last, a record
   *   of the wrong shape, an entry whose index leaves a gap, or a segment is
   *   missing from the sequence.
   * @throws {WalWriteError} If the folder or a segment cannot be created or
   *   opened for writing (read-only file system, permissions, disk full).
   * @throws {Error} If the folder holds a file that is not a segment.
   * @throws {RangeError} If `options.segmentBytes` or `readBufferBytes` is
   *   not a positive integer.
   *
   * @example Open a node's log at startup
   * ```ts
   * import assert from "node:assert/strict";
   * import { Wal } from "./wal.ts";
   * const dir = await Deno.makeTempDir();
   * const { wal, hardState, entries, snapshot, repairedBytes } = await Wal.open(`${dir}/wal`);
   * assert.equal(hardState.term, 0);
   * assert.equal(entries.length, 0);
   * assert.equal(snapshot, null);
   * assert.equal(repairedBytes, 0);
   * assert.equal(wal.lastIndex, 0);
   * await wal.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  static async open(
    dir: string,
    options: WalOptions = {},
  ): Promise<WalOpenResult> {
    for (const key of ["segmentBytes", "readBufferBytes"] as const) {
      const v = options[key];
      if (v !== undefined && (!Number.isSafeInteger(v) || v < 1)) {
        throw new RangeError(
          `Wal.open: options.${key} must be a positive integer of bytes, got ${v}`,
        );
      }
    }
    dir = stripTrailingSeparators(dir);
    try {
      await Deno.mkdir(dir, { recursive: true });
    } catch (err) {
      throw asWriteError(dir, "open", err);
    }
    let infos = await listSegments(dir);
    if (options.legacyFile !== undefined) {
      infos = await importLegacy(dir, options.legacyFile, infos, options);
    }
    if (infos.length === 0) {
      const path = `${dir}/${segmentName(1, 1)}`;
      await createSegment(path, dir);
      await syncDir(parentDir(dir)).catch(() => {});
      infos = [{ seq: 1, firstIndex: 1, path }];
    }
    for (let i = 1; i < infos.length; i++) {
      if (infos[i].seq !== infos[i - 1].seq + 1) {
        throw new WalCorruptError(
          infos[i].path,
          0,
          `segment ${infos[i].seq} follows segment ${
            infos[i - 1].seq
          }: the segments between them are missing`,
        );
      }
    }

    const state = new Replay(infos[0].firstIndex);
    const segments: Segment[] = [];
    let repairedBytes = 0;
    let peak = 0;
    let last: Deno.FsFile | null = null;
    try {
      for (let i = 0; i < infos.length; i++) {
        const info = infos[i];
        const isLast = i === infos.length - 1;
        let file: Deno.FsFile;
        try {
          file = await Deno.open(
            info.path,
            isLast ? { read: true, append: true } : { read: true },
          );
        } catch (err) {
          throw asWriteError(info.path, "open", err);
        }
        if (isLast) last = file;
        try {
          const { size } = await file.stat();
          const r = await replaySegment(
            file,
            info.path,
            size,
            crc32c,
            state,
            isLast,
            options.readBufferBytes,
          );
          peak = Math.max(peak, r.peakBufferBytes);
          if (r.goodEnd < size) {
            repairedBytes = size - r.goodEnd;
            try {
              await file.truncate(r.goodEnd);
              await file.sync();
            } catch (err) {
              throw asWriteError(info.path, "truncate of a torn tail", err);
            }
          }
          segments.push({ ...info, size: r.goodEnd });
        } finally {
          if (!isLast) file.close();
        }
      }
      const recovered = state.finish(dir);
      const wal = new Wal(dir, options, last!, segments, recovered, peak);
      return {
        wal,
        hardState: recovered.hardState,
        entries: recovered.entries,
        snapshot: recovered.snapshot,
        repairedBytes,
      };
    } catch (err) {
      last?.close();
      throw err;
    }
  }

  /**
   * Index of the last entry in the log, counting every append that has
   * resolved; the snapshot's index when the log after it is empty; 0 for a
   * new log.
   */
  get lastIndex(): number {
    return this.#lastIndex;
  }

  /** The newest snapshot marker recorded, or null. */
  get snapshot(): WalSnapshotMarker | null {
    return this.#snapshot === null ? null : { ...this.#snapshot };
  }

  /** Total size of the segments in bytes, counting every resolved append. */
  get sizeBytes(): number {
    let total = 0;
    for (const s of this.#segments) total += s.size;
    return total;
  }

  /** Paths of the segment files, oldest first. */
  get segmentPaths(): string[] {
    return this.#segments.map((s) => s.path);
  }

  /** Counters since open (a copy). */
  get stats(): WalStats {
    return { ...this.#stats };
  }

  /**
   * Durably appends entries and/or a hard state. The records (entries first,
   * then the hard state) are written, and fdatasynced, before the promise
   * resolves. Calls made while a write is in flight are written together,
   * in call order, with one write and one fdatasync (group commit; see
   * {@link WalOptions.groupCommit}); their records never interleave.
   *
   * `update.entries` must have contiguous indexes starting at most at
   * `lastIndex + 1` and above the snapshot's index (checked when the call's
   * turn comes, against the `lastIndex` left by the earlier calls); starting
   * lower truncates the log there (Raft §5.3), so `lastIndex` becomes the
   * last index given. An update with neither field writes nothing.
   *
   * The update is checked and encoded when `append` is called, so the caller
   * may reuse its objects at once.
   *
   * @param update The hard state and/or entries to persist.
   * @returns Resolves once the records are durable on disk (with
   *   `update.sync: false`, once they are written).
   * @throws {TypeError} If the entries leave a gap (first index above
   *   `lastIndex + 1`, or indexes not consecutive), start at or below the
   *   snapshot's index, or an entry or the hard state has the wrong shape
   *   (indexes >= 1, terms and commit >= 0, all safe integers; `data` a
   *   string; `vote` a string or null). Nothing is written.
   * @throws {Error} If the log is closed.
   * @throws {WalWriteError} If the write or the sync fails (disk full,
   *   read-only, I/O error), or an earlier one did: the log then refuses
   *   every later append.
   *
   * @example Truncate a conflicting suffix
   * ```ts
   * import assert from "node:assert/strict";
   * import { Wal } from "./wal.ts";
   * const dir = await Deno.makeTempDir();
   * const { wal } = await Wal.open(dir);
   * await wal.append({ entries: [1, 2, 3].map((index) => ({ index, term: 1, data: "x" })) });
   * await wal.append({ entries: [{ index: 2, term: 2, data: "y" }] });
   * assert.equal(wal.lastIndex, 2);
   * await wal.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  append(update: WalUpdate): Promise<void> {
    let batch: Batch;
    try {
      // Encode now, so that the caller may reuse its arrays at once.
      batch = encodeUpdate(update);
    } catch (err) {
      return Promise.reject(err);
    }
    if (batch.chunks.length === 0) return this.#enqueueNothing();
    return this.#enqueue((resolve, reject) => ({
      kind: "append",
      batch,
      resolve,
      reject,
    }));
  }

  /**
   * Records that a snapshot covers the log up to `snapshot.index` (Raft §7):
   * durably writes a snapshot marker (and the current hard state, so that no
   * deleted segment held the only copy of it), then deletes every segment
   * whose entries all lie at or below `snapshot.index`, except the segment
   * being written, and fsyncs the folder. Runs in order with appends.
   *
   * A marker beyond the last entry is allowed (a follower that installed a
   * snapshot): the log then restarts after it, and `lastIndex` becomes
   * `snapshot.index`. After a restart, {@link Wal.open} returns the marker
   * and only the entries after it.
   *
   * @param snapshot The snapshot's last index and its term.
   * @param options.discardAfter also drop every entry after `snapshot.index`
   *   (a follower that installed a snapshot its log disagrees with at that
   *   index, Raft paper §7 receiver rule 7): `lastIndex` becomes
   *   `snapshot.index`. Default false.
   * @returns Resolves once the marker is durable and covered segments are
   *   deleted.
   * @throws {TypeError} If `index` or `term` is not a safe integer >= 0, or
   *   `index` is below the current snapshot's index.
   * @throws {WalWriteError} If the write, sync or a deletion fails (a failed
   *   deletion leaves an extra segment, which is harmless).
   * @throws {Error} If the log is closed.
   *
   * @example Drop the log up to a snapshot
   * ```ts
   * import assert from "node:assert/strict";
   * import { Wal } from "./wal.ts";
   * const dir = await Deno.makeTempDir();
   * const { wal } = await Wal.open(dir, { segmentBytes: 100 });
   * for (let i = 1; i <= 10; i++) await wal.append({ entries: [{ index: i, term: 1, data: "x" }] });
   * await wal.compact({ index: 8, term: 1 });
   * await wal.close();
   * const again = await Wal.open(dir);
   * assert.equal(again.snapshot?.index, 8);
   * assert.equal(again.entries[0].index, 9);
   * await again.wal.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  compact(
    snapshot: WalSnapshotMarker,
    options: { discardAfter?: boolean } = {},
  ): Promise<void> {
    if (
      typeof snapshot !== "object" || snapshot === null ||
      !isCount(snapshot.index) || !isCount(snapshot.term)
    ) {
      return Promise.reject(
        new TypeError(
          `Wal.compact: snapshot must be { index: integer >= 0, term: integer >= 0 }, got ${
            safeJson(snapshot)
          }`,
        ),
      );
    }
    const marker = { index: snapshot.index, term: snapshot.term };
    return this.#enqueue((resolve, reject) => ({
      kind: "compact",
      marker,
      discardAfter: options.discardAfter === true,
      resolve,
      reject,
    }));
  }

  /**
   * Waits for pending appends and compactions to finish, then closes the
   * segment. Appends made after `close` reject. Calling `close` again does
   * nothing.
   *
   * @returns Resolves once the file is closed.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { Wal } from "./wal.ts";
   * const dir = await Deno.makeTempDir();
   * const { wal } = await Wal.open(dir);
   * await wal.close();
   * await assert.rejects(wal.append({ entries: [{ index: 1, term: 1, data: "" }] }));
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async close(): Promise<void> {
    this.#closing = true;
    for (let i = 0; i < 1_000_000 && this.#draining !== null; i++) {
      await this.#draining;
    }
    const file = this.#file;
    this.#file = null;
    if (file !== null && this.#unsynced && this.#failure === null) {
      // Records appended with sync: false become durable on a clean close.
      await file.syncData().catch(() => {});
      this.#unsynced = false;
    }
    file?.close();
  }

  #closedError(): Error {
    return new Error(`write-ahead log ${this.#dir} is closed`);
  }

  #enqueueNothing(): Promise<void> {
    if (this.#closing) return Promise.reject(this.#closedError());
    // Resolves after the earlier calls, like any append.
    const before = this.#draining ?? Promise.resolve();
    return before.then(() => {
      if (this.#failure !== null) throw this.#refusal();
    });
  }

  #enqueue(
    make: (resolve: () => void, reject: (err: unknown) => void) => Item,
  ): Promise<void> {
    if (this.#closing) return Promise.reject(this.#closedError());
    const done = new Promise<void>((resolve, reject) => {
      this.#pending.push(make(resolve, reject));
      this.#draining ??= this.#drain();
    });
    // A caller that awaits later (after awaiting earlier calls) still sees
    // the rejection; it is not reported as unhandled in the meantime.
    done.catch(() => {});
    return done;
  }

  #refusal(): WalWriteError {
    const first = this.#failure!;
    return new WalWriteError(
      first.path,
      "append (refused: an earlier write failed)",
      first.cause,
    );
  }

  async #drain(): Promise<void> {
    // Let the calls of the current task join the first group.
    await null;
    for (let round = 0; this.#pending.length > 0; round++) {
      const head = this.#pending[0];
      if (head.kind === "compact") {
        this.#pending.shift();
        await this.#runCompact(head);
        continue;
      }
      let n = 1;
      if (this.#groupCommit) {
        while (
          n < this.#pending.length && this.#pending[n].kind === "append"
        ) n++;
      }
      const group = this.#pending.splice(0, n) as Array<
        Extract<Item, { kind: "append" }>
      >;
      await this.#runAppends(group);
    }
    this.#draining = null;
  }

  /** Checks each batch's fit, writes the accepted ones, settles them all. */
  async #runAppends(
    group: Array<Extract<Item, { kind: "append" }>>,
  ): Promise<void> {
    if (this.#failure !== null) {
      for (const item of group) item.reject(this.#refusal());
      return;
    }
    const accepted: typeof group = [];
    let last = this.#lastIndex;
    const floor = this.#snapshot === null ? 1 : this.#snapshot.index + 1;
    for (const item of group) {
      const { firstIndex, lastIndex } = item.batch;
      if (firstIndex !== null) {
        if (firstIndex > last + 1) {
          item.reject(
            new TypeError(
              `Wal.append: the first entry's index ${firstIndex} leaves a gap after the log's last index ${last}; ` +
                `entries must start at or below ${last + 1}`,
            ),
          );
          continue;
        }
        if (firstIndex < floor) {
          item.reject(
            new TypeError(
              `Wal.append: the first entry's index ${firstIndex} is at or below the snapshot's index ${
                floor - 1
              }; entries must start at ${floor} or above`,
            ),
          );
          continue;
        }
        last = lastIndex;
      }
      accepted.push(item);
    }
    if (accepted.length === 0) return;
    try {
      const chunks = accepted.flatMap((item) => item.batch.chunks);
      const sync = accepted.some((item) => item.batch.sync);
      if (this.#groupCommit || !sync) {
        await this.#writeDurably(concat(chunks.map((c) => c.bytes)), sync);
        this.#lastIndex = last;
      } else {
        // Every entry record on its own; a hard state joins the entry before.
        for (let i = 0; i < chunks.length; i++) {
          const { index } = chunks[i];
          const parts = [chunks[i].bytes];
          while (i + 1 < chunks.length && chunks[i + 1].index === null) {
            parts.push(chunks[++i].bytes);
          }
          await this.#writeDurably(concat(parts));
          if (index !== null) this.#lastIndex = index;
        }
        this.#lastIndex = last;
      }
    } catch (err) {
      for (const item of accepted) item.reject(err);
      return;
    }
    for (const item of accepted) {
      if (item.batch.hardState !== null) {
        this.#hardState = item.batch.hardState;
      }
      item.resolve();
    }
  }

  async #runCompact(
    item: Extract<Item, { kind: "compact" }>,
  ): Promise<void> {
    if (this.#failure !== null) return item.reject(this.#refusal());
    const { marker, discardAfter } = item;
    if (this.#snapshot !== null && marker.index < this.#snapshot.index) {
      return item.reject(
        new TypeError(
          `Wal.compact: snapshot index ${marker.index} is below the current snapshot's index ${this.#snapshot.index}; a snapshot marker never moves back`,
        ),
      );
    }
    const h = this.#hardState;
    const bytes = frameRecords([
      json(
        discardAfter
          ? { t: "s", index: marker.index, term: marker.term, reset: true }
          : { t: "s", index: marker.index, term: marker.term },
      ),
      hardStateRecord(h),
    ], crc32c);
    try {
      await this.#writeDurably(bytes);
    } catch (err) {
      return item.reject(err);
    }
    this.#snapshot = marker;
    if (discardAfter || marker.index > this.#lastIndex) {
      this.#lastIndex = marker.index;
    }
    let removed = 0;
    try {
      while (
        this.#segments.length > 1 &&
        this.#segments[1].firstIndex - 1 <= marker.index
      ) {
        await Deno.remove(this.#segments[0].path);
        this.#segments.shift();
        removed++;
      }
      if (removed > 0) await syncDir(this.#dir);
    } catch (err) {
      return item.reject(asWriteError(this.#dir, "segment deletion", err));
    }
    item.resolve();
  }

  /**
   * Writes `bytes` to the current segment (starting a new one first if it is
   * full) and fdatasyncs. On failure marks the log failed and throws a
   * {@link WalWriteError}.
   */
  /**
   * Writes `bytes` at the end of the current segment (rolling to a new one
   * first when it is full) and, unless `sync` is false, fdatasyncs.
   */
  async #writeDurably(bytes: Uint8Array, sync = true): Promise<void> {
    let current = this.#segments[this.#segments.length - 1];
    let operation = "write";
    let syncMs = 0;
    try {
      if (current.size >= this.#segmentBytes) {
        if (this.#unsynced) {
          // The segment's last records were written without a sync.
          operation = "fdatasync";
          await this.#file!.syncData();
          this.#unsynced = false;
        }
        operation = "start of a new segment";
        current = await this.#roll(current);
        operation = "write";
      }
      this.#stats.writes++;
      await writeAll(this.#file!, bytes);
      if (sync) {
        operation = "fdatasync";
        const started = performance.now();
        await this.#file!.syncData();
        syncMs = performance.now() - started;
      }
    } catch (err) {
      this.#failure = asWriteError(
        current.path,
        operation,
        err,
      ) as WalWriteError;
      throw this.#failure;
    }
    this.#stats.bytes += bytes.length;
    current.size += bytes.length;
    if (!sync) {
      this.#unsynced = true;
      return;
    }
    this.#unsynced = false;
    this.#stats.syncs++;
    try {
      this.#onSync?.(syncMs);
    } catch {
      // A metrics hook must not turn a durable write into a failure.
    }
  }

  /** Starts the next segment; the current one is fdatasynced already. */
  async #roll(current: Segment): Promise<Segment> {
    const seq = current.seq + 1;
    const firstIndex = this.#lastIndex + 1;
    const path = `${this.#dir}/${segmentName(seq, firstIndex)}`;
    const file = await Deno.open(path, {
      read: true,
      append: true,
      createNew: true,
    });
    try {
      await file.sync();
      await syncDir(this.#dir);
    } catch (err) {
      file.close();
      throw err;
    }
    this.#file!.close();
    this.#file = file;
    const next: Segment = { seq, firstIndex, path, size: 0 };
    this.#segments.push(next);
    return next;
  }
}

/** The state {@link Replay.finish} hands to the log. */
interface RecoveredState {
  hardState: HardState;
  entries: Entry[];
  snapshot: WalSnapshotMarker | null;
  lastIndex: number;
}

/**
 * Applies decoded records in log order: hard states, entries (with
 * truncation) and snapshot markers, checking shapes and contiguity.
 */
class Replay {
  hardState: HardState = { term: 0, vote: null, commit: 0 };
  snapshot: WalSnapshotMarker | null = null;
  log: Entry[] = [];
  /** Index of `log[0]`, or where the next entry goes when `log` is empty. */
  logStart: number;

  constructor(firstIndex: number) {
    this.logStart = firstIndex;
  }

  get last(): number {
    return this.logStart + this.log.length - 1;
  }

  apply(path: string, offset: number, record: unknown): void {
    const r = record as Record<string, unknown> | null;
    const bad = (what: string): never => {
      throw new WalCorruptError(
        path,
        offset,
        `${what} (written by an incompatible version, or damaged before its CRC was computed): ${
          JSON.stringify(record).slice(0, 200)
        }`,
      );
    };
    if (typeof r !== "object" || r === null || Array.isArray(r)) {
      return bad("the record is not a JSON object");
    }
    if (r.t === "h") {
      if (
        !isCount(r.term) || !isCount(r.commit) ||
        (r.vote !== null && typeof r.vote !== "string")
      ) {
        return bad("the hard-state record has the wrong shape");
      }
      this.hardState = { term: r.term, vote: r.vote, commit: r.commit };
    } else if (r.t === "e") {
      if (
        !isCount(r.index) || r.index < 1 || !isCount(r.term) ||
        typeof r.data !== "string" ||
        (r.type !== undefined && r.type !== "config")
      ) {
        return bad("the entry record has the wrong shape");
      }
      if (this.snapshot !== null && r.index <= this.snapshot.index) {
        return bad(
          `entry index ${r.index} is at or below the snapshot marker's index ${this.snapshot.index}`,
        );
      }
      if (r.index < this.logStart) {
        // A truncation back into a segment that compaction deleted.
        this.log = [];
        this.logStart = r.index;
      } else if (r.index <= this.last) {
        this.log.length = r.index - this.logStart;
      } else if (r.index !== this.last + 1) {
        return bad(
          `entry index ${r.index} leaves a gap after last index ${this.last}`,
        );
      }
      this.log.push(
        r.type === "config"
          ? { index: r.index, term: r.term, data: r.data, type: "config" }
          : { index: r.index, term: r.term, data: r.data },
      );
    } else if (r.t === "s") {
      if (!isCount(r.index) || !isCount(r.term)) {
        return bad("the snapshot marker has the wrong shape");
      }
      if (this.snapshot !== null && r.index < this.snapshot.index) {
        return bad(
          `snapshot marker ${r.index} is below the earlier marker ${this.snapshot.index}`,
        );
      }
      this.snapshot = { index: r.index, term: r.term };
      if (r.index >= this.last || r.reset === true) {
        this.log = [];
        this.logStart = r.index + 1;
      } else if (r.index >= this.logStart) {
        this.log.splice(0, r.index - this.logStart + 1);
        this.logStart = r.index + 1;
      }
    } else {
      return bad(`unknown record type ${JSON.stringify(r.t)}`);
    }
  }

  finish(dir: string): RecoveredState {
    const expected = this.snapshot === null ? 1 : this.snapshot.index + 1;
    if (this.logStart > expected) {
      throw new WalCorruptError(
        dir,
        0,
        `the log's first kept entry is ${this.logStart} but ${
          this.snapshot === null
            ? "there is no snapshot marker"
            : `the snapshot marker covers only up to ${this.snapshot.index}`
        }: segments are missing`,
      );
    }
    return {
      hardState: this.hardState,
      entries: this.log,
      snapshot: this.snapshot,
      lastIndex: this.log.length > 0 ? this.last : expected - 1,
    };
  }
}

/**
 * Replays one file's records into `state`. Returns the offset just past the
 * last good record: less than `size` when a torn tail (allowed only when
 * `tailAllowed`) must be cut.
 */
async function replaySegment(
  file: Deno.FsFile,
  path: string,
  size: number,
  checksum: Checksum,
  state: Replay,
  tailAllowed: boolean,
  bufferBytes: number = DEFAULT_READ_BUFFER_BYTES,
): Promise<{ goodEnd: number; peakBufferBytes: number }> {
  const reader = new RecordReader(file, size, checksum, bufferBytes);
  for (let i = 0; i <= size; i++) {
    const r = await reader.next();
    if (r.kind === "record") {
      state.apply(path, r.offset, r.record);
      continue;
    }
    if (r.kind === "end") {
      return { goodEnd: r.offset, peakBufferBytes: reader.peakBufferBytes };
    }
    if (r.kind === "torn" && tailAllowed) {
      return { goodEnd: r.offset, peakBufferBytes: reader.peakBufferBytes };
    }
    throw new WalCorruptError(
      path,
      r.offset,
      r.kind === "torn"
        ? `${r.reason}, in a segment before the last (which was synced in full before the next one began)`
        : r.reason,
    );
  }
  throw new Error(`unreachable: more records than bytes in ${path}`);
}

/**
 * Imports the old single-file log if it exists: into a new first segment
 * (temp file, fsync, rename, fsync of the folder) when there is no segment;
 * then removes it (also when segments exist: a crash after the import).
 */
async function importLegacy(
  dir: string,
  legacy: string,
  infos: SegmentInfo[],
  options: WalOptions,
): Promise<SegmentInfo[]> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(legacy, { read: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return infos;
    throw asWriteError(legacy, "open", err);
  }
  if (infos.length > 0) {
    file.close();
    await removeDurably(legacy);
    return infos;
  }
  const state = new Replay(1);
  try {
    const { size } = await file.stat();
    await replaySegment(
      file,
      legacy,
      size,
      crc32,
      state,
      true,
      options.readBufferBytes,
    );
  } finally {
    file.close();
  }
  const recovered = state.finish(legacy);
  const path = `${dir}/${segmentName(1, 1)}`;
  try {
    await writeFileAtomicWith(path, async (out) => {
      let parts: Uint8Array[] = [];
      let bytes = 0;
      const flush = async () => {
        await writeAll(out, frameRecords(parts, crc32c));
        parts = [];
        bytes = 0;
      };
      for (const e of recovered.entries) {
        const p = json(entryRecord(e));
        parts.push(p);
        bytes += p.length;
        if (bytes >= IMPORT_CHUNK_BYTES) await flush();
      }
      const h = recovered.hardState;
      parts.push(
        hardStateRecord(h),
      );
      await flush();
    });
  } catch (err) {
    throw asWriteError(`${path}.tmp`, "legacy import", err);
  }
  await removeDurably(legacy);
  return [{ seq: 1, firstIndex: 1, path }];
}

async function removeDurably(path: string): Promise<void> {
  try {
    await Deno.remove(path);
    await syncDir(parentDir(path));
  } catch (err) {
    throw asWriteError(path, "removal of the imported legacy log", err);
  }
}

/** Creates an empty segment and makes its name durable. */
async function createSegment(path: string, dir: string): Promise<void> {
  try {
    const file = await Deno.open(path, { write: true, createNew: true });
    try {
      await file.sync();
    } finally {
      file.close();
    }
    await syncDir(dir);
  } catch (err) {
    throw asWriteError(path, "open", err);
  }
}

/**
 * Checks an update's shape and the contiguity of its entries, and encodes
 * its records.
 */
/** An entry's record; `type` is written only for config entries. */
function entryRecord(e: Entry): Record<string, unknown> {
  const record: Record<string, unknown> = {
    t: "e",
    index: e.index,
    term: e.term,
    data: e.data,
  };
  if (e.type === "config") record.type = "config";
  return record;
}

function encodeUpdate(update: WalUpdate): Batch {
  if (typeof update !== "object" || update === null) {
    throw new TypeError(
      "Wal.append: update must be an object { hardState?, entries? }",
    );
  }
  const entries = update.entries ?? [];
  if (!Array.isArray(entries)) {
    throw new TypeError("Wal.append: entries must be an array of entries");
  }
  for (const e of entries) {
    if (
      typeof e !== "object" || e === null || !isCount(e.index) ||
      e.index < 1 || !isCount(e.term) || typeof e.data !== "string" ||
      (e.type !== undefined && e.type !== "config")
    ) {
      throw new TypeError(
        `Wal.append: an entry must be { index: integer >= 1, term: integer >= 0, data: string, type?: "config" }, got ${
          safeJson(e)
        }`,
      );
    }
  }
  for (let i = 1; i < entries.length; i++) {
    if (entries[i].index !== entries[i - 1].index + 1) {
      throw new TypeError(
        `Wal.append: entry indexes must be consecutive, but ${
          entries[i - 1].index
        } is followed by ${entries[i].index}`,
      );
    }
  }
  const h = update.hardState;
  if (h !== undefined) checkHardState(h);

  // Every record of the batch framed into one buffer; each chunk is a view.
  const texts = entries.map((e) => JSON.stringify(entryRecord(e)));
  let hardState: HardState | null = null;
  if (h !== undefined) {
    hardState = { term: h.term, vote: h.vote, commit: h.commit };
    texts.push(JSON.stringify(hardStateObject(hardState)));
  }
  const { bytes, ends } = frameTextRecords(texts, crc32c);
  const chunks: Chunk[] = [];
  let start = 0;
  for (let i = 0; i < ends.length; i++) {
    chunks.push({
      bytes: bytes.subarray(start, ends[i]),
      index: i < entries.length ? entries[i].index : null,
    });
    start = ends[i];
  }
  return {
    sync: update.sync !== false,
    firstIndex: entries.length > 0 ? entries[0].index : null,
    lastIndex: entries.length > 0 ? entries[entries.length - 1].index : 0,
    hardState,
    chunks,
  };
}

/** Checks a hard state's shape for append. */
function checkHardState(h: HardState): void {
  if (
    typeof h !== "object" || h === null || !isCount(h.term) ||
    !isCount(h.commit) || (h.vote !== null && typeof h.vote !== "string")
  ) {
    throw new TypeError(
      `Wal.append: hardState must be { term: integer >= 0, vote: string | null, commit: integer >= 0 }, got ${
        safeJson(h)
      }`,
    );
  }
}

function hardStateObject(h: HardState): Record<string, unknown> {
  return { t: "h", term: h.term, vote: h.vote, commit: h.commit };
}

function hardStateRecord(h: HardState): Uint8Array {
  return json(hardStateObject(h));
}

function json(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  if (parts.length === 0) return new Uint8Array(0);
  // Views that follow each other in one buffer (one batch's records, see
  // encodeUpdate) are one view already: no copy.
  const first = parts[0];
  let contiguous = true;
  for (let i = 1; i < parts.length && contiguous; i++) {
    const previous = parts[i - 1];
    contiguous = parts[i].buffer === first.buffer &&
      parts[i].byteOffset === previous.byteOffset + previous.length;
  }
  if (contiguous) {
    const last = parts[parts.length - 1];
    return new Uint8Array(
      first.buffer,
      first.byteOffset,
      last.byteOffset + last.length - first.byteOffset,
    );
  }
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** True for a safe integer >= 0. */
function isCount(n: unknown): n is number {
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 0;
}

function safeJson(v: unknown): string {
  try {
    return String(JSON.stringify(v)).slice(0, 200);
  } catch {
    return String(v);
  }
}

function stripTrailingSeparators(dir: string): string {
  let end = dir.length;
  while (end > 1 && (dir[end - 1] === "/" || dir[end - 1] === "\\")) end--;
  return dir.slice(0, end);
}
