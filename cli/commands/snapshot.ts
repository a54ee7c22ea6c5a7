/**
 * `rafter snapshot save|status|restore`: back up a live registry to a file
 * (a consistent snapshot at a revision, with its SHA-256), check a backup
 * file, and seed the data folder of each member of a new cluster from
 * one, as etcdctl / etcdutl snapshot do. The file format and the seeding
 * are `registry/snapshot_file.ts`.
 *
 * @module
 */

import { REGISTRY_METHODS } from "../../protocol/registry.ts";
import { parsePeerList } from "../../registry/node/args.ts";
import {
  base64ToBytes,
  encodeSnapshotFile,
  readSnapshotFile,
  seedDataDir,
  sha256Hex,
  SNAPSHOT_FILE_FORMAT,
  type SnapshotFileHeader,
  writeFileDurably,
} from "../../registry/snapshot_file.ts";
import { bootstrapClusterId } from "../../raft/data_dir.ts";
import type { Command, Context, Values } from "../context.ts";
import { EXIT, UsageError } from "../errors.ts";
import { formatTable } from "../table.ts";

/** The spec of `rafter snapshot save`. */
export const snapshotSaveCommand: Command = {
  name: "snapshot save",
  args: "FILE",
  summary: "back up the registry to FILE",
  about: `Asks the leader for a consistent snapshot of the registry (it first
confirms its leadership and applies every committed write, so the
snapshot holds every write acknowledged before the command), fetches it
in chunks and writes FILE atomically (a temporary file, fsync, rename):
a header line with the format, cluster id, revision, Raft index and
term, counts and the payload's SHA-256, then the payload. An existing
FILE is replaced. With access control on, it needs an admin token.`,
  positionals: [1, 1],
  run: (c, [file]) => snapshotSave(c, file),
};

/** The spec of `rafter snapshot status`. */
export const snapshotStatusCommand: Command = {
  name: "snapshot status",
  args: "FILE",
  summary: "check a backup file; what it holds",
  about: `Reads backup FILE, checks its size and SHA-256 and that it holds a
registry snapshot, and prints the cluster and revision it was taken at,
the Raft index and term it came from, and its counts of names, bindings
and leases. Exit 1, naming the fault, for a damaged or foreign file.
Talks to no registry.`,
  positionals: [1, 1],
  run: (c, [file]) => snapshotStatus(c, file),
};

/** The spec of `rafter snapshot restore`. */
export const snapshotRestoreCommand: Command = {
  name: "snapshot restore",
  args: "FILE",
  summary: "seed a member of a new cluster from FILE",
  about: `Writes the data folder --data DIR of member --id ID of a NEW cluster
of the members --peers (id=host:port,..., their peer addresses, as
registry/main.ts takes them) and --cluster-token, from backup FILE: run
it once per member, each into its own empty folder, then start each
member with the same --id, --peers, --cluster-token and --data. The new
cluster has its own id (from --peers and --cluster-token), serves the
bindings, leases and tokens of the backup at its revision, and gives
each lease its full TTL from its first election: servers must keep their
leases alive on the new cluster, or their bindings expire one TTL later.
A non-empty DIR is refused, and so are --peers and --cluster-token that
would give the old cluster's id. Talks to no registry.`,
  options: {
    data: { type: "string" },
    id: { type: "string" },
    peers: { type: "string" },
    "cluster-token": { type: "string" },
  },
  optionHelp:
    `  --data DIR        the member's data folder (missing or empty; required)
  --id ID           the member's id (required)
  --peers LIST      every member's peer address: id=host:port,... (required)
  --cluster-token T the new cluster's token (as registry/main.ts takes it)`,
  positionals: [1, 1],
  run: (c, [file], v) => snapshotRestore(c, file, v),
};

/** The verbs of `rafter snapshot`. */
export const SNAPSHOT_COMMANDS: readonly Command[] = [
  snapshotSaveCommand,
  snapshotStatusCommand,
  snapshotRestoreCommand,
];

