/**
 * Raft commit throughput and latency: a 3-node `RaftNode` cluster in this
 * process on 127.0.0.1 (authenticated peer connections, every log write
 * fdatasynced to temp folders on the real disk), proposals of 200-byte
 * strings from 1 and 64 concurrent proposers on the leader, with the
 * write-ahead log's group commit on and off. Each row starts a fresh
 * cluster, waits for a leader, warms up, then runs a closed loop (each
 * proposer proposes again once its last proposal was applied) for a fixed
 * time and prints commits/s, p50/p99 commit latency (propose → applied on
 * the leader, ms), fdatasyncs per commit (all three nodes, and the
 * leader's own), and proposals that failed because an election moved the
 * leader (20 ms ticks, election timeout 50 ticks = 1..2 s). A second table measures the WAL alone: appends of one
 * 200-byte entry from 1 and 64 concurrent appenders.
 *
 * A script, not a test: it asserts nothing about speed.
 *
 * ```sh
 * deno task bench:raft            # 3 s a row, about 40 s
 * deno task bench:raft --quick    # 1 s a row
 * deno task bench:raft --seconds 10 --dir /mnt/ssd/tmp
 * ```
 *
 * @module
 */

import { benchArgs, usageError } from "./_args.ts";
import { freePorts } from "../testing/ports.ts";
import { TEST_SECRET } from "../testing/cluster.ts";
import { waitFor } from "../testing/time.ts";
import { RaftNode } from "../raft/node.ts";
import { bootstrapClusterId } from "../raft/data_dir.ts";
import { ClusterKey } from "../raft/peer_auth.ts";
import { type PeerServer, servePeers } from "../raft/deno.ts";
import { PeerTransport } from "../raft/peer_transport.ts";
import { Wal } from "../raft/wal.ts";

const USAGE = `usage: deno task bench:raft [options]

  --seconds N     measured time of each row (default 3; --quick: 1)
  --quick         1 s rows
  --proposers L   concurrent proposers of the rows (default 1,64)
  --dir PATH      parent folder of the temp data folders (default: the
                  system temp folder; it should be on a real disk, not tmpfs)
  --help          show this text`;

const flags = benchArgs(USAGE, {
  seconds: { type: "string" },
  quick: { type: "boolean", default: false },
  proposers: { type: "string", default: "1,64" },
  dir: { type: "string" },
});
const seconds = Number(flags.seconds ?? (flags.quick ? 1 : 3));
if (!(seconds > 0 && seconds <= 600)) {
  usageError(
    `--seconds must be a number in (0, 600], got ${flags.seconds}`,
    USAGE,
  );
}
const proposerCounts = String(flags.proposers).split(",").map(Number);
if (proposerCounts.some((n) => !Number.isInteger(n) || n < 1 || n > 1000)) {
  usageError(
    `--proposers must list integers 1..1000, got ${flags.proposers}`,
    USAGE,
  );
}
const parent = flags.dir as string | undefined;
const warmupMs = Math.min(500, seconds * 250);
/** A proposal: 200 bytes of data. */
const PAYLOAD = "p".repeat(200);

const key = await ClusterKey.fromSecret(TEST_SECRET);

interface Member {
  node: RaftNode<number>;
  server: PeerServer;
  syncs: { count: number };
}

async function startCluster(
  root: string,
  groupCommit: boolean,
): Promise<Member[]> {
  const ids = ["n1", "n2", "n3"];
  const ports = freePorts(3);
  const peers = Object.fromEntries(
    ids.map((id, i) => [id, `tcp://127.0.0.1:${ports[i]}`]),
  );
  const members: Member[] = [];
  const clusterId = await bootstrapClusterId(peers);
  for (const [i, id] of ids.entries()) {
    const transport = new PeerTransport({
      id,
      peers,
      key,
      clusterId,
      minBackoffMs: 10,
      maxBackoffMs: 50,
    });
    const syncs = { count: 0 };
    const node = await RaftNode.start<number>({
      id,
      peers,
      transport,
      dataDir: `${root}/${id}`,
      tickMs: 20,
      electionTicks: 50,
      walOptions: { groupCommit, onSync: () => syncs.count++ },
      apply: (entry) => entry.index,
      onFatal: (error) => console.error(`${id} failed:`, error),
    });
    const server = servePeers({
      hostname: "127.0.0.1",
      port: ports[i],
      id,
      key,
      clusterId,
      directory: transport.directory,
      onStep: (messages) => node.step(messages),
    });
    transport.start();
    members.push({ node, server, syncs });
  }
  return members;
}

async function stopCluster(members: Member[]): Promise<void> {
  for (const m of members) {
    await m.server.close();
    await m.node.stop();
  }
}

interface Row {
  commits: number;
  latencies: number[];
  syncs: number;
  leaderSyncs: number;
  /** Proposals that failed (a leader change); not in `latencies`. */
  errors: number;
}

/**
 * Runs `workers` closed loops of `once` for `ms`; the latencies (ms) of the
 * calls that returned true.
 */
