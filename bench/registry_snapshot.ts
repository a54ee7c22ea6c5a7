/**
 * The registry's data folder and restart time after many binds (Raft paper
 * §7: snapshots bound the log). Starts a 3-node registry as processes
 * (`registry/main.ts`, fsync on, `--snapshot-entries 10000`,
 * `--wal-segment-bytes 4194304`) and binds through a `RafterClient` from 64
 * concurrent callers, re-binding a fleet of 10,000 endpoint ids under one
 * name (every bind is a Raft write), 1,000,000 binds in all. Then it prints
 * each node's data folder size against the configured bound, SIGTERMs a
 * follower, restarts it on its folder, and prints the time until it listens
 * and until it has applied what it held before.
 *
 * The bound: 2 snapshot files (the store keeps the newest 2) + 3 WAL
 * segments (the log since the older snapshot's trailing window spans at
 * most 2 full segments and the one being written) + 1 MiB (meta, lock).
 *
 * A script, not a test: it asserts nothing about speed.
 *
 * ```sh
 * deno task bench:registry-snapshot            # 1,000,000 binds
 * deno task bench:registry-snapshot --quick    # 100,000
 * ```
 *
 * @module
 */

import { benchArgs, usageError } from "./_args.ts";
import { LocalCluster } from "../testing/cluster.ts";
import { connect, type RafterClient } from "../mod.ts";

const USAGE = `usage: deno task bench:registry-snapshot [options]

  --binds N   binds in all (default 1000000; --quick: 100000)
  --quick     100,000 binds
  --help      show this text`;

const flags = benchArgs(USAGE, {
  binds: { type: "string" },
  quick: { type: "boolean", default: false },
});
const total = Number(flags.binds ?? (flags.quick ? 100_000 : 1_000_000));
if (!Number.isInteger(total) || total < 1 || total > 10_000_000) {
  usageError(
    `--binds must be an integer 1..10000000, got ${flags.binds}`,
    USAGE,
  );
}
const CALLERS = 64;
const CLIENT_OBJECTS = 8;
const FLEET = 10_000;
const SEGMENT_BYTES = 4 << 20;
const SNAPSHOT_ENTRIES = 10_000;
/** Give up on the whole run after this long. */
const BUDGET_MS = 30 * 60_000;

const cluster = new LocalCluster({
  nodeArgs: [
    "--snapshot-entries",
    String(SNAPSHOT_ENTRIES),
    "--wal-segment-bytes",
    String(SEGMENT_BYTES),
  ],
});
const clients: RafterClient[] = [];
try {
  await cluster.startRegistry(3);
  await cluster.waitForLeader();
  for (let i = 0; i < CLIENT_OBJECTS; i++) {
    clients.push(connect(cluster.registryUrls, { deadlineMs: 10_000 }));
  }
  const started = performance.now();
  const deadline = started + BUDGET_MS;
  let next = 0, done = 0, failed = 0, reported = 0;
  await Promise.all(
    Array.from({ length: CALLERS }, async (_, caller) => {
      const client = clients[caller % clients.length];
      while (next < total && performance.now() < deadline) {
        const n = next++;
        try {
          await client.bind("bench/fleet", {
            id: `e${n % FLEET}`,
            url: `tcp://10.0.${(n % FLEET) >> 8}.${n % 256}:9000`,
          });
          done++;
        } catch {
          failed++;
          await new Promise((r) => setTimeout(r, 5));
        }
        if (done - reported >= 100_000) {
          reported = done;
          const s = (performance.now() - started) / 1000;
          console.error(
            `${done} binds in ${s.toFixed(0)} s (${
              (done / s).toFixed(0)
            }/s), ${failed} failed`,
          );
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  for (const client of clients) client.close();
  clients.length = 0;

  const leader = await cluster.waitForLeader();
  const rows: string[] = [];
  let bound = 0;
  for (const id of cluster.registry.keys()) {
    const dir = await cluster.dataDirOf(id);
    const wal = await filesOf(`${dir}/wal`);
    const snaps = await filesOf(`${dir}/snap`);
    const biggestSnap = Math.max(0, ...snaps.map((f) => f.size));
    const nodeBound = 2 * biggestSnap + 3 * SEGMENT_BYTES + (1 << 20);
    bound = Math.max(bound, nodeBound);
    const size = await folderBytes(dir);
    const status = await cluster.status(id, 2000);
    rows.push(
      `| ${id}${id === leader ? " (leader)" : ""} | ${mib(size)} | ${
        mib(nodeBound)
      } | ${
        size <= nodeBound ? "yes" : "NO"
      } | ${wal.length} | ${snaps.length} (${mib(biggestSnap)} newest) | ${
        status?.snapshotIndex ?? "?"
      } | ${status?.appliedIndex ?? "?"} |`,
    );
  }

  // Restart a follower on its folder: until it listens, and until it has
  // applied what it held before it stopped.
  const follower = [...cluster.registry.keys()].find((id) => id !== leader)!;
  const before = (await cluster.status(follower, 2000))?.appliedIndex ?? 0;
  await cluster.kill(follower, "SIGTERM");
  const restartAt = performance.now();
  await cluster.startNode(follower);
  const listeningMs = performance.now() - restartAt;
  let caughtUpMs = NaN;
  for (let i = 0; i < 2_000; i++) {
    const status = await cluster.status(follower, 500);
    if (status !== null && status.appliedIndex >= before) {
      caughtUpMs = performance.now() - restartAt;
      break;
    }
    await new Promise((r) => setTimeout(r, 5));
  }

  console.log(
    `\n${done} binds (${failed} failed) of a fleet of ${FLEET} ids under one name, ${CALLERS} callers on ${CLIENT_OBJECTS} client objects, 3 registry processes, fsync on: ${
      (done / seconds).toFixed(0)
    } binds/s over ${
      seconds.toFixed(0)
    } s. Snapshot every ${SNAPSHOT_ENTRIES} entries, WAL segments of ${
      mib(SEGMENT_BYTES)
    } MiB.\n`,
  );
  console.log(
    "| node | data folder MiB | bound MiB | under bound | WAL segments | snapshot files | snapshot index | applied index |",
  );
  console.log("|---|---:|---:|:---|---:|---:|---:|---:|");
  for (const row of rows) console.log(row);
  console.log(
    `\nRestart of follower ${follower} (SIGTERM, then started on its folder): listening after ${
      listeningMs.toFixed(0)
    } ms (process start, snapshot load, WAL replay), applied index ${before} reached after ${
      caughtUpMs.toFixed(0)
    } ms.`,
  );
} finally {
  for (const client of clients) client.close();
  await cluster.stop();
}

interface FileInfo {
  name: string;
  size: number;
}

async function filesOf(dir: string): Promise<FileInfo[]> {
  const files: FileInfo[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (!entry.isFile) continue;
      files.push({
        name: entry.name,
        size: (await Deno.stat(`${dir}/${entry.name}`)).size,
      });
    }
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  return files;
}

async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) total += await folderBytes(path);
    else if (entry.isFile) total += (await Deno.stat(path)).size;
  }
  return total;
}

function mib(bytes: number): string {
  return (bytes / (1 << 20)).toFixed(1);
}
