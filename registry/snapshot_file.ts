/**
 * Backup files of a registry (`rafter snapshot save|status|restore`), and
 * seeding a member's data folder of a new cluster from one.
 *
 * A backup file is one header line of JSON ({@link SnapshotFileHeader}:
 * format, cluster id, revision, Raft index and term, counts, payload size
 * and SHA-256), a newline, then the payload: the node snapshot
 * (`RegistryNodeSnapshot`, JSON) as the leader took it. It is written
 * atomically (temporary file, fsync, rename, fsync of the folder).
 *
 * {@link seedDataDir} writes what a node of the new cluster would have
 * written itself had it taken the snapshot: `meta.json` (the cluster id
 * its `--peers` and `--cluster-token` give, `raft/data_dir.ts`), the
 * snapshot file (`SnapshotStore`, with the new members as configuration)
 * and a write-ahead log that starts after it (`Wal`: a snapshot marker and
 * the hard state at its term). Each lease gets its full TTL again.
 *
 * @module
 */

import { dirname } from "node:path";
import { bootstrapClusterId, DataDir } from "../raft/data_dir.ts";
import { makeConfiguration } from "../raft/configuration.ts";
import { SnapshotStore } from "../raft/snapshot_store.ts";
import { Wal } from "../raft/wal.ts";
import {
  type RegistryNodeSnapshot,
  snapshotValueProblem,
} from "./node/replica.ts";

/** The `format` of the backup files this code writes: 1. */
export const SNAPSHOT_FILE_FORMAT = 1;

/** The header line of a backup file. */
export interface SnapshotFileHeader {
  /** Always `"rafter-snapshot"`. */
  kind: "rafter-snapshot";
  /** Format version: {@link SNAPSHOT_FILE_FORMAT}. */
  format: number;
  /** The id of the cluster it was taken from. */
  clusterId: string;
  /** The member that took it (the leader). */
  member: string;
  /** The registry revision it is at. */
  revision: number;
  /** The Raft index of the last entry it reflects. */
  index: number;
  /** That entry's term. */
  term: number;
  /** Names with bindings. */
  names: number;
  /** Global bindings. */
  bindings: number;
  /** Leases. */
  leases: number;
  /** When it was taken (ISO 8601). */
  takenAt: string;
  /** Payload size, bytes. */
  bytes: number;
  /** SHA-256 of the payload, hex. */
  sha256: string;
}

/** A backup file that cannot be read: the message names the file and the fault. */
export class SnapshotFileError extends Error {
  /** @param message what is wrong with which file, and what to do. */
  constructor(message: string) {
    super(message);
    this.name = "SnapshotFileError";
  }
}

/** SHA-256 of `bytes`, hex. */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest(
    "SHA-256",
    bytes as Uint8Array<ArrayBuffer>,
  );
  return [...new Uint8Array(digest)]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * `bytes` in base64: the runtime's `Uint8Array.prototype.toBase64` where
 * it has one (Deno 2.9: about 3 ms for a 4 MiB snapshot chunk, where
 * `btoa` of a binary string took 130–160 ms and held the leader's event
 * loop), else {@link bytesToBase64Portable}.
 */
export function bytesToBase64(bytes: Uint8Array): string {
  return typeof bytes.toBase64 === "function"
    ? bytes.toBase64()
    : bytesToBase64Portable(bytes);
}

