/**
 * A Raft node's data folder, opened in one place: the exclusive lock
 * (`LOCK`, see `dir_lock.ts`), the identity file `meta.json` (format
 * version, cluster id, member id), and the paths of what lives beside them:
 * the write-ahead log folder `wal/`, the legacy single-file log `wal.log`,
 * and the snapshot folder `snap/`. Their owners create those; nothing else
 * creates files in a data folder.
 *
 * A data folder knows its cluster. At bootstrap every member computes the
 * same cluster id from the initial members and their peer URLs, plus an
 * optional cluster token ({@link bootstrapClusterId}, like etcd's
 * `--initial-cluster-token`); a member that joins later is told the id by
 * the cluster. The id and the member's own id are written to `meta.json`
 * before anything else, and every later start checks them, so a folder of
 * another cluster or another member is refused instead of having its log
 * merged silently into the wrong cluster.
 *
 * `meta.json` (format 2), written atomically (temp file, fsync, rename,
 * fsync of the folder):
 *
 * ```json
 * {"format":2,"clusterId":"3f2a…","memberId":"n1",
 *  "bootstrapMembers":{"n1":"tcp://127.0.0.1:7101"}}
 * ```
 *
 * `bootstrapMembers` records the members the cluster was bootstrapped
 * with (absent for a member that joined), for messages and for the check
 * that tolerates moved peer URLs; the current membership is Raft's, not
 * this file's.
 *
 * @module
 */

import {
  parentDir,
  readFileIfExists,
  syncDir,
  writeFileAtomic,
} from "./_atomic_file.ts";
import { type DirLock, lockDataDir } from "./dir_lock.ts";
import type { NodeId } from "./types.ts";

/** The `format` of the `meta.json` this code writes: 2. */
export const DATA_DIR_FORMAT = 2;

/** The content of `meta.json` (format {@link DATA_DIR_FORMAT}). */
export interface DataDirMeta {
  /** Format version of the folder: {@link DATA_DIR_FORMAT}. */
  format: number;
  /** The id of the cluster the folder belongs to (16 hex digits). */
  clusterId: string;
  /** The id of the member the folder belongs to. */
  memberId: NodeId;
  /**
   * The members (id → peer URL) the cluster was bootstrapped with, as this
   * member was told at its first start; absent for a member that joined.
   */
  bootstrapMembers?: Record<NodeId, string>;
}

/** How {@link DataDir.open} learns which cluster and member to expect. */
export interface DataDirOptions {
  /** This member's id. */
  memberId: NodeId;
  /**
   * Bootstrap: every initial member's id → its peer URL, this member
   * included. The expected cluster id is `bootstrapClusterId(members,
   * clusterToken)`. Required unless `clusterId` is given.
   */
  members?: Readonly<Record<NodeId, string>>;
  /** Bootstrap: the cluster token that tells apart clusters of the same members. @default "" */
  clusterToken?: string;
  /**
   * Join: the id of the cluster being joined, as the cluster tells it; then
   * `members` and `clusterToken` do not choose the id.
   */
  clusterId?: string;
}

/** Why a data folder was refused: it belongs to another cluster or member. */
export class DataDirMismatchError extends Error {
  /** Which identity differs. */
  readonly kind: "cluster" | "member";
  /** The folder. */
  readonly dataDir: string;
  /** The id recorded in the folder. */
  readonly found: string;
  /** The id this start expected. */
  readonly expected: string;

  /**
   * Makes the error.
   *
   * @param kind which identity differs.
   * @param dataDir the folder.
   * @param found the id recorded in it.
   * @param expected the id this start expected.
   * @param message what differs and what to do.
   */
  constructor(
    kind: "cluster" | "member",
    dataDir: string,
    found: string,
    expected: string,
    message: string,
  ) {
    super(message);
    this.name = "DataDirMismatchError";
    this.kind = kind;
    this.dataDir = dataDir;
    this.found = found;
    this.expected = expected;
  }
}