async function closedLoop(
  workers: number,
  ms: number,
  once: () => Promise<boolean>,
): Promise<number[]> {
  const latencies: number[] = [];
  const stop = performance.now() + ms;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let i = 0; i < 10_000_000 && performance.now() < stop; i++) {
        const t0 = performance.now();
        if (await once()) latencies.push(performance.now() - t0);
      }
    }),
  );
  return latencies;
}

async function clusterRow(
  proposers: number,
  groupCommit: boolean,
): Promise<Row> {
  const root = await Deno.makeTempDir({
    prefix: "rafter_bench_raft_",
    dir: parent,
  });
  const members = await startCluster(root, groupCommit);
  let errors = 0;
  try {
    const leader = await waitFor(
      () => members.find((m) => m.node.status.role === "leader"),
      "a leader",
      10_000,
    );
    let current = leader;
    // A proposal that fails (an election moved the leader) is counted as an
    // error, not timed, and the next goes to whichever node leads now.
    const propose = async () => {
      try {
        await current.node.propose(PAYLOAD, { timeoutMs: 10_000 });
        return true;
      } catch {
        errors++;
        await new Promise((resolve) => setTimeout(resolve, 10));
        current = members.find((m) => m.node.status.role === "leader") ??
          current;
        return false;
      }
    };
    await closedLoop(proposers, warmupMs, propose);
    errors = 0;
    const before = members.map((m) => m.syncs.count);
    const leaderBefore = leader.syncs.count;
    const latencies = await closedLoop(proposers, seconds * 1000, propose);
    const syncs = members.reduce((n, m, i) => n + m.syncs.count - before[i], 0);
    return {
      commits: latencies.length,
      latencies,
      syncs,
      leaderSyncs: leader.syncs.count - leaderBefore,
      errors,
    };
  } finally {
    await stopCluster(members);
    await Deno.remove(root, { recursive: true });
  }
}

async function walRow(appenders: number, groupCommit: boolean): Promise<Row> {
  const root = await Deno.makeTempDir({
    prefix: "rafter_bench_wal_",
    dir: parent,
  });
  const { wal } = await Wal.open(root, { groupCommit });
  try {
    let next = 1;
    const append = async () => {
      await wal.append({
        entries: [{ index: next++, term: 1, data: PAYLOAD }],
      });
      return true;
    };
    await closedLoop(appenders, warmupMs, append);
    const before = wal.stats.syncs;
    const latencies = await closedLoop(appenders, seconds * 1000, append);
    const syncs = wal.stats.syncs - before;
    return {
      commits: latencies.length,
      latencies,
      syncs,
      leaderSyncs: syncs,
      errors: 0,
    };
  } finally {
    await wal.close();
    await Deno.remove(root, { recursive: true });
  }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

function fmt(n: number, digits = 2): string {
  return Number.isFinite(n) ? n.toFixed(digits) : "-";
}

function line(first: string[], row: Row, cluster: boolean): string {
  const sorted = row.latencies.slice().sort((a, b) => a - b);
  const cells = [
    ...first,
    fmt(row.commits / seconds, 0),
    fmt(percentile(sorted, 0.5)),
    fmt(percentile(sorted, 0.99)),
    fmt(row.syncs / row.commits, 3),
  ];
  if (cluster) {
    cells.push(fmt(row.leaderSyncs / row.commits, 3), String(row.errors));
  }
  return `| ${cells.join(" | ")} |`;
}

async function fsType(): Promise<string> {
  try {
    const out = await new Deno.Command("stat", {
      args: ["-f", "-c", "%T", parent ?? Deno.env.get("TMPDIR") ?? "/tmp"],
      stdout: "piped",
      stderr: "null",
    }).output();
    return new TextDecoder().decode(out.stdout).trim() || "unknown";
  } catch {
    return "unknown";
  }
}

const fs = await fsType();
console.log(
  `Raft commit: 3 nodes on 127.0.0.1 in one process, fdatasync on (${fs}), ` +
    `${PAYLOAD.length}-byte proposals, ${seconds} s a row after a ${warmupMs} ms warm-up.\n`,
);
if (fs === "tmpfs" || fs === "ramfs") {
  console.log(
    "warning: the temp folder is in memory; fsync costs nothing there. Pass --dir on a real disk.\n",
  );
}
/** Prints a table: a row for each count of callers, group commit on and off. */
async function table(
  header: string,
  measure: (callers: number, group: boolean) => Promise<Row>,
  cluster: boolean,
): Promise<void> {
  console.log(header);
  console.log(`|---:|:---|${"---:|".repeat(header.split("|").length - 4)}`);
  for (const callers of proposerCounts) {
    for (const group of [true, false]) {
      const row = await measure(callers, group);
      console.log(line([String(callers), group ? "on" : "off"], row, cluster));
    }
  }
}

await table(
  "| proposers | group commit | commits/s | p50 ms | p99 ms | fdatasyncs/commit (3 nodes) | leader fdatasyncs/commit | failed proposals |",
  clusterRow,
  true,
);
console.log("\nWAL alone: appends of one entry each, fdatasync on.\n");
await table(
  "| appenders | group commit | appends/s | p50 ms | p99 ms | fdatasyncs/append |",
  walRow,
  false,
);
