/**
 * Snapshots and log compaction under load (Raft paper §7): a 3-node
 * `RaftNode` cluster in this process on 127.0.0.1 (authenticated peer
 * connections, every write fdatasynced to temp folders on the real disk)
 * takes 1,000,000 proposals of bind-sized entries (200 bytes; proposed
 * through RaftNode, not through the registry's client port, which would
 * take minutes more for the same log) from 64 concurrent proposers on the
 * leader. The state machine is a key → value map over 10,000 keys (like a
 * registry whose binds keep re-registering a fleet of 10,000 endpoints);
 * it snapshots every 10,000 applied entries and keeps 5,000 before each.
 *
 * Prints, per node, the data folder's size at the end against its bound
 * (2 snapshot files + the log since the older kept snapshot's trailing
 * window + 2 WAL segments), and the restart time of a follower: open
 * (snapshot loaded, state machine restored, WAL after it read) until its
 * state machine has applied its whole log; then until it has caught up
 * with the leader.
 *
 * A script, not a test: it asserts nothing about speed.
 *
 * ```sh
 * deno task bench:snapshot            # 1,000,000 proposals
 * deno task bench:snapshot --quick    # 100,000
 * deno task bench:snapshot --dir /mnt/ssd/tmp
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

const USAGE = `usage: deno task bench:snapshot [options]

  --proposals N   proposals in all (default 1000000; --quick: 100000)
  --quick         100,000 proposals
  --dir PATH      parent folder of the temp data folders (default: the
                  system temp folder; it should be on a real disk)
  --help          show this text`;

const flags = benchArgs(USAGE, {
  proposals: { type: "string" },
  quick: { type: "boolean", default: false },
  dir: { type: "string" },
});
const total = Number(
  flags.proposals ?? (flags.quick ? 100_000 : 1_000_000),
);
if (!Number.isInteger(total) || total < 1 || total > 10_000_000) {
  usageError(
    `--proposals must be an integer 1..10000000, got ${flags.proposals}`,
    USAGE,
  );
}
const PROPOSERS = 64;
const KEYS = 10_000;
const EVERY_ENTRIES = 10_000;
const TRAILING = 5_000;
const SEGMENT_BYTES = 4 << 20;
/** Bytes of one entry's data: a bind-sized command. */
const PAYLOAD = "p".repeat(180);

const key = await ClusterKey.fromSecret(TEST_SECRET);

/** One node: its Raft node, peer port and state machine. */
class Member {
  node!: RaftNode<number>;
  server!: PeerServer;
  state = new Map<string, string>();

  constructor(
    readonly id: string,
    readonly peers: Record<string, string>,
    readonly dataDir: string,
  ) {}

  async start(): Promise<void> {
    const clusterId = await bootstrapClusterId(this.peers);
    const transport = new PeerTransport({
      id: this.id,
      peers: this.peers,
      key,
      clusterId,
      minBackoffMs: 10,
      maxBackoffMs: 50,
    });
    this.state = new Map();
    this.node = await RaftNode.start<number>({
      id: this.id,
      peers: this.peers,
      transport,
      dataDir: this.dataDir,
      tickMs: 20,
      electionTicks: 50,
      walOptions: { segmentBytes: SEGMENT_BYTES },
      apply: (entry) => {
        if (entry.data !== "") {
          const at = entry.data.indexOf("=");
          this.state.set(entry.data.slice(0, at), entry.data.slice(at + 1));
        }
        return entry.index;
      },
      restore: (snapshot) => {
        this.state = new Map(JSON.parse(snapshot.data));
      },
      snapshot: {
        take: () => JSON.stringify([...this.state]),
        everyEntries: EVERY_ENTRIES,
        trailingEntries: TRAILING,
      },
      onFatal: (error) => console.error(`${this.id} failed:`, error),
    });
    const port = Number(
      new URL(this.peers[this.id].replace("tcp:", "http:")).port,
    );
    this.server = servePeers({
      hostname: "127.0.0.1",
      port,
      id: this.id,
      key,
      clusterId,
      directory: transport.directory,
      onStep: (messages) => this.node.step(messages),
    });
    transport.start();
  }

  async stop(): Promise<void> {
    await this.server.close();
    await this.node.stop();
  }
}

async function folderBytes(dir: string): Promise<number> {
  let bytes = 0;
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    bytes += entry.isDirectory
      ? await folderBytes(path)
      : (await Deno.stat(path)).size;
  }
  return bytes;
}

async function count(dir: string, suffix: string): Promise<number> {
  let n = 0;
  for await (const entry of Deno.readDir(dir)) {
    if (entry.name.endsWith(suffix)) n++;
  }
  return n;
}

const mib = (bytes: number) => (bytes / (1 << 20)).toFixed(1);

