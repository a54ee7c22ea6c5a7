/**
 * Snapshot files of a Raft node (Raft paper §7): the state machine's state at
 * a log index, kept so that the write-ahead log before it can be dropped.
 *
 * ## Folder layout
 * The snapshot folder holds files named
 * `<index>-<term>.snap` (16 lowercase hex digits each), so names sort by
 * index. {@link SnapshotStore.save} keeps the newest two and deletes older
 * ones.
 *
 * ## File format
 * `"RAFTSNAP"` (8 bytes) `[u32 BE header length][u32 BE crc32c]`
 * `[header: UTF-8 JSON {"index","term","meta","dataBytes"}][data: UTF-8]`,
 * where the CRC-32C (RFC 3720) covers the header and the data.
 *
 * ## Crash safety
 * A snapshot is written to `<name>.tmp`, fsynced, renamed to its name, and
 * the folder is fsynced, so after a crash at any moment a snapshot file is
 * either complete or absent; a leftover temp file is deleted by
 * {@link SnapshotStore.open}.
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
import { crc32c } from "./_crc32.ts";

const MAGIC = new TextEncoder().encode("RAFTSNAP");
/** Magic, header length, CRC. */
const PREFIX_BYTES = MAGIC.length + 8;
/** The largest header (index, term, meta) a snapshot file may have. */
const MAX_HEADER_BYTES = 64 * 1024 * 1024;
/** Snapshot files kept by {@link SnapshotStore.save}. */
const KEEP = 2;
/** Bytes written or read per call. */
const CHUNK_BYTES = 1024 * 1024;
const SNAPSHOT_NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.snap$/;

const encoder = new TextEncoder();

/**
 * Thrown by {@link SnapshotStore.save} when the snapshot cannot be written,
 * fsynced or renamed into place, or an old one removed: disk full
 * (`ENOSPC`), a read-only file system (`EROFS`), an I/O error (`EIO`). The
 * message names the file, the errno and what to do. The snapshot it was
 * saving is not in place (its temp file is removed); the older snapshots
 * and the log are as they were.
 *
 * @example Report a full disk
 * ```ts
 * import assert from "node:assert/strict";
 * import { SnapshotWriteError } from "./snapshot_store.ts";
 * const err = new SnapshotWriteError("/data/snap/x.snap", "write", Object.assign(new Error("No space left on device"), { code: "ENOSPC" }));
 * assert.equal(err.code, "ENOSPC");
 * assert.match(err.message, /^snapshot \/data\/snap\/x\.snap: write failed: disk full \(ENOSPC\)\. Free space/);
 * ```
 */
export class SnapshotWriteError extends Error {
  /** The file or folder the failed operation was on. */
  readonly path: string;
  /** The errno name, e.g. `"ENOSPC"`; `null` if unknown. */
  readonly code: string | null;

  /**
   * Makes the error of a failed snapshot write, naming the file, the errno
   * and what to do.
   *
   * @param path The snapshot file (or folder).
   * @param operation What failed, e.g. `"write"`, `"removal of an old snapshot"`.
   * @param cause The error the runtime threw (its `code` names the errno).
   */
  constructor(path: string, operation: string, cause: unknown) {
    const code = errnoOf(cause);
    super(
      `snapshot ${path}: ${operation} failed: ${describeErrno(code, cause)}. ${
        adviceFor(code)
      } The older snapshots and the log are unchanged.`,
      { cause },
    );
    this.name = "SnapshotWriteError";
    this.path = path;
    this.code = code;
  }
}

/** A snapshot to save: the state machine at a log index. */
export interface Snapshot {
  /** Last log index the snapshot covers (>= 1). */
  index: number;
  /** Term of the entry at `index` (>= 0). */
  term: number;
  /** JSON-serializable metadata, e.g. the cluster membership at `index`. */
  meta: unknown;
  /** The state machine's serialized state. */
  data: string;
}

/** A snapshot loaded by {@link SnapshotStore.latest}. */
export interface StoredSnapshot extends Snapshot {
  /** Path of the file it was read from. */
  path: string;
}

/**
 * Thrown by {@link SnapshotStore.latest} when the newest snapshot file is
 * damaged (bad magic, sizes or CRC). It does not fall back to an older
 * snapshot: the write-ahead log may already be compacted up to the newest,
 * so an older one would leave a gap. Restore the file from a backup, or move
 * the data folder aside and restart the node empty once the other nodes have
 * a leader, so it catches up from the leader.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SnapshotCorruptError, SnapshotStore } from "./snapshot_store.ts";
 * const dir = await Deno.makeTempDir();
 * const store = await SnapshotStore.open(dir);
 * await store.save({ index: 10, term: 2, meta: { voters: ["n1"] }, data: '{"k":"v"}' });
 * const { path } = (await store.latest())!;
 * const bytes = await Deno.readFile(path);
 * bytes[bytes.length - 2] ^= 0xff; // damage the data
 * await Deno.writeFile(path, bytes);
 * await assert.rejects(
 *   store.latest(),
 *   (error) => error instanceof SnapshotCorruptError && error.path === path,
 * );
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class SnapshotCorruptError extends Error {
  /** Path of the damaged snapshot file. */
  readonly path: string;

  /**
   * Builds the error and its message.
   *
   * @param path The snapshot file.
   * @param reason What is wrong with it.
   */
  constructor(path: string, reason: string) {
    super(
      `snapshot file ${path} is corrupt: ${reason}. It is the newest snapshot and the ` +
        `write-ahead log may be compacted up to it, so no older one is used instead; ` +
        `restore it from a backup, or move the data folder aside, wait until the ` +
        `other nodes have a leader, then restart the node empty so it catches up from the leader.`,
    );
    this.name = "SnapshotCorruptError";
    this.path = path;
  }
}

