/**
 * Crash-safe whole-file writes for small files a Raft node keeps beside its
 * write-ahead log (`meta.json` with the node id and peers, snapshots).
 *
 * After a crash at any moment, a file written with {@link writeFileAtomic}
 * holds either its old content or its new content, never a mix, and once the
 * promise resolves the new content survives a power loss.
 *
 * @module
 */

/**
 * Returns the directory part of `path` (`"a/b/c"` → `"a/b"`, `"c"` → `"."`,
 * `"/c"` → `"/"`). Accepts `\` as a separator on Windows.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parentDir } from "./_atomic_file.ts";
 * assert.equal(parentDir("data/n1/cluster_secret"), "data/n1");
 * ```
 */
export function parentDir(path: string): string {
  const windows = Deno.build.os === "windows";
  let end = path.length;
  while (end > 1 && isSeparator(path[end - 1], windows)) end--;
  let i = end - 1;
  while (i >= 0 && !isSeparator(path[i], windows)) i--;
  if (i < 0) return ".";
  if (i === 0) return path[0];
  return path.slice(0, i);
}

/**
 * The errno name of an I/O error (`"ENOSPC"`, `"EROFS"`, `"EIO"`...), or
 * null when the runtime gave none.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { errnoOf } from "./_atomic_file.ts";
 * assert.equal(errnoOf(Object.assign(new Error("full"), { code: "ENOSPC" })), "ENOSPC");
 * assert.equal(errnoOf(new Error("no code")), null);
 * ```
 */
export function errnoOf(err: unknown): string | null {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  if (err instanceof Deno.errors.PermissionDenied) return "EACCES";
  return null;
}

/**
 * What an I/O error means, in words with the errno, e.g.
 * `"disk full (ENOSPC)"`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { describeErrno } from "./_atomic_file.ts";
 * assert.equal(describeErrno("EROFS", new Error("x")), "read-only file system (EROFS)");
 * ```
 */
export function describeErrno(code: string | null, cause: unknown): string {
  switch (code) {
    case "ENOSPC":
      return "disk full (ENOSPC)";
    case "EDQUOT":
      return "disk quota exceeded (EDQUOT)";
    case "EROFS":
      return "read-only file system (EROFS)";
    case "EACCES":
    case "EPERM":
      return `permission denied (${code})`;
    case "EIO":
      return "I/O error (EIO)";
    default: {
      const message = cause instanceof Error ? cause.message : String(cause);
      return code === null ? message : `${message} (${code})`;
    }
  }
}

/**
 * What an operator does about a failed write with this errno, ending with
 * a restart of the node.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { adviceFor } from "./_atomic_file.ts";
 * assert.match(adviceFor("ENOSPC"), /^Free space/);
 * ```
 */
export function adviceFor(code: string | null): string {
  switch (code) {
    case "ENOSPC":
    case "EDQUOT":
      return "Free space on that file system (or move the data folder to a larger one), then restart the node.";
    case "EROFS":
      return "Remount the file system read-write (or move the data folder to a writable one), then restart the node.";
    case "EACCES":
    case "EPERM":
      return "Fix the permissions so this process may write the folder, then restart the node.";
    default:
      return "Check the disk (e.g. dmesg), then restart the node.";
  }
}

/**
 * An I/O failure on `path` as an error whose message says what failed, the
 * errno in words and what to do (`code` is the errno). Errors that are no
 * I/O failure (no errno) come back unchanged.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ioFailure } from "./_atomic_file.ts";
 * const err = ioFailure("/d/LOCK", "open", Object.assign(new Error("Read-only file system (os error 30)"), { code: "EROFS" }));
 * assert.equal((err as { code?: string }).code, "EROFS");
 * assert.match((err as Error).message, /^\/d\/LOCK: open failed: read-only file system \(EROFS\)\. Remount/);
 * ```
 */
