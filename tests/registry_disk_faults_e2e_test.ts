/**
 * Disk faults on live registry processes (3 nodes, fsync on), each node's
 * data folder on a file system this test mounts (its names carry the
 * test's PID; unmounted in `finally`):
 * - a disk that fills (a small tmpfs, a filler file) under a follower and
 *   then under the leader while clients write;
 * - a disk that starts failing (ext4 on a loop device, forced read-only by
 *   an ext4 error: EROFS on every later write);
 * - a WAL cut at record boundaries, in a header, in a payload and at its
 *   last byte (a power loss), the whole cluster restarted.
 * The node that cannot persist stops with a clear error (code, file, what
 * to do) and exit code 1 and acknowledges nothing it did not persist; the
 * others keep serving; nothing acknowledged is lost; once the disk is
 * fixed the node restarts and catches up.
 *
 * Needs root (mount, losetup); skipped with a message otherwise.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { waitFor } from "../testing/time.ts";
import { connect, type RafterClient } from "../mod.ts";
import { dial } from "../rpc/transport/dial.ts";
import { ConnectionError, RpcError } from "../rpc/errors.ts";
import { UNAVAILABLE, type UnavailableData } from "../protocol/registry.ts";
import { type FailingDisk, fill, Mounts } from "../testing/disk.ts";
import { logPrefix } from "./_log_prefix.ts";

const isRoot = Deno.uid() === 0;
const SKIP = isRoot ? "" : "needs root (mount -t tmpfs, losetup)";
if (!isRoot) {
  console.warn(`registry_disk_faults_e2e_test: skipped: ${SKIP}`);
}

/**
 * Clients binding `disk/e<k>` in a loop through every node; `acked` holds
 * the ids of the acknowledged binds.
 */
class Writers {
  readonly acked: string[] = [];
  readonly errors: string[] = [];
  #next = 0;
  #stopped = false;
  readonly #loops: Promise<void>[];
  readonly #client: RafterClient;
  readonly #prefix: string;

  /** @param prefix of the endpoint ids, so that later writers bind new ones. */
  constructor(urls: string[], count = 3, prefix = "e") {
    this.#prefix = prefix;
    this.#client = connect(urls, { deadlineMs: 15_000 });
    this.#loops = Array.from({ length: count }, () => this.#loop());
  }

