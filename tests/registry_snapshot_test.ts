/**
 * Snapshots and log compaction of a 3-node registry run as real processes
 * (Raft paper §7; dissertation §5): a node down during 50,000 binds catches
 * up through InstallSnapshot, a node whose data folder was deleted rejoins
 * through a snapshot, and a restart after many snapshots replays only the
 * log after the newest.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { ConnectionPool } from "../stub/connection_pool.ts";
import { RegistryClient } from "../stub/registry_client/registry_client.ts";

const SNAPSHOT_ENTRIES = 500;
/** Names the binds are spread over (each lookup answer stays small). */
const NAMES = 10;
const SEGMENT_BYTES = 256 * 1024;

function newCluster(): LocalCluster {
  return new LocalCluster({
    nodeArgs: [
      "--snapshot-entries",
      String(SNAPSHOT_ENTRIES),
      "--wal-segment-bytes",
      String(SEGMENT_BYTES),
    ],
  });
}

/**
 * Binds `count` endpoints `${prefix}${i}` (spread over NAMES names) with
 * `inFlight` binds pipelined; returns the acknowledged ids by name.
 */
async function bindMany(
  registry: RegistryClient,
  prefix: string,
  count: number,
  inFlight = 64,
): Promise<{ acked: Map<string, string[]>; failed: string[] }> {
  const acked = new Map<string, string[]>();
  const failed: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const name = `svc${i % NAMES}`;
      const id = `${prefix}${i}`;
      try {
        await registry.bind(name, {
          id,
          url: `tcp://127.0.0.1:${10_000 + (i % 50_000)}`,
        }, { deadlineMs: 10_000 });
        const list = acked.get(name) ?? [];
        list.push(id);
        acked.set(name, list);
      } catch (error) {
        failed.push(`${id}: ${(error as Error).message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return { acked, failed };
}

/** How long a node may take to catch up, and each status call. */
const CAUGHT_UP = { timeoutMs: 30_000, statusTimeoutMs: 2000, intervalMs: 100 };

/** Every acknowledged bind is served by a serializable lookup on `url`. */
async function assertServes(
  registry: RegistryClient,
  url: string,
  acked: Map<string, string[]>,
  id: string,
): Promise<void> {
  for (const [name, ids] of acked) {
    const found = await registry.lookup(name, {
      node: url,
      rotate: false,
      consistency: "serializable",
      deadlineMs: 10_000,
    });
    const have = new Set(found.endpoints.map((e) => e.id));
    const missing = ids.filter((e) => !have.has(e));
    assert.deepEqual(missing.slice(0, 10), [], `${id} lacks binds of ${name}`);
  }
}

async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    total += entry.isDirectory
      ? await folderBytes(path)
      : (await Deno.stat(path)).size;
  }
  return total;
}

async function names(dir: string): Promise<string[]> {
  return (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort();
}

/**
 * Runs `test` on a fresh 3-node cluster (snapshots every SNAPSHOT_ENTRIES)
 * with its leader elected; stops everything after.
 */
async function withCluster(
  test: (
    cluster: LocalCluster,
    leader: string,
    pool: ConnectionPool,
  ) => Promise<void>,
): Promise<void> {
  const cluster = newCluster();
  const pool = new ConnectionPool();
  try {
    await cluster.startRegistry(3);
    await test(cluster, await cluster.waitForLeader(15_000), pool);
  } finally {
    pool.close();
    await cluster.stop();
  }
}

function merge(
  into: Map<string, string[]>,
  from: Map<string, string[]>,
): void {
  for (const [name, ids] of from) {
    into.set(name, [...into.get(name) ?? [], ...ids]);
  }
}

Deno.test("§7 a node down during 50,000 binds catches up through InstallSnapshot and serves every acknowledged bind", () =>
  withCluster(async (cluster, leader, pool) => {
    const down = [...cluster.registry.keys()].find((id) => id !== leader)!;
    await cluster.kill(down, "SIGKILL");
    const registry = new RegistryClient(
      [...cluster.registry].filter(([id]) => id !== down).map(([, u]) => u),
      pool,
    );
    const started = performance.now();
    const { acked, failed } = await bindMany(registry, "b", 50_000);
    const bindMs = performance.now() - started;
    assert.deepEqual(failed.slice(0, 5), [], "no bind failed");
    const leaderStatus = (await cluster.status(leader, 2000))!;
    assert.ok(
      leaderStatus.snapshotIndex > 40_000,
      `the leader snapshotted: ${leaderStatus.snapshotIndex}`,
    );
    const restartedAt = performance.now();
    const child = await cluster.startNode(down);
    await cluster.waitCaughtUp(down, CAUGHT_UP);
    const catchUpMs = performance.now() - restartedAt;
    const line = child.output.find((l) =>
      /installed a snapshot from the leader at index \d+/.test(l)
    );
    assert.ok(
      line,
      `${down} installed a snapshot:\n${child.output.join("\n")}`,
    );
    const status = (await cluster.status(down, 2000))!;
    assert.ok(status.snapshotIndex > 40_000, JSON.stringify(status));
    const snapFiles = await names(`${await cluster.dataDirOf(down)}/snap`);
    console.log(
      `50,000 binds (64 in flight) in ${
        bindMs.toFixed(0)
      } ms with ${down} down; ` +
        `${down} restarted and caught up through a snapshot at index ${status.snapshotIndex} in ${
          catchUpMs.toFixed(0)
        } ms (${line}); its snapshot files: ${snapFiles.join(", ")}`,
    );
    await assertServes(registry, cluster.registry.get(down)!, acked, down);
    registry.close();
  }));

Deno.test("§7 a node whose data folder was deleted rejoins through a snapshot, without leading, and has every acknowledged bind", () =>
  withCluster(async (cluster, leader, pool) => {
    const registry = new RegistryClient(cluster.registryUrls, pool);
    const acked = new Map<string, string[]>();
    const first = await bindMany(registry, "a", 3_000);
    assert.deepEqual(first.failed.slice(0, 5), []);
    merge(acked, first.acked);
    const lost = [...cluster.registry.keys()].find((id) => id !== leader)!;
    await cluster.kill(lost, "SIGTERM");
    const dir = await cluster.dataDirOf(lost);
    await Deno.remove(dir, { recursive: true });
    const others = new RegistryClient(
      [...cluster.registry].filter(([id]) => id !== lost).map(([, u]) => u),
      pool,
    );
    const second = await bindMany(others, "c", 3_000);
    assert.deepEqual(second.failed.slice(0, 5), []);
    merge(acked, second.acked);
    // Same flags: the same --peers give the same cluster id, so the new
    // empty folder is accepted as this member's, and its empty log cannot
    // win an election (Raft paper §5.4.1) while the others have a leader.
    const child = await cluster.startNode(lost);
    await cluster.waitCaughtUp(lost, CAUGHT_UP);
    assert.ok(
      child.output.some((l) =>
        /installed a snapshot from the leader at index \d+/.test(l)
      ),
      child.output.join("\n"),
    );
    assert.ok(
      !child.output.some((l) => /leader of term/.test(l)),
      `${lost} never led:\n${child.output.join("\n")}`,
    );
    const status = (await cluster.status(lost, 2000))!;
    assert.equal(status.role, "follower");
    assert.ok(status.snapshotIndex >= 6_000 - 2 * SNAPSHOT_ENTRIES);
    assert.equal(await cluster.leader(), leader, "the leader kept leading");
    await assertServes(registry, cluster.registry.get(lost)!, acked, lost);
    others.close();
    registry.close();
  }));

Deno.test("§7 a restart after many snapshots loads the newest and replays only the log after it; the data folder stays small", () =>
  withCluster(async (cluster, leader, pool) => {
    const registry = new RegistryClient(cluster.registryUrls, pool);
    const { acked, failed } = await bindMany(registry, "r", 20_000);
    assert.deepEqual(failed.slice(0, 5), []);
    const node = [...cluster.registry.keys()].find((id) => id !== leader)!;
    await cluster.waitCaughtUp(node, CAUGHT_UP);
    const before = (await cluster.status(node, 2000))!;
    assert.ok(before.snapshotIndex > 18_000, JSON.stringify(before));
    await cluster.kill(node, "SIGTERM");
    const dir = await cluster.dataDirOf(node);
    const segments = (await names(`${dir}/wal`)).filter((n) =>
      n.endsWith(".wal")
    );
    const snapshots = (await names(`${dir}/snap`)).filter((n) =>
      n.endsWith(".snap")
    );
    const bytes = await folderBytes(dir);
    const snapshotBytes = (await Deno.stat(`${dir}/snap/${snapshots.at(-1)}`))
      .size;
    // The log after compaction: the trailing window and what followed the
    // newest snapshot (at most 2 × SNAPSHOT_ENTRIES entries) fit in a few
    // segments; 40 snapshots were taken, two files are kept.
    assert.ok(snapshots.length <= 2, snapshots.join(", "));
    assert.ok(segments.length <= 4, `WAL segments: ${segments.join(", ")}`);
    assert.ok(
      bytes < 2 * snapshotBytes + 5 * SEGMENT_BYTES,
      `data folder ${bytes} bytes`,
    );
    const started = performance.now();
    const child = await cluster.startNode(node);
    const loaded = child.output.find((l) =>
      /loaded the snapshot at index \d+/.test(l)
    );
    assert.ok(loaded, child.output.join("\n"));
    const index = Number(/at index (\d+)/.exec(loaded)![1]);
    assert.ok(
      index >= before.appliedIndex - 2 * SNAPSHOT_ENTRIES,
      `loaded ${index}, applied ${before.appliedIndex} before the restart`,
    );
    await cluster.waitCaughtUp(node, CAUGHT_UP);
    const restartMs = performance.now() - started;
    console.log(
      `restart of ${node} after ${before.appliedIndex} entries: snapshot at ${index} loaded, ` +
        `${
          before.appliedIndex - index
        } entries replayed; data folder ${bytes} bytes ` +
        `(${segments.length} WAL segments, ${snapshots.length} snapshot files of ~${snapshotBytes} bytes); caught up in ${
          restartMs.toFixed(0)
        } ms`,
    );
    await assertServes(registry, cluster.registry.get(node)!, acked, node);
    registry.close();
  }));