export function ioFailure(
  path: string,
  operation: string,
  cause: unknown,
): unknown {
  const code = errnoOf(cause);
  if (code === null) return cause;
  return Object.assign(
    new Error(
      `${path}: ${operation} failed: ${describeErrno(code, cause)}. ${
        adviceFor(code)
      }`,
      { cause },
    ),
    { code },
  );
}

function isSeparator(ch: string, windows: boolean): boolean {
  return ch === "/" || (windows && ch === "\\");
}

/**
 * True for the errors a platform gives when it cannot fsync a directory:
 * Windows refuses to open a directory as a file; some Linux file systems
 * answer `EINVAL` or `ENOTSUP` to `fsync` on a directory.
 */
function isDirSyncUnsupported(err: unknown): boolean {
  if (Deno.build.os === "windows") {
    return err instanceof Deno.errors.PermissionDenied ||
      err instanceof Deno.errors.IsADirectory;
  }
  if (err instanceof Deno.errors.NotSupported) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return code === "EINVAL" || code === "ENOTSUP" || code === "EOPNOTSUPP";
}

/**
 * Flushes a directory's entries (file creations, renames, removals within it)
 * to stable storage, so that a new or renamed file's name survives a power
 * loss. On platforms that cannot fsync a directory (Windows, and some Linux
 * file systems) it resolves without doing anything.
 *
 * @param dir Path of the directory to flush.
 * @returns Resolves once the directory's entries are durable.
 * @throws {Deno.errors.NotFound} If `dir` does not exist.
 * @throws {Deno.errors.PermissionDenied} If `dir` cannot be opened for reading
 *   (other than on Windows).
 *
 * @example Make a freshly created file's name durable
 * ```ts
 * import assert from "node:assert/strict";
 * import { syncDir } from "./_atomic_file.ts";
 * const dir = await Deno.makeTempDir();
 * await Deno.writeTextFile(`${dir}/node.id`, "n1");
 * await syncDir(dir);
 * await assert.rejects(syncDir(`${dir}/missing`), Deno.errors.NotFound);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function syncDir(dir: string): Promise<void> {
  let handle: Deno.FsFile;
  try {
    handle = await Deno.open(dir, { read: true });
  } catch (err) {
    if (isDirSyncUnsupported(err)) return;
    throw err;
  }
  try {
    await handle.sync();
  } catch (err) {
    if (!isDirSyncUnsupported(err)) throw err;
  } finally {
    handle.close();
  }
}

/**
 * Writes all of `bytes` to an open file, looping over partial writes.
 *
 * @param file An open file handle with write access.
 * @param bytes The bytes to write at the file's current position.
 * @returns Resolves once every byte has been handed to the OS (not yet
 *   durable: call `file.sync()` or `file.syncData()` for that).
 * @throws {Deno.errors.WriteZero} If the OS accepts zero bytes.
 *
 * @example Write a buffer fully, then make it durable
 * ```ts
 * import assert from "node:assert/strict";
 * import { writeAll } from "./_atomic_file.ts";
 * const dir = await Deno.makeTempDir();
 * const file = await Deno.open(`${dir}/log`, { create: true, append: true });
 * await writeAll(file, new Uint8Array(100_000));
 * await file.syncData();
 * file.close();
 * assert.equal((await Deno.stat(`${dir}/log`)).size, 100_000);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeAll(
  file: Deno.FsFile,
  bytes: Uint8Array,
): Promise<void> {
  let off = 0;
  while (off < bytes.length) {
    const n = await file.write(bytes.subarray(off));
    if (n <= 0) {
      throw new Deno.errors.WriteZero(
        `write accepted 0 of ${bytes.length - off} remaining bytes`,
      );
    }
    off += n;
  }
}

/**
 * Replaces the content of the file at `path` with `bytes`, atomically and
 * durably: it writes `<path>.tmp`, fsyncs it, renames it over `path`, then
 * fsyncs the parent directory so the rename itself survives a power loss.
 *
 * A crash leaves `path` with either its old or its new content (and perhaps a
 * stale `<path>.tmp`, which the next call overwrites). Calls for the same
 * `path` must not run concurrently: they share the `.tmp` name.
 *
 * @param path Destination file path. Its parent directory must exist.
 * @param bytes The complete new content (any length, including 0).
 * @returns Resolves once the new content and the rename are durable.
 * @throws {Deno.errors.NotFound} If the parent directory does not exist.
 * @throws {Deno.errors.PermissionDenied} If the directory is not writable.
 * @throws {Deno.errors.IsADirectory} If `path` is a directory (from the rename;
 *   the `.tmp` file is removed).
 *
 * @example Persist a node's identity
 * ```ts
 * import assert from "node:assert/strict";
 * import { readFileIfExists, writeFileAtomic } from "./_atomic_file.ts";
 * const dir = await Deno.makeTempDir();
 * const meta = new TextEncoder().encode(JSON.stringify({ id: "n1", peers: [] }));
 * await writeFileAtomic(`${dir}/meta.json`, meta);
 * assert.deepEqual(await readFileIfExists(`${dir}/meta.json`), meta);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeFileAtomic(
  path: string,
  bytes: Uint8Array,
): Promise<void> {
  await writeFileAtomicWith(path, (file) => writeAll(file, bytes));
}

/**
 * Like {@link writeFileAtomic}, but the content is written by `write` onto
 * the open temp file `<path>.tmp` (in pieces, so a large file never has to
 * be one buffer); then the temp file is fsynced, renamed over `path`, and
 * the parent directory fsynced. On any failure the temp file is removed.
 *
 * @param path Destination file path. Its parent directory must exist.
 * @param write Writes the complete content at the file's current position
 *   (e.g. with {@link writeAll}); it must not close the file.
 * @returns Resolves once the new content and the rename are durable.
 * @throws {Deno.errors.NotFound} If the parent directory does not exist.
 * @throws {Deno.errors.PermissionDenied} If the directory is not writable.
 * @throws Whatever `write` throws (the temp file is removed first).
 *
 * @example Write a file in two pieces
 * ```ts
 * import assert from "node:assert/strict";
 * import { writeAll, writeFileAtomicWith } from "./_atomic_file.ts";
 * const dir = await Deno.makeTempDir();
 * await writeFileAtomicWith(`${dir}/big`, async (file) => {
 *   await writeAll(file, new Uint8Array(10));
 *   await writeAll(file, new Uint8Array(20));
 * });
 * assert.equal((await Deno.stat(`${dir}/big`)).size, 30);
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function writeFileAtomicWith(
  path: string,
  write: (file: Deno.FsFile) => Promise<void>,
): Promise<void> {
  const tmp = `${path}.tmp`;
  const file = await Deno.open(tmp, {
    write: true,
    create: true,
    truncate: true,
  });
  try {
    try {
      await write(file);
      await file.sync();
    } finally {
      file.close();
    }
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {});
    throw err;
  }
  await syncDir(parentDir(path));
}

/**
 * Reads a whole file, or gives `null` if it does not exist (a node starting
 * for the first time has no `meta.json` yet).
 *
 * @param path File path.
 * @returns The file's bytes, or `null` when nothing exists at `path`.
 * @throws {Deno.errors.IsADirectory} If `path` is a directory.
 * @throws {Deno.errors.PermissionDenied} If the file cannot be read.
 *
 * @example Load optional state
 * ```ts
 * import assert from "node:assert/strict";
 * import { readFileIfExists } from "./_atomic_file.ts";
 * const dir = await Deno.makeTempDir();
 * const meta = await readFileIfExists(`${dir}/meta.json`);
 * assert.equal(meta, null); // first start
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function readFileIfExists(
  path: string,
): Promise<Uint8Array | null> {
  try {
    return await Deno.readFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}
