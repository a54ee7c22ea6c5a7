/**
 * Write-ahead log for a Raft node's persistent state (Raft paper Figure 2:
 * `currentTerm`, `votedFor`, `log[]`), kept in one file, `<dir>/wal.log`.
 *
 * ## File format
 * A sequence of records, each
 * `[u32 big-endian payload length][u32 big-endian crc32(payload)][payload]`,
 * where the payload is UTF-8 JSON, one of
 * - `{"t":"h","term":n,"vote":string|null,"commit":n}`: a hard state; the
 *   last one in the file wins;
 * - `{"t":"e","index":n,"term":n,"data":string}`: one log entry. An entry
 *   whose index is at or below the current last index first drops every entry
 *   from that index on (the log truncation after a conflict, Raft §5.3).
 *
 * ## Crash safety
 * {@link Wal.append} writes one buffer and fdatasyncs before it resolves, so
 * a resolved append survives a crash or power loss. A crash during an append
 * can leave a torn tail: a cut header, a record whose length runs past the end
 * of the file, a last record with a bad CRC, or zero bytes where the file grew
 * but its data never reached the disk. {@link Wal.open} cuts such a tail off
 * (none of it was ever acknowledged). A bad record followed by valid data is
 * not a torn write but corruption of acknowledged data, and
 * {@link Wal.open} throws {@link WalCorruptError} rather than guess.
 *
 * @module
 */

import { syncDir, writeAll } from "./_atomic_file.ts";
import { crc32 } from "./_crc32.ts";
import type { Entry, HardState } from "./types.ts";