/**
 * The snapshot files of a node, in one folder. Open it with
 * {@link SnapshotStore.open}; write with {@link SnapshotStore.save}; load
 * the newest at start with {@link SnapshotStore.latest}. Calls must not run
 * concurrently.
 *
 * @example Save and load a snapshot
 * ```ts
 * import assert from "node:assert/strict";
 * import { SnapshotStore } from "./snapshot_store.ts";
 * const dir = await Deno.makeTempDir();
 * const store = await SnapshotStore.open(`${dir}/snap`);
 * await store.save({ index: 10, term: 2, meta: { voters: ["n1"] }, data: '{"k":"v"}' });
 * const back = await store.latest();
 * assert.equal(back?.index, 10);
 * assert.equal(back?.data, '{"k":"v"}');
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export class SnapshotStore {
  readonly #dir: string;

  private constructor(dir: string) {
    this.#dir = dir;
  }

  /**
   * Opens (creating if needed) the snapshot folder `dir`, and deletes the
   * temp file a crash during {@link SnapshotStore.save} may have left.
   *
   * @param dir The snapshot folder.
   * @returns The store.
   * @throws {Deno.errors.PermissionDenied} Or another I/O error, if the
   *   folder cannot be created or read.
   */
  static async open(dir: string): Promise<SnapshotStore> {
    await Deno.mkdir(dir, { recursive: true });
    let removed = false;
    for await (const e of Deno.readDir(dir)) {
      if (e.isFile && e.name.endsWith(".snap.tmp")) {
        await Deno.remove(`${dir}/${e.name}`);
        removed = true;
      }
    }
    if (removed) await syncDir(dir);
    await syncDir(parentDir(dir)).catch(() => {});
    return new SnapshotStore(dir);
  }

  /** The snapshot files, newest (highest index) first. */
  async files(): Promise<string[]> {
    const found: Array<{ index: number; term: number; path: string }> = [];
    for await (const e of Deno.readDir(this.#dir)) {
      const m = e.isFile ? SNAPSHOT_NAME.exec(e.name) : null;
      if (m === null) continue;
      found.push({
        index: parseInt(m[1], 16),
        term: parseInt(m[2], 16),
        path: `${this.#dir}/${e.name}`,
      });
    }
    found.sort((a, b) => b.index - a.index || b.term - a.term);
    return found.map((f) => f.path);
  }

  /**
   * Writes a snapshot atomically and durably (temp file, fsync, rename,
   * fsync of the folder), then deletes all but the newest two snapshot files.
   * Memory: one UTF-8 copy of `data` besides the string.
   *
   * @param snapshot The snapshot; `meta` must be JSON-serializable.
   * @returns Resolves once the file and its name are durable, with the
   *   file's size in bytes.
   * @throws {TypeError} If `index` is not a safe integer >= 1, `term` not
   *   one >= 0, `data` not a string, or `meta` not JSON-serializable.
   * @throws {RangeError} If `index` is below the newest saved snapshot's.
   * @throws {SnapshotWriteError} If an I/O operation fails (disk full,
   *   read-only, I/O error); the temp file is then removed and no snapshot
   *   replaced.
   */
  async save(snapshot: Snapshot): Promise<number> {
    const { index, term, meta, data } = snapshot;
    if (
      !Number.isSafeInteger(index) || index < 1 ||
      !Number.isSafeInteger(term) || term < 0 || typeof data !== "string"
    ) {
      throw new TypeError(
        `SnapshotStore.save: snapshot must be { index: integer >= 1, term: integer >= 0, meta, data: string }, got index ${index}, term ${term}, data of type ${typeof data}`,
      );
    }
    const newest = (await this.files())[0];
    if (newest !== undefined) {
      const m = SNAPSHOT_NAME.exec(newest.slice(newest.lastIndexOf("/") + 1))!;
      const newestIndex = parseInt(m[1], 16);
      if (index < newestIndex) {
        throw new RangeError(
          `SnapshotStore.save: snapshot index ${index} is below the newest saved snapshot's index ${newestIndex} (${newest}); snapshots only move forward`,
        );
      }
    }
    let metaJson: string | undefined;
    try {
      metaJson = JSON.stringify(meta);
    } catch (err) {
      throw new TypeError(
        `SnapshotStore.save: meta must be JSON-serializable: ${
          (err as Error).message
        }`,
      );
    }
    const body = encoder.encode(data);
    const header = encoder.encode(JSON.stringify({
      index,
      term,
      meta: metaJson === undefined ? null : JSON.parse(metaJson),
      dataBytes: body.length,
    }));
    const prefix = new Uint8Array(PREFIX_BYTES);
    prefix.set(MAGIC);
    const view = new DataView(prefix.buffer);
    view.setUint32(MAGIC.length, header.length);
    view.setUint32(MAGIC.length + 4, crc32c(body, crc32c(header)));

    const path = `${this.#dir}/${hex16(index)}-${hex16(term)}.snap`;
    try {
      await writeFileAtomicWith(path, async (file) => {
        await writeAll(file, prefix);
        await writeAll(file, header);
        for (let off = 0; off < body.length; off += CHUNK_BYTES) {
          await writeAll(file, body.subarray(off, off + CHUNK_BYTES));
        }
      });
    } catch (err) {
      throw new SnapshotWriteError(path, "write", err);
    }
    const old = (await this.files()).slice(KEEP);
    try {
      for (const p of old) await Deno.remove(p);
      if (old.length > 0) await syncDir(this.#dir);
    } catch (err) {
      throw new SnapshotWriteError(
        this.#dir,
        "removal of an old snapshot",
        err,
      );
    }
    return PREFIX_BYTES + header.length + body.length;
  }

  /**
   * Loads the newest snapshot (highest index), streaming the file through a
   * bounded buffer into one byte array of the data's size and checking its
   * CRC-32C.
   *
   * @returns The snapshot and its path, or null if none was saved.
   * @throws {SnapshotCorruptError} If the newest file is damaged (no older
   *   one is tried).
   * @throws {Deno.errors.PermissionDenied} Or another I/O error.
   */
  async latest(): Promise<StoredSnapshot | null> {
    const newest = (await this.files())[0];
    if (newest === undefined) return null;
    return await readSnapshot(newest);
  }
}

async function readSnapshot(path: string): Promise<StoredSnapshot> {
  const file = await Deno.open(path, { read: true });
  try {
    const { size } = await file.stat();
    const bad = (reason: string) => new SnapshotCorruptError(path, reason);
    if (size < PREFIX_BYTES) {
      throw bad(`only ${size} bytes, shorter than its fixed header`);
    }
    const prefix = await readExactly(file, PREFIX_BYTES);
    for (let i = 0; i < MAGIC.length; i++) {
      if (prefix[i] !== MAGIC[i]) throw bad("it does not start with RAFTSNAP");
    }
    const view = new DataView(prefix.buffer);
    const headerBytes = view.getUint32(MAGIC.length);
    const crc = view.getUint32(MAGIC.length + 4);
    if (headerBytes > MAX_HEADER_BYTES || PREFIX_BYTES + headerBytes > size) {
      throw bad(
        `header length ${headerBytes} does not fit the file (${size} bytes)`,
      );
    }
    const headerRaw = await readExactly(file, headerBytes);
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(
        new TextDecoder("utf-8", { fatal: true }).decode(headerRaw),
      );
    } catch {
      throw bad("the header is not UTF-8 JSON");
    }
    const { index, term, meta, dataBytes } = header ?? {};
    if (
      !Number.isSafeInteger(index) || !Number.isSafeInteger(term) ||
      !Number.isSafeInteger(dataBytes) ||
      PREFIX_BYTES + headerBytes + (dataBytes as number) !== size
    ) {
      throw bad(
        `the header ${
          JSON.stringify(header).slice(0, 200)
        } does not match the file's ${size} bytes`,
      );
    }
    const body = new Uint8Array(dataBytes as number);
    let sum = crc32c(headerRaw);
    for (let off = 0; off < body.length;) {
      const n = await file.read(body.subarray(off, off + CHUNK_BYTES));
      if (n === null) throw bad("the file ended early");
      sum = crc32c(body.subarray(off, off + n), sum);
      off += n;
    }
    if (sum !== crc) throw bad("CRC mismatch");
    let data: string;
    try {
      data = new TextDecoder("utf-8", { fatal: true }).decode(body);
    } catch {
      throw bad("the data is not UTF-8");
    }
    return { index: index as number, term: term as number, meta, data, path };
  } finally {
    file.close();
  }
}

async function readExactly(file: Deno.FsFile, n: number): Promise<Uint8Array> {
  const out = new Uint8Array(n);
  for (let off = 0; off < n;) {
    const got = await file.read(out.subarray(off));
    if (got === null) throw new Error("unexpected end of file");
    off += got;
  }
  return out;
}

function hex16(n: number): string {
  return n.toString(16).padStart(16, "0");
}
