import assert from "node:assert/strict";
import { withTempDir } from "../testing/temp.ts";
import { freePorts } from "../testing/ports.ts";
import { waitFor } from "../testing/time.ts";
import { RaftNode, type RaftNodeOptions, type RaftTransport } from "./node.ts";
import type { SnapshotPolicy } from "./driver.ts";
import { SnapshotCorruptError, SnapshotStore } from "./snapshot_store.ts";
import type { Entry, Snapshot } from "./types.ts";

/** One node of a single-node cluster whose state machine is a list. */
interface Single {
  node: RaftNode<number>;
  state: string[];
  applied: number[];
  restored: Snapshot[];
}

const quiet: RaftTransport = { send() {}, close() {} };
const peers = { n1: `tcp://127.0.0.1:${freePorts(1)[0]}` };

async function startSingle(
  dataDir: string,
  policy: Omit<SnapshotPolicy, "take"> | null = {
    everyEntries: 10,
    trailingEntries: 3,
  },
  restore = true,
  onSnapshot?: RaftNodeOptions<number>["onSnapshot"],
): Promise<Single> {
  const single: Single = {
    node: undefined as unknown as RaftNode<number>,
    state: [],
    applied: [],
    restored: [],
  };
  single.node = await RaftNode.start<number>({
    id: "n1",
    peers,
    transport: quiet,
    dataDir,
    tickMs: 5,
    apply: (entry: Entry) => {
      single.applied.push(entry.index);
      if (entry.data !== "") single.state.push(entry.data);
      return entry.index;
    },
    restore: restore
      ? (snapshot) => {
        single.restored.push(snapshot);
        single.state = JSON.parse(snapshot.data);
      }
      : undefined,
    snapshot: policy === null
      ? undefined
      : { ...policy, take: () => JSON.stringify(single.state) },
    onSnapshot,
    onFatal: (error) => {
      throw error;
    },
  });
  await waitFor(() => single.node.status.role === "leader", "n1 to lead");
  return single;
}

const withDir = (fn: (dir: string) => Promise<void>) =>
  withTempDir(fn, "rafter_node_snap_");