/** Runs `rafter snapshot save FILE`. */
export async function snapshotSave(
  context: Context,
  file: string,
): Promise<number> {
  const { client, globals, out } = context;
  const registry = client.registry;
  const taken = await registry.call(REGISTRY_METHODS.snapshot, {});
  const payload = new Uint8Array(taken.bytes);
  let at = 0;
  for (let n = 0; n < taken.chunks; n++) {
    const chunk = await registry.call(REGISTRY_METHODS.snapshotChunk, {
      snapshotId: taken.snapshotId,
      n,
    });
    const bytes = base64ToBytes(chunk.data);
    if (at + bytes.length > payload.length) {
      throw new Error(
        `the registry sent more than the ${taken.bytes} bytes it announced for snapshot ${taken.snapshotId}; nothing was written: run rafter snapshot save again`,
      );
    }
    payload.set(bytes, at);
    at += bytes.length;
  }
  const sha256 = await sha256Hex(payload);
  if (at !== taken.bytes || sha256 !== taken.sha256) {
    throw new Error(
      `the snapshot fetched from ${taken.member} does not match its checksum (${at} of ${taken.bytes} bytes, SHA-256 ${sha256}, announced ${taken.sha256}); nothing was written: run rafter snapshot save again`,
    );
  }
  const header: SnapshotFileHeader = {
    kind: "rafter-snapshot",
    format: SNAPSHOT_FILE_FORMAT,
    clusterId: taken.clusterId,
    member: taken.member,
    revision: taken.revision,
    index: taken.index,
    term: taken.term,
    names: taken.names,
    bindings: taken.bindings,
    leases: taken.leases,
    takenAt: taken.takenAt,
    bytes: taken.bytes,
    sha256,
  };
  const bytes = encodeSnapshotFile(header, payload);
  try {
    await writeFileDurably(file, bytes);
  } catch (error) {
    throw new Error(
      `cannot write the snapshot to ${file}: ${
        (error as Error).message
      } (does its folder exist, and may this user write there?)`,
    );
  }
  if (globals.json) {
    out(JSON.stringify({ file, fileBytes: bytes.length, ...header }, null, 2));
  } else {
    out(
      `saved a snapshot of cluster ${header.clusterId} at revision ${header.revision} (index ${header.index}, term ${header.term}, from ${header.member}) to ${file}: ${header.names} names, ${header.bindings} bindings, ${header.leases} leases, ${bytes.length} bytes, sha256 ${sha256}`,
    );
  }
  return EXIT.ok;
}

/** Runs `rafter snapshot status FILE`. */
export async function snapshotStatus(
  context: Context,
  file: string,
): Promise<number> {
  const { globals, out } = context;
  const { header, fileBytes } = await readSnapshotFile(file);
  if (globals.json) {
    out(
      JSON.stringify({ file, fileBytes, ...header, checksum: "ok" }, null, 2),
    );
    return EXIT.ok;
  }
  out(formatTable(["FIELD", "VALUE"], [
    ["file", file],
    ["format", String(header.format)],
    ["cluster id", header.clusterId],
    ["taken from", header.member],
    ["taken at", header.takenAt],
    ["revision", String(header.revision)],
    ["index", String(header.index)],
    ["term", String(header.term)],
    ["names", String(header.names)],
    ["bindings", String(header.bindings)],
    ["leases", String(header.leases)],
    ["size", `${fileBytes} bytes`],
    ["sha256", header.sha256],
    ["checksum", "OK"],
  ]));
  return EXIT.ok;
}

/** Runs `rafter snapshot restore FILE --data DIR --id ID --peers LIST`. */
export async function snapshotRestore(
  context: Context,
  file: string,
  values: Values,
): Promise<number> {
  const { globals, out } = context;
  const need = (name: string): string => {
    const value = values[name];
    if (typeof value !== "string" || value.trim() === "") {
      throw new UsageError(`snapshot restore needs --${name}`);
    }
    return value;
  };
  const dataDir = need("data");
  const id = need("id");
  const list = need("peers");
  let peers: Record<string, string>;
  try {
    peers = parsePeerList(list);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (!(id in peers)) {
    throw new UsageError(
      `--peers does not list the member's id "${id}"; list every member of the new cluster, this one included`,
    );
  }
  const clusterToken = (values["cluster-token"] as string | undefined) ?? "";
  const read = await readSnapshotFile(file);
  const clusterId = await bootstrapClusterId(peers, clusterToken);
  if (clusterId === read.header.clusterId) {
    throw new UsageError(
      `these --peers and --cluster-token give cluster id ${clusterId}, the id of the cluster the snapshot was taken from: members of the old cluster could take the new one's for theirs. Give the new cluster its own --cluster-token (e.g. --cluster-token restored-1), the same for every member`,
    );
  }
  await seedDataDir({ file: read, dataDir, id, peers, clusterToken });
  const { header } = read;
  const start = [
    "deno run -A registry/main.ts",
    `--id ${id}`,
    `--peers ${list}`,
    ...(clusterToken === "" ? [] : [`--cluster-token ${clusterToken}`]),
    `--data ${dataDir}`,
    "--cluster-secret-file FILE",
  ].join(" ");
  if (globals.json) {
    out(JSON.stringify(
      {
        dataDir,
        member: id,
        clusterId,
        fromClusterId: header.clusterId,
        revision: header.revision,
        index: header.index,
        term: header.term,
        names: header.names,
        bindings: header.bindings,
        leases: header.leases,
      },
      null,
      2,
    ));
  } else {
    out(
      `restored revision ${header.revision} (${header.names} names, ${header.bindings} bindings, ${header.leases} leases) into ${dataDir} as member ${id} of new cluster ${clusterId} (the snapshot came from cluster ${header.clusterId})`,
    );
    out(`start it with: ${start}`);
    if (header.leases > 0) {
      out(
        `each lease has its full TTL from the new cluster's first election: servers must keep their leases alive on it, or their bindings expire`,
      );
    }
  }
  return EXIT.ok;
}
