/**
 * An exclusive lock on a node's data folder, so two processes (or two
 * nodes in one process) can never write the same log: that would break
 * Raft's safety, as each would vote and append on its own.
 *
 * @module
 */

import { ioFailure } from "./_atomic_file.ts";

/** Thrown when another process or node holds the data folder. */
export class DataDirInUseError extends Error {
  /** The folder that is in use. */
  readonly dataDir: string;

  /**
   * Makes the error; its message names the folder and its holder.
   *
   * @param dataDir the folder.
   * @param holder what the lock file says of its holder (e.g. "pid 1234").
   */
  constructor(dataDir: string, holder: string) {
    super(
      `data folder ${dataDir} is in use by another registry node (${holder}); stop that node first, or pass another --data folder`,
    );
    this.name = "DataDirInUseError";
    this.dataDir = dataDir;
  }
}

/** A held lock; release it when the node stops. */
export interface DirLock {
  /** Releases the lock. Safe to call twice. */
  release(): void;
}

/**
 * Takes the exclusive lock on `<dataDir>/LOCK` (an advisory `flock` the
 * operating system drops when the process dies, so a crash never leaves a
 * stale lock), and writes this process's id into the file for diagnostics.
 *
 * @throws {DataDirInUseError} when the folder is locked already.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { DataDirInUseError, lockDataDir } from "./dir_lock.ts";
 * const dir = await Deno.makeTempDir();
 * const lock = await lockDataDir(dir);
 * await assert.rejects(lockDataDir(dir), DataDirInUseError); // held already
 * lock.release();
 * await Deno.remove(dir, { recursive: true });
 * ```
 */
export async function lockDataDir(dataDir: string): Promise<DirLock> {
  const path = `${dataDir}/LOCK`;
  let file: Deno.FsFile;
  try {
    await Deno.mkdir(dataDir, { recursive: true });
    file = await Deno.open(path, { read: true, write: true, create: true });
  } catch (error) {
    // A read-only or full disk says so, with what to do.
    throw ioFailure(path, "open of the data folder's lock", error);
  }
  let locked = false;
  try {
    locked = await file.tryLock(true);
    if (!locked) {
      const holder = (await Deno.readTextFile(path).catch(() => "")).trim();
      throw new DataDirInUseError(dataDir, holder || "unknown holder");
    }
    await file.truncate(0);
    await file.write(new TextEncoder().encode(`pid ${Deno.pid}\n`));
  } catch (error) {
    if (locked) await file.unlock().catch(() => {});
    file.close();
    throw error instanceof DataDirInUseError
      ? error
      : ioFailure(path, "write of the data folder's lock", error);
  }
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      try {
        file.unlockSync();
      } finally {
        file.close();
      }
    },
  };
}