/**
 * The cluster id every bootstrapping member computes alike: the first 8
 * bytes (16 hex digits) of SHA-256 over the sorted `[id, peerUrl]` pairs
 * and the token. Two clusters of the same member ids differ by their peer
 * URLs, or else by their token.
 *
 * @param members every initial member's id → peer URL.
 * @param token the cluster token. Default "".
 * @throws {RangeError} when `members` is empty.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { bootstrapClusterId } from "./data_dir.ts";
 * const id = await bootstrapClusterId({ n1: "tcp://127.0.0.1:7101" });
 * assert.match(id, /^[0-9a-f]{16}$/);
 * ```
 */
export async function bootstrapClusterId(
  members: Readonly<Record<NodeId, string>>,
  token = "",
): Promise<string> {
  const pairs = Object.entries(members).sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0
  );
  if (pairs.length === 0) {
    throw new RangeError("a cluster needs at least one member");
  }
  const text = JSON.stringify(["rafter-cluster-v1", token, pairs]);
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(text),
  );
  return [...new Uint8Array(digest).slice(0, 8)]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Reads a data folder's `meta.json` without locking or changing anything,
 * e.g. to learn the cluster id of a folder a running node opened.
 *
 * @returns the meta, or null when the folder has none (yet). A folder of
 * the former format (`{id, members}`) gives `format: 1` and no cluster id
 * (`clusterId: ""`).
 * @throws {Error} when `meta.json` is not a meta file (the message names
 * the file).
 */
export async function readDataDirMeta(
  dataDir: string,
): Promise<DataDirMeta | null> {
  const read = await readMeta(dataDir);
  if (read === null) return null;
  if (read.legacy !== undefined) {
    return { format: 1, clusterId: "", memberId: read.legacy.id };
  }
  return read.meta;
}

/**
 * An open data folder: its lock is held until {@link DataDir.release}.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { DataDir } from "./data_dir.ts";
 * const path = `${await Deno.makeTempDir()}/n1`;
 * const dir = await DataDir.open(path, {
 *   memberId: "n1",
 *   members: { n1: "tcp://127.0.0.1:7101" },
 * });
 * assert.equal(dir.created, true);
 * assert.equal(dir.walDir, `${path}/wal`);
 * dir.release();
 * await Deno.remove(path, { recursive: true });
 * ```
 */
export class DataDir implements DirLock {
  /** The folder's path, as given. */
  readonly path: string;
  /** The id of the cluster the folder belongs to. */
  readonly clusterId: string;
  /** The id of the member the folder belongs to. */
  readonly memberId: NodeId;
  /** `meta.json` as it is on disk now. */
  readonly meta: DataDirMeta;
  /** Whether this open made the folder's identity (a first start). */
  readonly created: boolean;
  /** Whether this open rewrote a format-1 `meta.json` as format 2. */
  readonly migrated: boolean;
  /**
   * Members whose peer URL differs from the one the cluster was
   * bootstrapped with (the same members and token, moved): id → [then, now].
   */
  readonly movedPeers: Readonly<Record<NodeId, [string, string]>>;
  /** The write-ahead log folder, `<path>/wal` (its owner creates it). */
  readonly walDir: string;
  /** The former single-file write-ahead log, `<path>/wal.log`. */
  readonly legacyWalFile: string;
  /** The snapshot folder, `<path>/snap` (its owner creates it). */
  readonly snapDir: string;
  readonly #lock: DirLock;

  private constructor(
    path: string,
    meta: DataDirMeta,
    lock: DirLock,
    flags: {
      created: boolean;
      migrated: boolean;
      moved: Record<NodeId, [string, string]>;
    },
  ) {
    this.path = path;
    this.meta = meta;
    this.clusterId = meta.clusterId;
    this.memberId = meta.memberId;
    this.created = flags.created;
    this.migrated = flags.migrated;
    this.movedPeers = flags.moved;
    this.#lock = lock;
    const base = path.replace(/[\\/]+$/, "") || path;
    this.walDir = `${base}/wal`;
    this.legacyWalFile = `${base}/wal.log`;
    this.snapDir = `${base}/snap`;
  }

