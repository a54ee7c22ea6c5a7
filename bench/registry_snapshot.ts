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
 * Then the backup row: it binds 100,000 distinct endpoints (ids `b0`…,
 * over 100 names; `--save-bindings N`), and times `rafter snapshot save`
 * (in-process `runCli`: the leader's barrier and snapshot, the chunked
 * fetch, the SHA-256 check and the atomic write of the file; median of 3)
 * and `rafter snapshot status` of the file. Beside it, etcd's equivalent:
 * a 3-member etcd (`testing/etcd.ts`: Debian's `etcd-server`, installed with
 * apt-get when missing and this process may) holding as many keys, each
 * the JSON of the same binding, and `etcdctl snapshot save FILE` (Debian's
 * `etcd-client`, installed the same way) against its leader, the rounds
 * alternating with Rafter's, then `etcdctl snapshot status FILE`: a table of
 * both and their ratio. Without etcd or etcdctl the etcd row is skipped,
 * saying how to install them.
 *
 * A script, not a test: it asserts nothing about speed.
 *
 * ```sh
 * deno task bench:registry-snapshot            # 1,000,000 binds
 * deno task bench:registry-snapshot --quick    # 100,000
 * deno task bench:registry-snapshot --binds 1000   # mostly the backup row
 * ```
 *
 * @module
 */

import { benchArgs, usageError } from "./_args.ts";
import { LocalCluster } from "../testing/cluster.ts";
import { connect, type RafterClient } from "../mod.ts";
import { runCli } from "../cli/main.ts";
import { Buffer } from "node:buffer";
import { Etcd3 } from "etcd3";
import { EtcdCluster, findEtcd, findEtcdctl, run } from "../testing/etcd.ts";
import { median, ratio } from "./report.ts";
import { readSnapshotFile } from "../registry/snapshot_file.ts";
import { SNAPSHOT_CHUNK_BYTES } from "../registry/service/snapshot.ts";
import type { Binding } from "../registry/state.ts";

const USAGE = `usage: deno task bench:registry-snapshot [options]

  --binds N          binds in all (default 1000000; --quick: 100000)
  --quick            100,000 binds
  --save-bindings N  distinct bindings to back up (default 100000; 0: no backup row)
  --help             show this text`;

const flags = benchArgs(USAGE, {
  binds: { type: "string" },
  quick: { type: "boolean", default: false },
  "save-bindings": { type: "string" },
});
const saveBindings = Number(flags["save-bindings"] ?? 100_000);
if (!Number.isInteger(saveBindings) || saveBindings < 0) {
  usageError(
    `--save-bindings must be an integer >= 0, got ${flags["save-bindings"]}`,
    USAGE,
  );
}
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
/** Puts per etcd txn (etcd's --max-txn-ops defaults to 128). */
const ETCD_TXN_OPS = 100;
/** etcd's Raft timing: the Rafter registry's defaults. */
const TICK_MS = 100;
const ETCDCTL_ENV = { ETCDCTL_API: "3" };
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
  if (saveBindings > 0) await backupRow(saveBindings);
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

/** One round's figures of a save, ms and file bytes. */
interface Save {
  ms: number;
  fileBytes: number;
}

/** The etcd side of the backup row, or why it is skipped. */
type EtcdSide = {
  cluster: EtcdCluster;
  etcdctl: string;
  version: string;
  ctlVersion: string;
  leaderUrl: string;
  putSeconds: number;
  keys: number;
  valueBytes: number;
  keyBytes: number;
} | { skipped: string };

/**
 * Binds `count` distinct endpoints, puts as many keys of the same JSON into
 * a 3-member etcd, then times `rafter snapshot save` and `etcdctl snapshot
 * save` in turn (3 rounds each, alternating so load drifts hit both), and
 * the `status` of each file.
 */
