import assert from "node:assert/strict";
import type { StorageWrite } from "../driver.ts";
import type { Entry, Snapshot } from "../types.ts";
import { diskEntryAt, diskLastIndex, SimDisk } from "./disk.ts";

function fail(detail: string): never {
  throw new Error(detail);
}

const entries = (from: number, to: number, term = 1): Entry[] =>
  Array.from(
    { length: to - from + 1 },
    (_, i) => ({ index: from + i, term, data: `e${from + i}` }),
  );

const snapshotAt = (index: number, term = 1): Snapshot => ({
  index,
  term,
  data: `state at ${index}`,
  configuration: { voters: ["n1", "n2", "n3"], learners: [] },
});

/** A disk holding entries 1..10 (term 1), commit 10. */
function diskWithLog(): SimDisk {
  const disk = new SimDisk(fail);
  disk.persist({
    entries: entries(1, 10),
    hardState: { term: 1, vote: "n1", commit: 10 },
  }, () => {});
  disk.complete();
  return disk;
}

/** An installed snapshot at 20 (term 2) with entries after it. */
const install: StorageWrite = {
  entries: entries(21, 22, 2),
  hardState: { term: 2, vote: null, commit: 22 },
  snapshot: snapshotAt(20, 2),
  compactTo: { index: 20, term: 2 },
  discardLog: true,
};

Deno.test("§7 storage: a snapshot taken with a trailing window keeps the log after compactTo", () => {
  const disk = diskWithLog();
  disk.persist({
    entries: [],
    snapshot: snapshotAt(8),
    compactTo: { index: 5, term: 1 },
  }, () => {});
  disk.complete();
  const durable = disk.durable;
  assert.equal(durable.snapshot?.index, 8);
  assert.deepEqual(durable.logStart, { index: 5, term: 1 });
  assert.deepEqual(durable.entries, entries(6, 10));
  assert.equal(diskEntryAt(durable, 5), undefined);
  assert.deepEqual(diskEntryAt(durable, 6), entries(6, 6)[0]);
  assert.equal(diskLastIndex(durable), 10);
  // Appends go on after the log's end.
  disk.persist({ entries: entries(11, 11) }, () => {});
  disk.complete();
  assert.equal(diskLastIndex(durable), 11);
});

Deno.test("§7 storage: an installed snapshot replaces the log; entries then follow it", () => {
  const disk = diskWithLog();
  disk.persist(install, () => {});
  disk.complete();
  const durable = disk.durable;
  assert.deepEqual(durable.logStart, { index: 20, term: 2 });
  assert.deepEqual(durable.entries, entries(21, 22, 2));
  assert.equal(durable.hardState?.commit, 22);
});

Deno.test("§7 storage: a crash mid-install keeps the snapshot whole or not at all, and the log marker only after it", () => {
  const cases: [number, number | undefined, number][] = [
    // [records kept, snapshot index on disk, log start]
    [1, 20, 0], // the snapshot only: the log is not marked yet
    [2, 20, 20], // the snapshot and the marker: the old log dropped
    [3, 20, 20], // and entry 21
  ];
  for (const [kept, snapshot, start] of cases) {
    const disk = diskWithLog();
    disk.persist(install, () => {});
    disk.crash("torn", kept);
    const durable = disk.durable;
    assert.equal(durable.snapshot?.index, snapshot, `kept ${kept}`);
    assert.equal(durable.logStart.index, start, `kept ${kept}`);
    assert.equal(durable.hardState?.commit, 10, "no hard state");
    assert.equal(
      durable.entries.length,
      kept === 1 ? 10 : kept - 2,
      `kept ${kept}`,
    );
  }
  const lost = diskWithLog();
  lost.persist(install, () => {});
  lost.crash("lost");
  assert.equal(lost.durable.snapshot, undefined);
  assert.equal(lost.durable.entries.length, 10);
});

Deno.test("§7 storage: a snapshot saved before its marker is marked at restart (markLogAtStart)", () => {
  const disk = diskWithLog();
  disk.persist(install, () => {});
  disk.crash("torn", 1);
  disk.markLogAtStart({ index: 20, term: 2 }, true);
  assert.deepEqual(disk.durable.logStart, { index: 20, term: 2 });
  assert.deepEqual(disk.durable.entries, []);
  disk.persist({ entries: entries(21, 21, 3) }, () => {});
  disk.complete();
  assert.equal(diskLastIndex(disk.durable), 21);
});

Deno.test("§7 storage: marking the log beyond the newest durable snapshot is refused (state would be lost)", () => {
  const disk = diskWithLog();
  assert.throws(
    () => disk.markLogAtStart({ index: 5, term: 1 }, false),
    /beyond the newest durable snapshot/,
  );
});

Deno.test("§7 storage: a full disk keeps a prefix of snapshot, marker, entries, and fails the write", () => {
  const disk = diskWithLog();
  let error: unknown;
  disk.persist(install, (e) => error = e);
  disk.setFull(true);
  disk.complete(1);
  assert.equal(disk.durable.snapshot?.index, 20);
  assert.equal(disk.durable.logStart.index, 0);
  assert.match(String(error), /no space left/);
});