  /**
   * Opens a data folder, creating it (and `meta.json`) on a first start:
   * takes the lock, then checks that the folder belongs to this member and
   * this cluster. A folder with members recorded in the former format
   * (`{id, members}`) opens when the member ids match, and is rewritten
   * with the cluster id of `options`. On a bootstrap start, a folder whose
   * cluster was bootstrapped with the same member ids and token but other
   * peer URLs (members moved) opens too, keeping its cluster id (see
   * {@link DataDir.movedPeers}).
   *
   * @throws {DataDirMismatchError} when the folder belongs to another
   * member or cluster; the message says which, and what to do.
   * @throws {import("./dir_lock.ts").DataDirInUseError} when another
   * process or node holds the lock.
   * @throws {Error} when `meta.json` is damaged or of a newer format, or
   * `options` names neither `members` nor `clusterId`.
   */
  static async open(path: string, options: DataDirOptions): Promise<DataDir> {
    const expected = await expectedClusterId(options);
    await makeDir(path);
    const lock = await lockDataDir(path);
    try {
      return await DataDir.#check(path, options, expected, lock);
    } catch (error) {
      lock.release();
      throw error;
    }
  }

  static async #check(
    path: string,
    options: DataDirOptions,
    expected: string,
    lock: DirLock,
  ): Promise<DataDir> {
    const { memberId } = options;
    const fresh: DataDirMeta = {
      format: DATA_DIR_FORMAT,
      clusterId: expected,
      memberId,
      ...(options.clusterId === undefined && options.members !== undefined
        ? { bootstrapMembers: sortedRecord(options.members) }
        : {}),
    };
    const read = await readMeta(path);
    const flags = { created: false, migrated: false, moved: {} };
    if (read === null) {
      await writeMeta(path, fresh);
      return new DataDir(path, fresh, lock, { ...flags, created: true });
    }
    const found = read.meta ?? { memberId: read.legacy!.id };
    if (found.memberId !== memberId) {
      throw new DataDirMismatchError(
        "member",
        path,
        found.memberId,
        memberId,
        `data folder ${path} belongs to member "${found.memberId}", not "${memberId}": start this node with --id ${found.memberId}, or give it its own --data folder`,
      );
    }
    if (read.legacy !== undefined) {
      const recorded = read.legacy.members;
      const given = Object.keys(options.members ?? {}).sort();
      if (
        recorded !== undefined && options.members !== undefined &&
        recorded.join(",") !== given.join(",")
      ) {
        throw clusterMismatch(
          path,
          `a cluster of ${describeIds(recorded)}`,
          `a cluster of ${describeIds(given)}`,
          "",
          expected,
        );
      }
      await writeMeta(path, fresh);
      return new DataDir(path, fresh, lock, { ...flags, migrated: true });
    }
    const meta = read.meta!;
    if (meta.clusterId === expected) {
      return new DataDir(path, meta, lock, flags);
    }
    const moved = await movedPeers(meta, options);
    if (moved !== null) {
      return new DataDir(path, meta, lock, { ...flags, moved });
    }
    throw clusterMismatch(
      path,
      meta.bootstrapMembers === undefined
        ? "a cluster it joined"
        : `a cluster bootstrapped with ${
          describeMembers(meta.bootstrapMembers)
        }`,
      options.clusterId !== undefined
        ? "the cluster it is joining"
        : `a cluster of ${describeMembers(options.members ?? {})}${
          options.clusterToken ? " and a --cluster-token" : ""
        }`,
      meta.clusterId,
      expected,
    );
  }

  /** Releases the lock. Safe to call twice. */
  release(): void {
    this.#lock.release();
  }
}

async function expectedClusterId(options: DataDirOptions): Promise<string> {
  if (options.clusterId !== undefined) {
    if (!/^[0-9a-f]{16}$/.test(options.clusterId)) {
      throw new Error(
        `cluster id ${
          JSON.stringify(options.clusterId.slice(0, 40))
        } is not 16 lowercase hex digits`,
      );
    }
    return options.clusterId;
  }
  if (options.members === undefined) {
    throw new Error(
      "opening a data folder needs the bootstrap members or the id of the cluster joined",
    );
  }
  if (!(options.memberId in options.members)) {
    throw new Error(
      `member id "${options.memberId}" is not among the members (${
        Object.keys(options.members).join(", ")
      }); list every member, this one included`,
    );
  }
  return await bootstrapClusterId(options.members, options.clusterToken);
}

/**
 * The members whose URLs moved, when the folder's cluster was bootstrapped
 * with exactly `options.members`' ids and the same token (its id computed
 * from its recorded URLs matches); null otherwise.
 */