async function backupRow(count: number): Promise<void> {
  const client = connect(cluster.registryUrls, { deadlineMs: 30_000 });
  clients.push(client);
  const bindStarted = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (next < count) {
        const n = next++;
        await client.bind(`bench/backup/s${n % 100}`, backupBinding(n));
      }
    }),
  );
  const bindSeconds = (performance.now() - bindStarted) / 1000;
  const dir = await Deno.makeTempDir({ prefix: "rafter-bench-backup-" });
  let etcd: EtcdSide = { skipped: "not started" };
  try {
    const file = `${dir}/registry.snap`;
    const etcdFile = `${dir}/etcd.db`;
    const save = async (): Promise<Record<string, number>> => {
      const out: string[] = [];
      const code = await runCli([
        "snapshot",
        "save",
        file,
        "--registry",
        cluster.registryUrls.join(","),
        "--timeout-ms",
        "30000",
        "--json",
      ], { out: (line) => out.push(line), err: (line) => console.error(line) });
      if (code !== 0) throw new Error(`rafter snapshot save exited ${code}`);
      return JSON.parse(out.join("\n"));
    };
    // An untimed first save: its bindings are what etcd is given.
    await save();
    const backup = (await readSnapshotFile(file)).snapshot.state.bindings
      .filter((b) => b.name.startsWith("bench/backup/"));
    etcd = await etcdSide(backup);
    const saves: Save[] = [];
    const etcdSaves: Save[] = [];
    let header: Record<string, number> = {};
    for (let round = 0; round < 3; round++) {
      const started = performance.now();
      header = await save();
      saves.push({
        ms: performance.now() - started,
        fileBytes: header.fileBytes,
      });
      if ("cluster" in etcd) etcdSaves.push(await etcdSave(etcd, etcdFile));
    }
    const statusStarted = performance.now();
    const code = await runCli(["snapshot", "status", file], {
      out: () => {},
      err: (line) => console.error(line),
    });
    const statusMs = performance.now() - statusStarted;
    if (code !== 0) throw new Error(`rafter snapshot status exited ${code}`);
    const etcdStatus = "cluster" in etcd
      ? await etcdSnapshotStatus(etcd, etcdFile)
      : null;
    const rafterMs = median(saves.map((s) => s.ms));
    const etcdMs = median(etcdSaves.map((s) => s.ms));
    const minMax = (list: Save[]) =>
      list.length === 0
        ? "–"
        : `${Math.min(...list.map((s) => s.ms)).toFixed(0)}, ${
          Math.max(...list.map((s) => s.ms)).toFixed(0)
        }`;
    console.log(
      `\nBackup: ${count} distinct bindings under 100 names bound in ${
        bindSeconds.toFixed(0)
      } s; rafter snapshot save (in-process runCli against the 3 nodes: barrier, snapshot on the leader, chunked fetch, SHA-256, atomic write), 3 rounds, alternating with etcdctl snapshot save:\n`,
    );
    if ("cluster" in etcd) {
      console.log(
        `etcd ${etcd.version} (3 members, fsync on, tick ${TICK_MS} ms) holds ${etcd.keys} keys NAME/ID like "bench/backup/s0/b0" (${etcd.keyBytes} key + ${etcd.valueBytes} value bytes on average: each the JSON of one of Rafter's bindings as its snapshot holds it, one put each, in txns of ${ETCD_TXN_OPS}) put in ${
          etcd.putSeconds.toFixed(0)
        } s; etcdctl ${etcd.ctlVersion} snapshot save FILE --endpoints of the leader (a child process: start, Maintenance.Snapshot stream of the bbolt file, fsync, rename), timed from spawn to exit; snapshot status: etcdctl snapshot status FILE -w json (reads the file, hashes it).\n`,
      );
    } else {
      console.log(`etcd row skipped: ${etcd.skipped}\n`);
    }
    console.log(
      "| system | keys / bindings | file MiB | save ms (median of 3) | save ms (min, max) | status ms |",
    );
    console.log("|---|---:|---:|---:|---:|---:|");
    console.log(
      `| Rafter | ${header.bindings} | ${mib(header.fileBytes)} | ${
        rafterMs.toFixed(0)
      } | ${minMax(saves)} | ${statusMs.toFixed(0)} |`,
    );
    if ("cluster" in etcd) {
      const etcdBytes = median(etcdSaves.map((s) => s.fileBytes));
      console.log(
        `| etcd | ${etcdStatus?.totalKey ?? "?"} | ${mib(etcdBytes)} | ${
          etcdMs.toFixed(0)
        } | ${minMax(etcdSaves)} | ${etcdStatus?.ms.toFixed(0) ?? "?"} |`,
      );
      const r = (a: number, b: number) => ratio(a, b)?.toFixed(2) ?? "–";
      console.log(
        `| Rafter / etcd | | ${r(header.fileBytes, etcdBytes)} | ${
          r(rafterMs, etcdMs)
        } | | ${r(statusMs, etcdStatus?.ms ?? NaN)} |`,
      );
    }
    console.log(
      `\nRafter payload ${mib(header.bytes)} MiB in ${
        Math.ceil(header.bytes / SNAPSHOT_CHUNK_BYTES)
      } chunks of ${SNAPSHOT_CHUNK_BYTES >> 20} MiB.`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
    if ("cluster" in etcd) await etcd.cluster.stop();
  }
}