/** Name of the log file inside a node's data directory. */
const WAL_FILE = "wal.log";
/** Bytes of a record header: payload length then CRC, both u32 big-endian. */
const HEADER_BYTES = 8;
/** The largest payload the 32-bit length field can describe. */
const MAX_PAYLOAD_BYTES = 0xffffffff;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * Thrown by {@link Wal.open} when the log holds damage that a crash during a
 * write cannot explain (a bad record followed by more data), or a record that
 * decodes but does not fit (wrong shape, or an entry index that leaves a gap).
 * The node must not start from such a directory. Moving the directory aside
 * and restarting the node empty lets it catch up from the leader; do it only
 * once the other nodes have a leader, since an empty node has forgotten the
 * votes it cast (Raft paper Figure 2: votedFor must be persistent).
 *
 * @example Tell the operator what to do
 * ```ts
 * import { Wal, WalCorruptError } from "./wal.ts";
 * const dir = await Deno.makeTempDir();
 * try {
 *   const { wal } = await Wal.open(dir);
 *   await wal.close();
 * } catch (err) {
 *   if (err instanceof WalCorruptError) console.error(err.message, err.offset);
 *   else throw err;
 * }
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class WalCorruptError extends Error {
  /** Path of the damaged log file. */
  readonly path: string;
  /** Byte offset, from the start of the file, of the first bad record. */
  readonly offset: number;

  /**
   * Builds the error and its message (file, offset, reason, what to do).
   *
   * @param path Path of the log file.
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

/** What {@link Wal.open} recovered from disk. */
export interface WalOpenResult {
  /** The open log, ready for {@link Wal.append}. */
  wal: Wal;
  /**
   * The last hard state written, or `{ term: 0, vote: null, commit: 0 }` if
   * none was.
   */
  hardState: HardState;
  /** The log entries, contiguous from index 1 (empty for a new log). */
  entries: Entry[];
  /** Bytes of torn tail cut off the end of the file (0 for a clean file). */
  repairedBytes: number;
}

/** One batch of state to persist with {@link Wal.append}. */
export interface WalUpdate {
  /** A new hard state to persist, written after `entries`. */
  hardState?: HardState;
  /**
   * Entries with contiguous indexes. The first index may be at most
   * `lastIndex + 1`; a smaller one replaces the entries from that index on.
   */
  entries?: Entry[];
}

/**
 * An open write-ahead log. Open it with {@link Wal.open}; persist hard states
 * and entries with {@link Wal.append}; {@link Wal.close} it when done. One
 * process at a time may open a given directory (this is not checked).
 *
 * @example Persist a vote and an entry, then recover them
 * ```ts
 * import { Wal } from "./wal.ts";
 * const dir = await Deno.makeTempDir();
 * const { wal } = await Wal.open(dir);
 * await wal.append({
 *   entries: [{ index: 1, term: 2, data: "" }],
 *   hardState: { term: 2, vote: "n1", commit: 0 },
 * });
 * await wal.close();
 * const again = await Wal.open(dir);
 * console.assert(again.entries.length === 1 && again.hardState.vote === "n1");
 * await again.wal.close();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class Wal {
  #file: Deno.FsFile | null;
  #path: string;
  #lastIndex: number;
  #size: number;
  /** Tail of the chain that serializes appends; never rejects. */
  #queue: Promise<void> = Promise.resolve();
  /** Set when a write or sync failed: the file's tail is then unknown. */
  #failure: unknown = null;

  private constructor(
    file: Deno.FsFile,
    path: string,
    lastIndex: number,
    size: number,
  ) {
    this.#file = file;
    this.#path = path;
    this.#lastIndex = lastIndex;
    this.#size = size;
  }

  /**
   * Opens (creating if needed) the log in `dir` and replays it.
   *
   * Creates `dir` (recursively) and `dir/wal.log` if missing, fsyncing the new
   * file and its directory. Cuts a torn tail off the file and fsyncs the
   * truncation (see the module documentation).
   *
   * @param dir The node's data directory.
   * @returns The open log, the recovered hard state and entries, and how many
   *   bytes of torn tail were cut off.
   * @throws {WalCorruptError} If the file holds a bad record followed by more
   *   non-zero data, a record of the wrong shape, or an entry whose index is
   *   not the previous last index + 1 after truncation.
   * @throws {Deno.errors.PermissionDenied} If `dir` or the file cannot be
   *   created, read or written.
   *
   * @example Open a node's log at startup
   * ```ts
   * import { Wal } from "./wal.ts";
   * const dir = await Deno.makeTempDir();
   * const { wal, hardState, entries, repairedBytes } = await Wal.open(dir);
   * console.assert(hardState.term === 0 && entries.length === 0);
   * console.assert(repairedBytes === 0 && wal.lastIndex === 0);
   * await wal.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  static async open(dir: string): Promise<WalOpenResult> {
    await Deno.mkdir(dir, { recursive: true });
    const path = `${stripTrailingSeparators(dir)}/${WAL_FILE}`;
    await createIfMissing(dir, path);

    const file = await Deno.open(path, { read: true, append: true });
    try {
      const bytes = await readAllFrom(file);
      const replayed = replay(path, bytes);
      const repairedBytes = bytes.length - replayed.goodEnd;
      if (repairedBytes > 0) {
        await file.truncate(replayed.goodEnd);
        await file.sync();
      }
      const wal = new Wal(file, path, replayed.lastIndex, replayed.goodEnd);
      return {
        wal,
        hardState: replayed.hardState,
        entries: replayed.entries,
        repairedBytes,
      };
    } catch (err) {
      file.close();
      throw err;
    }
  }

  /**
   * Index of the last entry in the log (0 when empty), counting every append
   * that has resolved.
   */
  get lastIndex(): number {
    return this.#lastIndex;
  }

  /** Size of the log file in bytes, counting every append that has resolved. */
  get sizeBytes(): number {
    return this.#size;
  }

  /**
   * Durably appends entries and/or a hard state. Encodes every record
   * (entries first, then the hard state) into one buffer, writes all of it,
   * and fdatasyncs before resolving. Concurrent calls run one after the
   * other, in call order, so their records never interleave.
   *
   * `update.entries` must have contiguous indexes starting at most at
   * `lastIndex + 1` (checked when the call's turn comes, against the
   * `lastIndex` left by the earlier calls); starting lower truncates the log
   * there, so `lastIndex` becomes the last index given. An update with
   * neither field writes nothing.
   *
   * The update is checked and encoded when `append` is called, so the caller
   * may reuse its objects at once.
   *
   * If a write or sync fails, the log rejects every later append (with the
   * first failure as the error's `cause`): what reached the disk is then
   * unknown, so the node must stop and reopen the log (which repairs a torn
   * tail).
   *
   * @param update The hard state and/or entries to persist.
   * @returns Resolves once the records are durable on disk.
   * @throws {TypeError} If the entries leave a gap (first index above
   *   `lastIndex + 1`, or indexes not consecutive), or an entry or the hard
   *   state has the wrong shape (indexes >= 1, terms and commit >= 0, all
   *   safe integers; `data` a string; `vote` a string or null). Nothing is
   *   written.
   * @throws {Error} If the log is closed, or an earlier append failed.
   * @throws {Deno.errors.WriteZero} Or another I/O error, if the write or the
   *   sync fails.
   *
   * @example Truncate a conflicting suffix
   * ```ts
   * import { Wal } from "./wal.ts";
   * const dir = await Deno.makeTempDir();
   * const { wal } = await Wal.open(dir);
   * await wal.append({ entries: [1, 2, 3].map((index) => ({ index, term: 1, data: "x" })) });
   * await wal.append({ entries: [{ index: 2, term: 2, data: "y" }] });
   * console.assert(wal.lastIndex === 2);
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
    const run = this.#queue.then(() => this.#write(batch));
    this.#queue = run.then(() => {}, () => {});
    return run;
  }

  async #write(batch: Batch): Promise<void> {
    if (this.#file === null) {
      throw new Error(`write-ahead log ${this.#path} is closed`);
    }
    if (this.#failure !== null) {
      throw new Error(
        `write-ahead log ${this.#path} failed an earlier write and refuses ` +
          `further appends; close it and reopen it to recover`,
        { cause: this.#failure },
      );
    }
    let newLast = this.#lastIndex;
    if (batch.firstIndex !== null) {
      if (batch.firstIndex > this.#lastIndex + 1) {
        throw new TypeError(
          `Wal.append: the first entry's index ${batch.firstIndex} leaves a gap after the log's last index ${this.#lastIndex}; ` +
            `entries must start at or below ${this.#lastIndex + 1}`,
        );
      }
      newLast = batch.lastIndex;
    }
    if (batch.bytes.length === 0) return;

    try {
      await writeAll(this.#file, batch.bytes);
      await this.#file.syncData();
    } catch (err) {
      this.#failure = err;
      throw err;
    }
    this.#size += batch.bytes.length;
    this.#lastIndex = newLast;
  }

  /**
   * Waits for pending appends to finish, then closes the file. Appends made
   * after `close` reject. Calling `close` again does nothing.
   *
   * @returns Resolves once the file is closed.
   *
   * @example
   * ```ts
   * import { Wal } from "./wal.ts";
   * const dir = await Deno.makeTempDir();
   * const { wal } = await Wal.open(dir);
   * await wal.close();
   * await Deno.remove(dir, { recursive: true });
   * ```
   */
  async close(): Promise<void> {
    const done = this.#queue.then(() => {
      const file = this.#file;
      this.#file = null;
      file?.close();
    });
    this.#queue = done.catch(() => {});
    await done;
  }
}