const root = await Deno.makeTempDir({
  dir: flags.dir as string | undefined,
  prefix: "rafter_bench_snapshot_",
});
const ids = ["n1", "n2", "n3"];
const ports = freePorts(3);
const peers = Object.fromEntries(
  ids.map((id, i) => [id, `tcp://127.0.0.1:${ports[i]}`]),
);
const members = ids.map((id) => new Member(id, peers, `${root}/${id}`));
try {
  for (const m of members) await m.start();
  await waitFor(
    () => members.some((m) => m.node.status.role === "leader"),
    "a leader",
    20_000,
  );
  const leader = members.find((m) => m.node.status.role === "leader")!;
  const started = performance.now();
  let next = 0;
  let failed = 0;
  await Promise.all(Array.from({ length: PROPOSERS }, async () => {
    while (next < total) {
      const i = next++;
      try {
        await leader.node.propose(`k${i % KEYS}=${i}:${PAYLOAD}`, {
          timeoutMs: 30_000,
        });
      } catch {
        failed++;
      }
    }
  }));
  const proposeMs = performance.now() - started;
  const last = leader.node.status.commitIndex;
  await waitFor(
    () => members.every((m) => m.node.status.appliedIndex >= last),
    "every node to apply the log",
    60_000,
  );

  // One snapshot file's size bounds the others (the state is as large).
  const snapDir = `${root}/${leader.id}/snap`;
  let snapshotBytes = 0;
  for await (const entry of Deno.readDir(snapDir)) {
    if (entry.name.endsWith(".snap")) {
      snapshotBytes = Math.max(
        snapshotBytes,
        (await Deno.stat(`${snapDir}/${entry.name}`)).size,
      );
    }
  }
  const recordBytes = 300; // an entry record: the data, its JSON and CRC
  const bound = 2 * snapshotBytes +
    (TRAILING + 2 * EVERY_ENTRIES) * recordBytes + 2 * SEGMENT_BYTES +
    64 * 1024; // meta.json, lock, hard-state records
  const rows: string[] = [];
  for (const m of members) {
    const bytes = await folderBytes(m.dataDir);
    rows.push(
      `| ${m.id}${m === leader ? " (leader)" : ""} | ${mib(bytes)} | ${
        mib(bound)
      } | ${bytes <= bound ? "yes" : "NO"} | ${await count(
        `${m.dataDir}/wal`,
        ".wal",
      )} | ${await count(
        `${m.dataDir}/snap`,
        ".snap",
      )} | ${m.node.status.snapshotIndex} |`,
    );
  }

  // Restart a follower: open → its own log applied → caught up.
  const follower = members.find((m) => m !== leader)!;
  await follower.stop();
  const openedAt = performance.now();
  await follower.start();
  const openMs = performance.now() - openedAt;
  const ownLast = follower.node.status.lastIndex;
  await waitFor(
    () => follower.node.status.appliedIndex >= ownLast,
    "the restarted follower to apply its log",
    60_000,
  );
  const appliedMs = performance.now() - openedAt;
  const snapshotIndex = follower.node.status.snapshotIndex;
  await waitFor(
    () => follower.node.status.appliedIndex >= leader.node.status.commitIndex,
    "the restarted follower to catch up",
    60_000,
  );
  const caughtUpMs = performance.now() - openedAt;

  console.log(
    `## Snapshots and compaction: ${total.toLocaleString("en")} proposals of ${
      PAYLOAD.length + 12
    }-byte entries through RaftNode, ${PROPOSERS} proposers, 3 nodes, fsync on\n\n` +
      `${(total / (proposeMs / 1000)).toFixed(0)} commits/s over ${
        (proposeMs / 1000).toFixed(1)
      } s (${failed} failed); state: ${KEYS.toLocaleString("en")} keys; ` +
      `snapshot every ${EVERY_ENTRIES.toLocaleString("en")} entries, ${
        TRAILING.toLocaleString("en")
      } kept before it; ` +
      `WAL segments of ${mib(SEGMENT_BYTES)} MiB; one snapshot file ${
        mib(snapshotBytes)
      } MiB.\n` +
      `Bound = 2 snapshot files + ${
        (TRAILING + 2 * EVERY_ENTRIES).toLocaleString("en")
      } entries × ${recordBytes} B + 2 segments + 64 KiB.\n`,
  );
  console.log(
    [
      "| node | data folder MiB | bound MiB | under bound | WAL segments | snapshot files | snapshot index |",
      "|---|---|---|---|---|---|---|",
      ...rows,
    ].join("\n"),
  );
  console.log(
    [
      "",
      `| restart of ${follower.id} | ms |`,
      "|---|---|",
      `| open (snapshot at ${snapshotIndex} loaded and restored, WAL after it read) | ${
        openMs.toFixed(0)
      } |`,
      `| open → its own log (to ${ownLast}) applied | ${
        appliedMs.toFixed(0)
      } |`,
      `| open → caught up with the leader | ${caughtUpMs.toFixed(0)} |`,
    ].join("\n"),
  );
} finally {
  for (const m of members) await m.stop().catch(() => {});
  await Deno.remove(root, { recursive: true });
}