/** {@link bytesToBase64} without `toBase64`: `btoa` of a binary string. */
export function bytesToBase64Portable(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

/**
 * The bytes base64 `text` holds: `Uint8Array.fromBase64` where the runtime
 * has it, else {@link base64ToBytesPortable}.
 * @throws {SyntaxError} or {DOMException} on bad base64.
 */
export function base64ToBytes(text: string): Uint8Array {
  return typeof Uint8Array.fromBase64 === "function"
    ? Uint8Array.fromBase64(text)
    : base64ToBytesPortable(text);
}

/** {@link base64ToBytes} without `fromBase64`: `atob`. @throws {DOMException} on bad base64. */
export function base64ToBytesPortable(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** A backup file's bytes: the header line, then the payload. */
export function encodeSnapshotFile(
  header: SnapshotFileHeader,
  payload: Uint8Array,
): Uint8Array {
  const head = new TextEncoder().encode(`${JSON.stringify(header)}\n`);
  const bytes = new Uint8Array(head.length + payload.length);
  bytes.set(head);
  bytes.set(payload, head.length);
  return bytes;
}

/** A backup file as read and checked by {@link readSnapshotFile}. */
export interface SnapshotFile {
  /** Its header. */
  header: SnapshotFileHeader;
  /** The payload (checked against the header's size and SHA-256). */
  payload: Uint8Array;
  /** The payload parsed. */
  snapshot: RegistryNodeSnapshot;
  /** The file's size, bytes. */
  fileBytes: number;
}

/**
 * Reads backup file `path` and checks it: header, payload size, SHA-256,
 * and that the payload is a registry snapshot a node can load.
 *
 * @throws {SnapshotFileError} naming the file and what is wrong.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { readSnapshotFile, SnapshotFileError } from "./snapshot_file.ts";
 * const path = await Deno.makeTempFile();
 * await Deno.writeTextFile(path, "not a snapshot");
 * await assert.rejects(readSnapshotFile(path), SnapshotFileError);
 * await Deno.remove(path);
 * ```
 */
export async function readSnapshotFile(path: string): Promise<SnapshotFile> {
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(path);
  } catch (error) {
    throw new SnapshotFileError(
      `cannot read snapshot file ${path}: ${(error as Error).message}`,
    );
  }
  const bad = (what: string) =>
    new SnapshotFileError(
      `${path} is not a usable rafter snapshot file: ${what}; take a new one with rafter snapshot save`,
    );
  const newline = bytes.indexOf(10);
  if (newline < 0 || newline > 64 * 1024) throw bad("it has no header line");
  let header: SnapshotFileHeader;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(0, newline)));
  } catch {
    throw bad("its header line is not JSON");
  }
  if (
    typeof header !== "object" || header === null ||
    header.kind !== "rafter-snapshot"
  ) {
    throw bad("its header does not say kind rafter-snapshot");
  }
  if (header.format !== SNAPSHOT_FILE_FORMAT) {
    throw bad(
      `its format is ${
        JSON.stringify(header.format)
      }; this version reads format ${SNAPSHOT_FILE_FORMAT}`,
    );
  }
  for (
    const field of ["revision", "index", "term", "bytes"] as const
  ) {
    if (!Number.isSafeInteger(header[field]) || header[field] < 0) {
      throw bad(`its header's ${field} is not an integer >= 0`);
    }
  }
  if (header.index < 1) throw bad("its header's index is not >= 1");
  const payload = bytes.subarray(newline + 1);
  if (payload.length !== header.bytes) {
    throw bad(
      `its payload has ${payload.length} bytes, the header says ${header.bytes} (truncated or appended to)`,
    );
  }
  const sha256 = await sha256Hex(payload);
  if (sha256 !== header.sha256) {
    throw bad(
      `the payload's SHA-256 is ${sha256}, the header says ${header.sha256} (the file is damaged)`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    throw bad("the snapshot is not JSON");
  }
  const problem = snapshotValueProblem(parsed);
  if (problem !== null) throw bad(problem);
  const snapshot = parsed as RegistryNodeSnapshot;
  if (snapshot.state.revision !== header.revision) {
    throw bad(
      `the payload is at revision ${snapshot.state.revision}, the header says ${header.revision}`,
    );
  }
  return { header, payload, snapshot, fileBytes: bytes.length };
}

/**
 * Writes `bytes` to `path` atomically: a temporary file beside it,
 * fsynced, renamed over `path`, then the folder fsynced. A crash leaves
 * the old file or the new one, never a part.
 */
