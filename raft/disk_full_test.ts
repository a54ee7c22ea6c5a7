/**
 * The log and the snapshot files on a disk that fills (a small tmpfs this
 * test mounts, named with its PID; needs root, skipped otherwise): the
 * failed write rejects with a clear error (errno, file, what to do), no
 * append resolves that was not persisted, and once space is freed the
 * reopened log holds every resolved append and takes new ones.
 */

import assert from "node:assert/strict";
import { Wal, WalWriteError } from "./wal.ts";
import { SnapshotStore, SnapshotWriteError } from "./snapshot_store.ts";
import { fill, Mounts, run } from "../testing/disk.ts";

const isRoot = Deno.uid() === 0;
if (!isRoot) {
  console.warn("disk_full_test: skipped: needs root (mount -t tmpfs)");
}

/** Runs `test` on a fresh tmpfs of `size`, unmounted afterwards. */
async function onTmpfs(
  size: string,
  test: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: `rafter-full-${Deno.pid}-` });
  const mounts = new Mounts();
  try {
    await mounts.tmpfs(dir, size);
    await test(dir);
  } finally {
    await mounts.undo();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "Wal on a disk that fills: the append that cannot be written rejects with ENOSPC naming the segment, later ones are refused, and after space is freed the log reopens with every resolved append",
  ignore: !isRoot,
}, async () => {
  await onTmpfs("1m", async (dir) => {
    const { wal } = await Wal.open(`${dir}/wal`);
    const resolved: number[] = [];
    await fill(dir);
    let failure: unknown = null;
    for (let index = 1; index <= 100_000 && failure === null; index++) {
      try {
        await wal.append({
          entries: [{ index, term: 1, data: "x".repeat(200) }],
          hardState: { term: 1, vote: "n1", commit: index - 1 },
        });
        resolved.push(index);
      } catch (error) {
        failure = error;
      }
    }
    assert.ok(failure instanceof WalWriteError, String(failure));
    assert.equal(failure.code, "ENOSPC");
    assert.match(
      failure.message,
      new RegExp(
        `^write-ahead log ${dir}/wal/\\S+\\.wal: (write|fdatasync) failed: disk full \\(ENOSPC\\)\\. Free space`,
      ),
    );
    await assert.rejects(
      wal.append({
        entries: [{ index: resolved.length + 1, term: 1, data: "y" }],
      }),
      (e) =>
        e instanceof WalWriteError &&
        /refused: an earlier write failed/.test(e.message),
    );
    await wal.close();
    await Deno.remove(`${dir}/filler`);
    const again = await Wal.open(`${dir}/wal`);
    try {
      // Every resolved append is there; what failed may or may not be.
      const indexes = again.entries.map((e) => e.index);
      assert.deepEqual(indexes.slice(0, resolved.length), resolved);
      const next = again.wal.lastIndex + 1;
      // CI once saw this append fail with ENOSPC although the filler was
      // gone (not reproduced in 33 runs, 25 under load): say how full the
      // file system was, should it happen again.
      await again.wal.append({
        entries: [{ index: next, term: 2, data: "after" }],
      }).catch(async (error) => {
        const df = await run("df", "-B1", dir).catch((e) => String(e));
        const files = await run("ls", "-la", dir, `${dir}/wal`).catch((e) =>
          String(e)
        );
        throw new Error(
          `the append after freeing space failed: ${error}\ndf: ${df}\n${files}`,
          { cause: error },
        );
      });
    } finally {
      await again.wal.close();
    }
  });
});

Deno.test({
  name:
    "SnapshotStore on a full disk: save rejects with a SnapshotWriteError naming the file, ENOSPC and what to do; the older snapshot stays",
  ignore: !isRoot,
}, async () => {
  await onTmpfs("1m", async (dir) => {
    const store = await SnapshotStore.open(`${dir}/snap`);
    await store.save({ index: 5, term: 1, meta: null, data: "old" });
    await fill(dir);
    const big = "z".repeat(64 * 1024);
    await assert.rejects(
      store.save({ index: 9, term: 1, meta: null, data: big }),
      (e) => {
        assert.ok(e instanceof SnapshotWriteError, String(e));
        assert.equal(e.code, "ENOSPC");
        assert.match(
          e.message,
          new RegExp(
            `^snapshot ${dir}/snap/0000000000000009-0000000000000001\\.snap: write failed: disk full \\(ENOSPC\\)\\. Free space`,
          ),
        );
        return true;
      },
    );
    await Deno.remove(`${dir}/filler`);
    const latest = await (await SnapshotStore.open(`${dir}/snap`)).latest();
    assert.equal(latest?.index, 5);
    assert.equal(latest?.data, "old");
  });
});