const files = async (dir: string): Promise<string[]> =>
  (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort();

Deno.test("§7 a restart loads the newest snapshot, restores the state machine from it and replays only the log after it", async () => {
  await withDir(async (dir) => {
    const first = await startSingle(dir);
    for (let i = 1; i <= 35; i++) await first.node.propose(`v${i}`);
    const status = first.node.status;
    assert.ok(status.snapshotIndex >= 30, JSON.stringify(status));
    await first.node.stop();
    const snaps = await files(`${dir}/snap`);
    assert.ok(
      snaps.length >= 1 && snaps.length <= 2,
      `at most two snapshot files kept: ${snaps}`,
    );
    const second = await startSingle(dir);
    try {
      assert.equal(second.restored.length, 1);
      const loaded = second.restored[0];
      assert.equal(loaded.index, status.snapshotIndex);
      // The configuration in force at the snapshot, member URLs included.
      assert.deepEqual(loaded.configuration, {
        voters: ["n1"],
        learners: [],
        peerUrls: { n1: peers.n1 },
      });
      assert.ok(
        second.applied.every((index) => index > loaded.index),
        `only entries after ${loaded.index} were applied again: ${second.applied}`,
      );
      const expected = Array.from({ length: 35 }, (_, i) => `v${i + 1}`);
      await waitFor(
        () => second.state.length === 35,
        "the state after the snapshot to be replayed",
      );
      assert.deepEqual(second.state, expected);
      assert.equal(second.node.status.snapshotIndex, loaded.index);
      assert.equal(await second.node.propose("more"), status.lastIndex + 2);
    } finally {
      await second.node.stop();
    }
  });
});

Deno.test("onSnapshot reports each snapshot taken: its index, the file's size and a time", async () => {
  await withDir(async (dir) => {
    const seen: Parameters<
      NonNullable<RaftNodeOptions<number>["onSnapshot"]>
    >[0][] = [];
    const single = await startSingle(
      dir,
      { everyEntries: 10, trailingEntries: 3 },
      true,
      (snapshot) => seen.push(snapshot),
    );
    try {
      for (let i = 1; i <= 25; i++) await single.node.propose(`v${i}`);
      await waitFor(() => seen.length >= 2, "two snapshots taken");
      assert.ok(seen.every((s) => s.source === "taken"));
      assert.ok(seen[1].index > seen[0].index);
      assert.equal(seen.at(-1)!.index, single.node.status.snapshotIndex);
      for (const s of seen) assert.ok(s.ms >= 0, `a time: ${s.ms}`);
      // The size of the newest file on disk.
      const newest = (await files(`${dir}/snap`)).at(-1)!;
      assert.equal(
        seen.at(-1)!.bytes,
        (await Deno.stat(`${dir}/snap/${newest}`)).size,
      );
    } finally {
      await single.node.stop();
    }
  });
});

Deno.test("§7 a log that starts after the newest snapshot file refuses to start, naming both", async () => {
  await withDir(async (dir) => {
    const first = await startSingle(dir, {
      everyEntries: 10,
      trailingEntries: 0,
    });
    for (let i = 1; i <= 12; i++) await first.node.propose(`v${i}`);
    await first.node.stop();
    for (const name of await files(`${dir}/snap`)) {
      await Deno.remove(`${dir}/snap/${name}`);
    }
    await assert.rejects(
      startSingle(dir),
      /the write-ahead log in .*wal starts after index \d+, but there is no snapshot file: snapshot files are missing/,
    );
    // The folder's lock was released: a later start gets the same answer.
    await assert.rejects(startSingle(dir), /snapshot files are missing/);
  });
});

Deno.test("§7 a corrupt newest snapshot file, or a snapshot without restore(), refuses to start", async () => {
  await withDir(async (dir) => {
    const first = await startSingle(dir);
    for (let i = 1; i <= 12; i++) await first.node.propose(`v${i}`);
    await first.node.stop();
    await assert.rejects(
      startSingle(dir, null, false),
      /the data folder holds a snapshot \(.*\.snap, index \d+\), but no restore\(\) was given/,
    );
    const newest = (await files(`${dir}/snap`)).filter((n) =>
      n.endsWith(".snap")
    ).at(-1)!;
    const path = `${dir}/snap/${newest}`;
    const bytes = await Deno.readFile(path);
    bytes[bytes.length - 3] ^= 0xff;
    await Deno.writeFile(path, bytes);
    await assert.rejects(startSingle(dir), SnapshotCorruptError);
  });
});

Deno.test("§7 a snapshot saved beyond the end of the log (a crash before an install marked the log) is loaded, and the log continues after it", async () => {
  await withDir(async (dir) => {
    const first = await startSingle(dir, null);
    for (let i = 1; i <= 3; i++) await first.node.propose(`v${i}`);
    const { lastIndex, term } = first.node.status;
    await first.node.stop();
    // What an install from a leader leaves when the process dies between
    // saving the snapshot and marking the log.
    const store = await SnapshotStore.open(`${dir}/snap`);
    await store.save({
      index: lastIndex + 5,
      term,
      meta: { configuration: { voters: ["n1"], learners: [] } },
      data: JSON.stringify(["from", "the", "leader"]),
    });
    const second = await startSingle(dir, null);
    try {
      assert.deepEqual(second.restored.map((s) => s.index), [lastIndex + 5]);
      assert.equal(
        await second.node.propose("next"),
        lastIndex + 7,
        "after the snapshot and the new leader's empty entry",
      );
      assert.deepEqual(second.state, ["from", "the", "leader", "next"]);
    } finally {
      await second.node.stop();
    }
    const third = await startSingle(dir, null);
    try {
      await waitFor(() => third.state.length === 4, "the replay");
      assert.deepEqual(third.state, ["from", "the", "leader", "next"]);
    } finally {
      await third.node.stop();
    }
  });
});