/** The endpoint bound as the `n`th binding of the backup row. */
function backupBinding(n: number) {
  return {
    id: `b${n}`,
    url: `tcp://10.1.${(n >> 8) % 256}.${n % 256}:9000`,
    attrs: { zone: `z${n % 3}` },
  };
}

/**
 * Starts a 3-member etcd and puts a key `NAME/ID` for each of `bindings`
 * (the Rafter side's, from its snapshot), its value the binding's JSON as
 * Rafter's snapshot holds it, 16 txns of 100 puts in flight.
 */
async function etcdSide(bindings: readonly Binding[]): Promise<EtcdSide> {
  const count = bindings.length;
  const log = (line: string) => console.error(line);
  const [binary, ctl] = [await findEtcd(log), await findEtcdctl(log)];
  if ("skipped" in binary) return binary;
  if ("skipped" in ctl) return ctl;
  const etcd = new EtcdCluster(binary.path, {
    heartbeatMs: TICK_MS,
    electionMs: TICK_MS * 10,
  });
  try {
    await etcd.start(3);
    const leaderUrl = etcd.clientUrl(await etcd.waitForLeader());
    const put = new Etcd3({ hosts: leaderUrl });
    const started = performance.now();
    let next = 0, keyBytes = 0, valueBytes = 0;
    try {
      await Promise.all(Array.from({ length: 16 }, async () => {
        while (next < count) {
          const from = next;
          next = Math.min(count, next + ETCD_TXN_OPS);
          const ops = [];
          for (let n = from; n < next; n++) {
            const binding = bindings[n];
            const key = Buffer.from(`${binding.name}/${binding.id}`);
            const value = Buffer.from(JSON.stringify(binding));
            keyBytes += key.length;
            valueBytes += value.length;
            ops.push({ request_put: { key, value } });
          }
          await put.kv.txn({ success: ops });
        }
      }));
    } finally {
      put.close();
    }
    return {
      cluster: etcd,
      etcdctl: ctl.path,
      version: binary.version,
      ctlVersion: ctl.version,
      leaderUrl,
      putSeconds: (performance.now() - started) / 1000,
      keys: count,
      keyBytes: Math.round(keyBytes / count),
      valueBytes: Math.round(valueBytes / count),
    };
  } catch (error) {
    await etcd.stop();
    return {
      skipped: `etcd ${binary.version} failed: ${
        (error as Error).message.split("\n")[0]
      }`,
    };
  }
}

/** `etcdctl snapshot save file` against the leader: its time and the file's size. */
async function etcdSave(
  etcd: Extract<EtcdSide, { cluster: EtcdCluster }>,
  file: string,
): Promise<Save> {
  const started = performance.now();
  const { ok, out } = await run(
    etcd.etcdctl,
    [
      `--endpoints=${etcd.leaderUrl}`,
      "snapshot",
      "save",
      file,
    ],
    120_000,
    ETCDCTL_ENV,
  );
  const ms = performance.now() - started;
  if (!ok) throw new Error(`etcdctl snapshot save failed: ${out.trim()}`);
  return { ms, fileBytes: (await Deno.stat(file)).size };
}

/** `etcdctl snapshot status file -w json`: its time and the keys it counts. */
async function etcdSnapshotStatus(
  etcd: Extract<EtcdSide, { cluster: EtcdCluster }>,
  file: string,
): Promise<{ ms: number; totalKey: number } | null> {
  const started = performance.now();
  const { ok, out } = await run(
    etcd.etcdctl,
    [
      "snapshot",
      "status",
      file,
      "-w",
      "json",
    ],
    60_000,
    ETCDCTL_ENV,
  );
  const ms = performance.now() - started;
  if (!ok) {
    console.error(`etcdctl snapshot status failed: ${out.trim()}`);
    return null;
  }
  const json = out.match(/\{.*\}/s)?.[0];
  return { ms, totalKey: json ? JSON.parse(json).totalKey : NaN };
}