async function movedPeers(
  meta: DataDirMeta,
  options: DataDirOptions,
): Promise<Record<NodeId, [string, string]> | null> {
  const then = meta.bootstrapMembers;
  const now = options.members;
  if (options.clusterId !== undefined || then === undefined || !now) {
    return null;
  }
  if (
    Object.keys(then).sort().join(",") !== Object.keys(now).sort().join(",")
  ) {
    return null;
  }
  if (
    await bootstrapClusterId(then, options.clusterToken) !== meta.clusterId
  ) {
    return null;
  }
  const moved: Record<NodeId, [string, string]> = {};
  for (const id of Object.keys(then)) {
    if (then[id] !== now[id]) moved[id] = [then[id], now[id]];
  }
  return moved;
}

function clusterMismatch(
  path: string,
  was: string,
  now: string,
  found: string,
  expected: string,
): DataDirMismatchError {
  return new DataDirMismatchError(
    "cluster",
    path,
    found,
    expected,
    `data folder ${path} belongs to another cluster${
      found === "" ? "" : ` (id ${found})`
    }: it holds the log of ${was}, but this node is started as a member of ${now} (cluster id ${expected}); its log would be merged silently with another cluster's. Give this node a new --data folder (or move this one aside), or start it with the --peers (and --cluster-token) its cluster was bootstrapped with`,
  );
}

function describeIds(ids: readonly string[]): string {
  return ids.length === 1 ? `a single node (${ids[0]})` : ids.join(", ");
}

function describeMembers(members: Readonly<Record<NodeId, string>>): string {
  const entries = Object.entries(sortedRecord(members));
  const list = entries.map(([id, url]) => `${id}=${url}`).join(", ");
  return entries.length === 1 ? `a single node (${list})` : list;
}

function sortedRecord(
  members: Readonly<Record<NodeId, string>>,
): Record<NodeId, string> {
  return Object.fromEntries(
    Object.entries(members).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0),
  );
}

/** Creates the folder if missing, making its name durable in its parent. */
async function makeDir(path: string): Promise<void> {
  try {
    await Deno.stat(path);
    return;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  await Deno.mkdir(path, { recursive: true });
  await syncDir(parentDir(path));
}

type ReadMeta =
  | { meta: DataDirMeta; legacy?: undefined }
  | { meta?: undefined; legacy: { id: string; members?: string[] } };

async function readMeta(path: string): Promise<ReadMeta | null> {
  const file = `${path}/meta.json`;
  const bytes = await readFileIfExists(file);
  if (bytes === null) return null;
  const damaged = (why: string) =>
    new Error(
      `${file} ${why}; it was damaged or not written by this program: move the data folder aside and start this node with a new one`,
    );
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(bytes));
  } catch (error) {
    throw damaged(`is not valid JSON (${(error as Error).message})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw damaged("is not a JSON object");
  }
  const v = value as Record<string, unknown>;
  if (v.format === undefined) {
    // Format 1: {id, members?}, written before folders knew their cluster.
    const members = v.members;
    if (
      typeof v.id !== "string" ||
      (members !== undefined &&
        !(Array.isArray(members) &&
          members.every((m) => typeof m === "string")))
    ) {
      throw damaged("is neither { format, clusterId, memberId } nor { id }");
    }
    return {
      legacy: { id: v.id, members: (members as string[] | undefined)?.sort() },
    };
  }
  if (typeof v.format !== "number" || v.format > DATA_DIR_FORMAT) {
    throw new Error(
      `${file} has format ${
        JSON.stringify(v.format)
      }, newer than this program's ${DATA_DIR_FORMAT}: run a newer version of it on this folder`,
    );
  }
  const boot = v.bootstrapMembers;
  if (
    typeof v.clusterId !== "string" || typeof v.memberId !== "string" ||
    (boot !== undefined &&
      (typeof boot !== "object" || boot === null ||
        Object.values(boot).some((url) => typeof url !== "string")))
  ) {
    throw damaged("lacks a string clusterId or memberId");
  }
  return { meta: v as unknown as DataDirMeta };
}

async function writeMeta(path: string, meta: DataDirMeta): Promise<void> {
  await writeFileAtomic(
    `${path}/meta.json`,
    new TextEncoder().encode(JSON.stringify(meta) + "\n"),
  );
}