export async function writeFileDurably(
  path: string,
  bytes: Uint8Array,
): Promise<void> {
  const suffix = [...crypto.getRandomValues(new Uint8Array(4))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  const temp = `${path}.tmp-${suffix}`;
  const file = await Deno.open(temp, {
    write: true,
    createNew: true,
    mode: 0o600,
  });
  try {
    let written = 0;
    while (written < bytes.length) {
      written += await file.write(bytes.subarray(written));
    }
    await file.sync();
  } catch (error) {
    file.close();
    await Deno.remove(temp).catch(() => {});
    throw error;
  }
  file.close();
  try {
    await Deno.rename(temp, path);
  } catch (error) {
    await Deno.remove(temp).catch(() => {});
    throw error;
  }
  await syncFolder(dirname(path));
}

async function syncFolder(dir: string): Promise<void> {
  let handle: Deno.FsFile;
  try {
    handle = await Deno.open(dir, { read: true });
  } catch {
    return; // (a platform that cannot open folders: nothing to sync)
  }
  try {
    await handle.sync();
  } catch {
    // Some platforms cannot fsync a folder; the rename is done anyway.
  } finally {
    handle.close();
  }
}

/** What {@link seedDataDir} seeds. */
export interface SeedOptions {
  /** The backup, as {@link readSnapshotFile} read it. */
  file: SnapshotFile;
  /** The member's data folder: missing or empty. */
  dataDir: string;
  /** The member's id: a key of `peers`. */
  id: string;
  /** Every member of the new cluster: id → peer URL (as `--peers` gives them). */
  peers: Record<string, string>;
  /** The new cluster's `--cluster-token`. @default "" */
  clusterToken?: string;
}

/**
 * Seeds member `id`'s data folder of a new cluster from a backup, as the
 * node would have written it had it taken the snapshot itself; a node
 * started on it with the same `--id`, `--peers` and `--cluster-token`
 * loads it and joins the others. Each lease gets its full TTL, counted
 * from when the new cluster first elects a leader.
 *
 * @returns the new cluster's id.
 * @throws {Error} when `id` is not among `peers`, or `dataDir` exists and
 * is not empty (nothing is written then).
 */
export async function seedDataDir(options: SeedOptions): Promise<string> {
  const { file, dataDir, id, peers } = options;
  if (!(id in peers)) {
    throw new Error(
      `--id ${JSON.stringify(id)} is not among the --peers (${
        Object.keys(peers).join(", ")
      }); list every member of the new cluster, this one included`,
    );
  }
  try {
    for await (const entry of Deno.readDir(dataDir)) {
      throw new Error(
        `--data ${dataDir} is not empty (it holds ${entry.name}); restore into a new folder (a node's folder is never overwritten)`,
      );
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  const clusterToken = options.clusterToken ?? "";
  const { index, term } = file.header;
  const taken = file.snapshot;
  // The new cluster times each lease afresh: its full TTL from the first
  // election (the new leader then grants every lease its TTL again).
  const seeded: RegistryNodeSnapshot = {
    index,
    state: taken.state,
    leaseRemainingMs: taken.state.leases.map((lease) => [
      lease.id,
      lease.ttlMs,
    ]),
  };
  const dir = await DataDir.open(dataDir, {
    memberId: id,
    members: peers,
    clusterToken,
  });
  try {
    const snapshots = await SnapshotStore.open(dir.snapDir);
    await snapshots.save({
      index,
      term,
      meta: {
        configuration: makeConfiguration(Object.keys(peers), [], {
          peerUrls: peers,
        }),
      },
      data: JSON.stringify(seeded),
    });
    const { wal } = await Wal.open(dir.walDir);
    try {
      await wal.compact({ index, term });
      await wal.append({
        hardState: { term, vote: null, commit: index },
        entries: [],
      });
    } finally {
      await wal.close();
    }
  } finally {
    dir.release();
  }
  return await bootstrapClusterId(peers, clusterToken);
}
