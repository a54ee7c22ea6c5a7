import assert from "node:assert/strict";
import { withTempDir } from "../testing/temp.ts";
import { nodeStorage, type SnapshotSavedHook } from "./_node_storage.ts";
import type { StorageWrite } from "./driver.ts";
import { SnapshotStore } from "./snapshot_store.ts";
import type { Entry } from "./types.ts";
import { Wal } from "./wal.ts";

/** Persists `write`; resolves once done, saying whether done came at once. */
function persist(
  storage: ReturnType<typeof nodeStorage>,
  write: StorageWrite,
): Promise<{ atOnce: boolean }> {
  return new Promise((resolve, reject) => {
    let returned = false;
    storage.persist(write, (error) => {
      if (error !== undefined) reject(error);
      else resolve({ atOnce: !returned });
    });
    returned = true;
  });
}

const entry = (index: number): Entry => ({ index, term: 1, data: `e${index}` });

Deno.test("Raft paper Figure 2: the commit index is volatile: a write that only moves it is done at once, writes nothing, and reaches the log with the next write", async () => {
  await withTempDir(async (dir) => {
    let { wal } = await Wal.open(`${dir}/wal`);
    let storage = nodeStorage(wal, await SnapshotStore.open(`${dir}/snap`));
    await persist(storage, {
      hardState: { term: 1, vote: "n1", commit: 0 },
      entries: [entry(1), entry(2)],
      mustSync: true,
    });
    const before = wal.stats;
    const commitOnly = await persist(storage, {
      hardState: { term: 1, vote: "n1", commit: 2 },
      entries: [],
      mustSync: false,
    });
    assert.equal(commitOnly.atOnce, true, "done before persist returned");
    assert.deepEqual(wal.stats, before, "nothing written for it");
    // The next write carries the hard state (it has none of its own).
    await persist(storage, { entries: [entry(3)], mustSync: true });
    await wal.close();
    let opened = await Wal.open(`${dir}/wal`);
    assert.deepEqual(opened.hardState, { term: 1, vote: "n1", commit: 2 });
    assert.equal(opened.entries.length, 3);

    // Stopping flushes a commit index no write carried yet.
    wal = opened.wal;
    storage = nodeStorage(wal, await SnapshotStore.open(`${dir}/snap`));
    await persist(storage, {
      hardState: { term: 1, vote: "n1", commit: 3 },
      entries: [],
      mustSync: false,
    });
    await storage.flush();
    await wal.close();
    opened = await Wal.open(`${dir}/wal`);
    assert.deepEqual(opened.hardState, { term: 1, vote: "n1", commit: 3 });
    await opened.wal.close();
  }, "rafter_storage_");
});

Deno.test("a saved snapshot is reported with its source, index, the file's size and the time", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(`${dir}/wal`);
    const saved: Parameters<SnapshotSavedHook>[0][] = [];
    const storage = nodeStorage(
      wal,
      await SnapshotStore.open(`${dir}/snap`),
      (info) => saved.push(info),
    );
    await persist(storage, {
      hardState: { term: 1, vote: "n1", commit: 0 },
      entries: [entry(1), entry(2), entry(3)],
      mustSync: true,
    });
    assert.equal(saved.length, 0, "no snapshot, no report");
    const configuration = { voters: ["n1"], learners: [] };
    await persist(storage, {
      entries: [],
      snapshot: { index: 2, term: 1, data: "taken", configuration },
      compactTo: { index: 1, term: 1 },
    });
    await persist(storage, {
      entries: [],
      snapshot: { index: 3, term: 1, data: "from the leader", configuration },
      compactTo: { index: 3, term: 1 },
      discardLog: false,
      received: true,
    });
    await wal.close();
    assert.deepEqual(
      saved.map(({ received, index }) => ({ received, index })),
      [
        { received: false, index: 2 },
        { received: true, index: 3 },
      ],
    );
    const sizes = await Promise.all(
      [
        "0000000000000002-0000000000000001.snap",
        "0000000000000003-0000000000000001.snap",
      ]
        .map(async (name) => (await Deno.stat(`${dir}/snap/${name}`)).size),
    );
    assert.deepEqual(saved.map((s) => s.bytes), sizes);
    for (const s of saved) assert.ok(s.ms >= 0, `a time: ${s.ms}`);
  });
});