  async #loop(): Promise<void> {
    while (!this.#stopped) {
      const id = `${this.#prefix}${this.#next++}`;
      try {
        await this.#client.bind("disk", { id, url: "tcp://10.0.0.1:1" });
        this.acked.push(id);
        // Paced: the log must not fill the small disks on its own (a slow
        // run once reached the 10,000th entry's snapshot and filled them all).
        await new Promise((r) => setTimeout(r, 5));
      } catch (e) {
        this.errors.push(`${id}: ${(e as Error).message}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  /** Waits until `more` further binds are acknowledged. */
  async progress(
    more: number,
    what: string,
    timeoutMs = 20_000,
  ): Promise<void> {
    const target = this.acked.length + more;
    await waitFor(
      () => this.acked.length >= target,
      `${more} more acknowledged binds ${what}`,
      timeoutMs,
    );
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
    this.#client.close();
  }
}

/** Waits until node `id` serves every id of `acked` (serializable reads). */
async function waitForAll(
  cluster: LocalCluster,
  id: string,
  acked: readonly string[],
  name = "disk",
  timeoutMs = 20_000,
): Promise<void> {
  const client = connect(cluster.registry.get(id)!, { deadlineMs: 2_000 });
  let missing: string[] = [];
  try {
    await waitFor(
      async () => {
        const found = await client.lookup(name, { consistency: "serializable" })
          .catch(() => null);
        if (found === null) return false;
        const have = new Set(found.endpoints.map((e) => e.id));
        missing = acked.filter((a) => !have.has(a));
        return missing.length === 0;
      },
      `${id} to serve all ${acked.length} acknowledged binds`,
      timeoutMs,
    )
      .catch(async (e) => {
        // What each node says, to tell a slow node from a stuck one.
        const statuses = [];
        for (const node of cluster.registry.keys()) {
          const s = await cluster.status(node, 2_000);
          statuses.push(
            `${node}: ${s?.role} term ${s?.term} commit ${s?.commitIndex} applied ${s?.appliedIndex}`,
          );
        }
        throw new Error(
          `${e.message}; missing ${
            missing.slice(0, 10).join(",")
          } (${missing.length}); ${statuses.join("; ")}; ${id} said:\n${
            cluster.child(id).output.slice(-15).join("\n")
          }`,
        );
      });
  } finally {
    client.close();
  }
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The node's last words: its storage failed (the errno as `code`), on a
 * file under `under`, and what to do.
 */
function assertClearDiskError(
  output: string,
  under: string,
  code: RegExp,
  advice: RegExp,
): void {
  const line = output.split("\n").find((l) =>
    / storage failed, stopped: /.test(l)
  );
  assert.ok(line, `no "storage failed" line in:\n${output}`);
  // An error line, with its timestamp and the node id.
  assert.match(line, new RegExp(`^${logPrefix("error")}registry \\S+: `));
  assert.match(
    line,
    new RegExp(`write-ahead log ${escape(under)}\\S+\\.wal: `),
  );
  assert.match(line, code);
  assert.match(line, advice);
  assert.match(line, /then restart the node/);
}

interface Answer {
  code: number;
  message: string;
  data?: UnavailableData;
}

/**
 * Binds `disk-direct/d<k>` in a loop on one connection to `url` (no
 * failover) until the node closes it: what it acknowledged and every
 * error answer.
 */
async function throughOne(url: string): Promise<{
  acked: readonly string[];
  done: Promise<{ acked: string[]; errors: Answer[] }>;
}> {
  const connection = await dial(url, { connectTimeoutMs: 5_000 });
  const acked: string[] = [];
  const errors: Answer[] = [];
  const done = (async () => {
    for (let i = 0; i < 1_000_000; i++) {
      const id = `d${i}`;
      try {
        await connection.call("registry.bind", {
          name: "disk-direct",
          endpoint: { id, url: "tcp://10.0.0.1:2" },
        }, { timeoutMs: 10_000 });
        acked.push(id);
      } catch (e) {
        if (!(e instanceof RpcError) || e instanceof ConnectionError) break; // closed
        errors.push({
          code: e.code,
          message: e.message,
          data: e.data as UnavailableData,
        });
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    connection.close();
    return { acked, errors };
  })();
  return { acked, done };
}

/** A fault of one node's disk, how to undo it, and what the node must say. */
interface DiskFault {
  inject(): Promise<void>;
  repair(): Promise<void>;
  /** The errno as the node's message renders it. */
  errno: RegExp;
  /** What the message tells the operator to do. */
  advice: RegExp;
}

/**
 * Starts 3 nodes on disks `prepare` mounts, writes through 3 clients, then
 * injects `faultOf(follower)` and, once that node is repaired and caught up,
 * `faultOf(leader)` while a client writes through the leader alone. Each
 * time: the node exits 1 with a clear message, the others keep taking
 * writes, after the repair it restarts and catches up; at the end every
 * acknowledged bind is on every node.
 */
async function followerThenLeader(
  prefix: string,
  prepare: (root: string, mounts: Mounts) => Promise<void>,
  faultOf: (id: string, role: "follower" | "leader") => DiskFault,
): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: `${prefix}-${Deno.pid}-` });
  const mounts = new Mounts();
  const cluster = new LocalCluster({
    dataDir: root,
    tickMs: 50,
    electionTicks: 10,
  });
  let writers: Writers | undefined;
  const acknowledgedDirect: string[] = [];
  try {
    await prepare(root, mounts);
    await cluster.startRegistry(3);
    const leader = await cluster.waitForLeader(20_000);
    writers = new Writers(cluster.registryUrls);
    await writers.progress(30, "at the start");
    for (const role of ["follower", "leader"] as const) {
      const id = role === "leader"
        ? await cluster.waitForLeader(20_000)
        : [...cluster.registry.keys()].find((id) => id !== leader)!;
      const fault = faultOf(id, role);
      const direct = role === "leader"
        ? await throughOne(cluster.registry.get(id)!)
        : null;
      if (direct !== null) {
        await waitFor(
          () => direct.acked.length >= 5,
          `5 binds acknowledged through ${id}`,
          20_000,
        );
      }
      await fault.inject();
      const code = await cluster.child(id).exited;
      const output = cluster.child(id).output.join("\n");
      assert.equal(code, 1, output);
      assertClearDiskError(
        output,
        `${root}/${id}/wal/`,
        fault.errno,
        fault.advice,
      );
      if (direct !== null) {
        // A write through the failing leader is answered with the cause.
        const answers = await direct.done;
        const refusal = answers.errors.find((e) =>
          e.data?.reason === "storageFailed"
        );
        assert.ok(
          refusal,
          `no storageFailed answer among ${
            JSON.stringify(answers.errors.slice(0, 3))
          }`,
        );
        assert.equal(refusal.code, UNAVAILABLE);
        assert.match(refusal.message, /its storage failed: write-ahead log /);
        assert.match(refusal.message, fault.errno);
        assert.match(refusal.message, fault.advice);
        assert.notEqual(refusal.data?.applied, undefined);
        acknowledgedDirect.push(...answers.acked);
      }
      if (role === "follower") {
        // Restarted before the disk is fixed, it stops again, as clearly.
        const again = await cluster.startNode(id).then(
          () => cluster.child(id).exited,
          () => cluster.child(id).exited,
        );
        const said = cluster.child(id).output.join("\n");
        assert.equal(again, 1, said);
        const last = said.split("\n").find((l) =>
          /: (cannot start|storage failed, stopped)/.test(l)
        );
        assert.ok(last, said);
        assert.match(last, fault.errno);
        assert.match(last, fault.advice);
      }
      await writers.progress(
        30,
        `through the others after ${id} (${role}) stopped`,
      );
      await fault.repair();
      await cluster.startNode(id);
      await waitForAll(cluster, id, writers.acked);
    }
    await writers.stop();
    assert.ok(
      acknowledgedDirect.length > 0,
      "nothing acknowledged through the leader",
    );
    for (const id of cluster.registry.keys()) {
      await waitForAll(cluster, id, writers.acked);
      await waitForAll(cluster, id, acknowledgedDirect, "disk-direct");
    }
  } finally {
    await writers?.stop();
    await cluster.stop();
    await mounts.undo();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

Deno.test({
  name:
    "a disk that fills under a follower, then under the leader: the node stops with ENOSPC naming the file and what to do, acknowledges nothing unpersisted, the others keep serving, and after space is freed it restarts and catches up",
  ignore: !isRoot,
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  let root = "";
  await followerThenLeader("rafter-diskfull", async (dir, mounts) => {
    root = dir;
    for (const id of ["n1", "n2", "n3"]) {
      await mounts.tmpfs(`${root}/${id}`, "16m");
    }
  }, (id) => ({
    inject: () => fill(`${root}/${id}`),
    repair: () => Deno.remove(`${root}/${id}/filler`),
    errno: /disk full \(ENOSPC\)/,
    advice: /Free space on that file system/,
  }));
});

Deno.test({
  name:
    "a disk that starts failing under a follower (read-only, EROFS) and under the leader (fsync EIO): the node stops with the errno, the file and what to do, the others keep serving, nothing acknowledged is lost, and once repaired it restarts and catches up",
  ignore: !isRoot,
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const disks = new Map<string, FailingDisk>();
  await followerThenLeader("rafter-diskfail", async (root, mounts) => {
    for (const id of ["n1", "n2", "n3"]) {
      disks.set(id, await mounts.failingDisk(`${root}/${id}`));
    }
  }, (id, role) => {
    const disk = disks.get(id)!;
    return role === "follower"
      ? {
        // The next write says EROFS, or fsync says EIO (the journal aborted).
        inject: () => disk.error(),
        repair: () => disk.repair(),
        errno: /(read-only file system \(EROFS\)|I\/O error \(EIO\))/,
        advice: /(Remount the file system read-write|Check the disk)/,
      }
      : {
        // The device fails its writes: fsync says EIO (or ENOSPC, the
        // device's own error), or ext4 turned read-only first.
        inject: () => disk.failWrites(),
        repair: () => disk.repair(),
        errno:
          /(I\/O error \(EIO\)|disk full \(ENOSPC\)|read-only file system \(EROFS\))/,
        advice:
          /(Check the disk|Free space on that file system|Remount the file system read-write)/,
      };
  });
});

/** Records of a segment: `[u32 len][u32 crc][JSON]`, parsed from the framing. */
function framed(
  bytes: Uint8Array,
): Array<{ offset: number; end: number; record: Record<string, unknown> }> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = [];
  for (let at = 0; at + 8 <= bytes.length;) {
    const end = at + 8 + view.getUint32(at);
    if (end > bytes.length) break;
    const text = new TextDecoder().decode(bytes.subarray(at + 8, end));
    out.push({ offset: at, end, record: JSON.parse(text) });
    at = end;
  }
  return out;
}

/** The last segment of node `id`'s WAL, its bytes and records. */
async function lastSegment(cluster: LocalCluster, id: string) {
  const walDir = `${await cluster.dataDirOf(id)}/wal`;
  const names = [...Deno.readDirSync(walDir)].map((e) => e.name).sort();
  const path = `${walDir}/${names.at(-1)}`;
  const bytes = await Deno.readFile(path);
  return { walDir, path, bytes, records: framed(bytes) };
}

/** Index of the last entry the records hold (one segment, no snapshot). */
function lastEntry(records: ReturnType<typeof framed>): number {
  let last = 0;
  for (const { record } of records) {
    if (record.t === "e") last = record.index as number;
  }
  return last;
}

/**
 * Where to cut the 3 records written at the power loss (`starts`: their
 * offsets in the tail, `size`: the tail's length), and what survives.
 */
const CUTS: Array<[string, (starts: number[], size: number) => number]> = [
  ["the boundary after the first record", (o) => o[1]],
  ["the boundary after the second record", (o) => o[2]],
  ["the middle of the second record's header", (o) => o[1] + 4],
  [
    "the middle of the last record's payload",
    (o, size) => o[2] + 8 + Math.floor((size - o[2] - 8) / 2),
  ],
  ["its last byte", (_o, size) => size - 1],
];

Deno.test("a power loss while a follower wrote records it never acknowledged, its WAL cut at a record boundary, in a header, in a payload, at its last byte: the restarted process keeps each complete record, cuts only the torn tail, catches up, takes writes, and every acknowledged bind is on it", async () => {
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  try {
    await cluster.startRegistry(3);
    const leader = await cluster.waitForLeader(20_000);
    let writers = new Writers(cluster.registryUrls);
    await writers.progress(30, "at the start");
    await writers.stop();
    const acked = [...writers.acked];
    const followers = [...cluster.registry.keys()].filter((id) =>
      id !== leader
    );
    for (const [k, [where, at]] of CUTS.entries()) {
      const id = followers[k % followers.length];
      for (const node of cluster.registry.keys()) {
        await waitForAll(cluster, node, acked);
      }
      // The follower freezes; the others commit 3+ entries without it...
      const before = lastEntry((await lastSegment(cluster, id)).records);
      cluster.pause(id);
      writers = new Writers(cluster.registryUrls, 1, `p${k}-`);
      await writers.progress(3, `while ${id} is paused`);
      await writers.stop();
      acked.push(...writers.acked);
      // ...and it loses power while writing them: the leader's records of
      // the next 3 entries (the bytes it would have written) are appended
      // to its log, cut at `where`, never fsynced, never acknowledged.
      await cluster.kill(id, "SIGKILL");
      const own = await lastSegment(cluster, id);
      assert.equal(lastEntry(own.records), before);
      const theirs = (await lastSegment(cluster, leader)).records
        .filter(({ record }) =>
          record.t === "e" && (record.index as number) > before &&
          (record.index as number) <= before + 3
        );
      assert.equal(theirs.length, 3, `the leader's entries after ${before}`);
      const leaderBytes = (await lastSegment(cluster, leader)).bytes;
      const tail = concat(
        theirs.map((r) => leaderBytes.subarray(r.offset, r.end)),
      );
      const starts = [0, 1, 2].map((i) =>
        theirs.slice(0, i).reduce((n, r) => n + r.end - r.offset, 0)
      );
      const cut = at(starts, tail.length);
      await Deno.writeFile(
        own.path,
        concat([own.bytes, tail.subarray(0, cut)]),
      );
      const complete = starts.filter((_o, i) =>
        (starts[i + 1] ?? tail.length) <= cut
      ).length;
      const goodEnd = complete === 3 ? tail.length : starts[complete];
      await cluster.startNode(id); // a new child, with its own output
      const recovered = cluster.child(id).output.find((l) =>
        / recovered up to index /.test(l)
      );
      assert.ok(recovered, `${id} (cut at ${where}) logged no recovery line`);
      assert.match(
        recovered,
        new RegExp(
          `write-ahead log ${escape(own.walDir)} recovered up to index ${
            before + complete
          }(;|$)`,
        ),
        where,
      );
      if (cut > goodEnd) {
        assert.match(
          recovered,
          new RegExp(`cut a torn tail of ${cut - goodEnd} bytes`),
          where,
        );
      } else {
        assert.doesNotMatch(recovered, /torn tail/, where);
      }
      await waitForAll(cluster, id, acked);
      // It takes writes after the cut.
      writers = new Writers(cluster.registryUrls, 2, `a${k}-`);
      await writers.progress(5, `after ${id}'s cut at ${where}`);
      await writers.stop();
      acked.push(...writers.acked);
      await waitForAll(cluster, id, acked);
    }
    for (const node of cluster.registry.keys()) {
      await waitForAll(cluster, node, acked);
    }
  } finally {
    await cluster.stop();
  }
});

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