/** Result of replaying a log file's bytes. */
interface Replayed {
  hardState: HardState;
  entries: Entry[];
  lastIndex: number;
  /** Offset just past the last good record: the file's repaired length. */
  goodEnd: number;
}

/**
 * Decodes every record of `bytes`. Stops at a torn tail, returning `goodEnd`
 * before it; throws {@link WalCorruptError} on damage a torn write cannot
 * explain.
 */
function replay(path: string, bytes: Uint8Array): Replayed {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const size = bytes.length;
  // Every byte from `zeroFrom` to the end is 0.
  let zeroFrom = size;
  while (zeroFrom > 0 && bytes[zeroFrom - 1] === 0) zeroFrom--;

  let hardState: HardState = { term: 0, vote: null, commit: 0 };
  const entries: Entry[] = [];
  let off = 0;
  while (off < size) {
    // A zero-filled rest: the file grew but the data never reached the disk.
    if (off >= zeroFrom) break;
    // A cut header.
    if (size - off < HEADER_BYTES) break;
    const len = view.getUint32(off);
    const crc = view.getUint32(off + 4);
    const end = off + HEADER_BYTES + len;
    if (end > size) {
      // The last record was cut short, unless its length field is what is
      // damaged and acknowledged records follow.
      if (findRecord(bytes, off + 1) !== -1) {
        throw new WalCorruptError(
          path,
          off,
          `the record length ${len} runs past the end of the file (${size} bytes) but valid records follow it`,
        );
      }
      break;
    }
    const payload = bytes.subarray(off + HEADER_BYTES, end);
    let record: unknown;
    let problem: string | null = null;
    if (crc32(payload) !== crc) {
      problem = "CRC mismatch";
    } else {
      try {
        record = JSON.parse(decoder.decode(payload));
      } catch {
        problem = "the payload is not UTF-8 JSON";
      }
    }
    if (problem !== null) {
      // A damaged last record is a torn write; damage before more data is not.
      if (end >= zeroFrom) break;
      throw new WalCorruptError(
        path,
        off,
        `${problem} in a record followed by more data`,
      );
    }
    applyRecord(path, off, record, entries, (h) => hardState = h);
    off = end;
  }
  return {
    hardState,
    entries,
    lastIndex: entries.length,
    goodEnd: off,
  };
}

/**
 * Applies one decoded record to the replay state, checking its shape and,
 * for an entry, that its index continues the log.
 */
function applyRecord(
  path: string,
  offset: number,
  record: unknown,
  entries: Entry[],
  setHardState: (h: HardState) => void,
): void {
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
    setHardState({ term: r.term, vote: r.vote, commit: r.commit });
  } else if (r.t === "e") {
    if (
      !isCount(r.index) || r.index < 1 || !isCount(r.term) ||
      typeof r.data !== "string"
    ) {
      return bad("the entry record has the wrong shape");
    }
    if (r.index <= entries.length) entries.length = r.index - 1;
    if (r.index !== entries.length + 1) {
      return bad(
        `entry index ${r.index} leaves a gap after last index ${entries.length}`,
      );
    }
    entries.push({ index: r.index, term: r.term, data: r.data });
  } else {
    return bad(`unknown record type ${JSON.stringify(r.t)}`);
  }
}

/**
 * Returns the offset of the first complete record (valid header, CRC and
 * JSON) that starts at or after `from`, or -1. Used to tell a cut-short last
 * record from a damaged length field in the middle of the log.
 */
function findRecord(bytes: Uint8Array, from: number): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let p = from; p + HEADER_BYTES < bytes.length; p++) {
    const len = view.getUint32(p);
    if (len === 0 || p + HEADER_BYTES + len > bytes.length) continue;
    const payload = bytes.subarray(p + HEADER_BYTES, p + HEADER_BYTES + len);
    if (crc32(payload) !== view.getUint32(p + 4)) continue;
    try {
      JSON.parse(decoder.decode(payload));
      return p;
    } catch {
      continue;
    }
  }
  return -1;
}

/** One append, encoded and checked except for its fit with the log. */
interface Batch {
  /** Index of the first entry, or null when the update has no entries. */
  firstIndex: number | null;
  /** Index of the last entry (meaningless when `firstIndex` is null). */
  lastIndex: number;
  /** Every record, entries first, then the hard state. */
  bytes: Uint8Array;
}

/**
 * Checks an update's shape and the contiguity of its entries, and encodes
 * its records into one buffer.
 */
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
      e.index < 1 || !isCount(e.term) || typeof e.data !== "string"
    ) {
      throw new TypeError(
        `Wal.append: an entry must be { index: integer >= 1, term: integer >= 0, data: string }, got ${
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
  if (update.hardState !== undefined) checkHardState(update.hardState);

  const payloads: Uint8Array[] = entries.map((e) =>
    encoder.encode(JSON.stringify({
      t: "e",
      index: e.index,
      term: e.term,
      data: e.data,
    }))
  );
  if (update.hardState !== undefined) {
    const h = update.hardState;
    payloads.push(encoder.encode(JSON.stringify({
      t: "h",
      term: h.term,
      vote: h.vote,
      commit: h.commit,
    })));
  }
  let total = 0;
  for (const p of payloads) {
    if (p.length > MAX_PAYLOAD_BYTES) {
      throw new TypeError(
        `Wal.append: a record of ${p.length} bytes exceeds the ${MAX_PAYLOAD_BYTES}-byte limit`,
      );
    }
    total += HEADER_BYTES + p.length;
  }
  const bytes = new Uint8Array(total);
  const view = new DataView(bytes.buffer);
  let off = 0;
  for (const p of payloads) {
    view.setUint32(off, p.length);
    view.setUint32(off + 4, crc32(p));
    bytes.set(p, off + HEADER_BYTES);
    off += HEADER_BYTES + p.length;
  }
  return {
    firstIndex: entries.length > 0 ? entries[0].index : null,
    lastIndex: entries.length > 0 ? entries[entries.length - 1].index : 0,
    bytes,
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

/** Parent of a directory path, for fsyncing its entry; "." if it has none. */
function parentOf(dir: string): string {
  const d = stripTrailingSeparators(dir);
  const i = Math.max(d.lastIndexOf("/"), d.lastIndexOf("\\"));
  if (i < 0) return ".";
  return i === 0 ? d[0] : d.slice(0, i);
}

/**
 * Creates an empty log file if there is none, making the file and its name
 * durable (fsync the file, its directory, and the directory's parent in case
 * the directory itself was just created).
 */
async function createIfMissing(dir: string, path: string): Promise<void> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { write: true, createNew: true });
  } catch (err) {
    if (err instanceof Deno.errors.AlreadyExists) return;
    throw err;
  }
  try {
    await file.sync();
  } finally {
    file.close();
  }
  await syncDir(dir);
  await syncDir(parentOf(dir));
}

/** Reads an open file from its current position to its end. */
async function readAllFrom(file: Deno.FsFile): Promise<Uint8Array> {
  const { size } = await file.stat();
  let buf = new Uint8Array(Math.max(size, 4096));
  let len = 0;
  while (true) {
    if (len === buf.length) {
      const bigger = new Uint8Array(buf.length * 2);
      bigger.set(buf);
      buf = bigger;
    }
    const n = await file.read(buf.subarray(len));
    if (n === null) break;
    len += n;
  }
  return buf.subarray(0, len);
}
