import assert from "node:assert/strict";
import { withTempDir } from "../testing/temp.ts";
import {
  type Snapshot,
  SnapshotCorruptError,
  SnapshotStore,
} from "./snapshot_store.ts";

function snap(index: number, term = 1, data = `state at ${index}`): Snapshot {
  return { index, term, meta: { voters: ["n1", "n2", "n3"], index }, data };
}

function baseNames(paths: string[]): string[] {
  return paths.map((p) => p.slice(p.lastIndexOf("/") + 1));
}

Deno.test("§7 a saved snapshot loads back with its index, term, meta and data", async () => {
  await withTempDir(async (root) => {
    const dir = `${root}/snap`;
    const store = await SnapshotStore.open(dir);
    assert.equal(await store.latest(), null);
    // Several MiB, multi-byte characters straddling the read chunks.
    const data = '☃ snow, "quotes"\n'.repeat(200_000);
    const bytes = await store.save({
      index: 0x1234,
      term: 7,
      meta: { voters: ["n1"] },
      data,
    });
    assert.deepEqual(baseNames(await store.files()), [
      "0000000000001234-0000000000000007.snap",
    ]);
    const back = await (await SnapshotStore.open(dir)).latest();
    assert.ok(back !== null);
    assert.equal(back.index, 0x1234);
    assert.equal(back.term, 7);
    assert.deepEqual(back.meta, { voters: ["n1"] });
    assert.equal(back.data, data);
    assert.equal(back.path, `${dir}/0000000000001234-0000000000000007.snap`);
    // save resolves with the file's size.
    assert.equal(bytes, (await Deno.stat(back.path)).size);
    assert.ok(bytes > new TextEncoder().encode(data).length);
    // No temp file is left behind.
    const names = (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name);
    assert.deepEqual(names, ["0000000000001234-0000000000000007.snap"]);
  });
});

Deno.test("§7 save keeps the newest two snapshot files and deletes older ones", async () => {
  await withTempDir(async (dir) => {
    const store = await SnapshotStore.open(dir);
    for (const i of [1, 5, 9, 12]) await store.save(snap(i, 2));
    assert.deepEqual(baseNames(await store.files()), [
      "000000000000000c-0000000000000002.snap",
      "0000000000000009-0000000000000002.snap",
    ]);
    assert.equal((await store.latest())?.index, 12);
    // The same index again replaces it; a lower one is refused.
    await store.save(snap(12, 2, "again"));
    assert.equal((await store.latest())?.data, "again");
    await assert.rejects(store.save(snap(10)), {
      name: "RangeError",
      message: /index 10 is below the newest saved snapshot's index 12/,
    });
    assert.equal((await store.files()).length, 2);
  });
});

Deno.test("§7 a temp file left by a crash during save is ignored and removed at open", async () => {
  await withTempDir(async (dir) => {
    const store = await SnapshotStore.open(dir);
    await store.save(snap(3));
    // A crash before the rename: a half-written temp file of a newer snapshot.
    const tmp = `${dir}/0000000000000009-0000000000000001.snap.tmp`;
    await Deno.writeFile(tmp, new TextEncoder().encode("RAFTSNAP\0\0"));
    const reopened = await SnapshotStore.open(dir);
    await assert.rejects(Deno.stat(tmp), Deno.errors.NotFound);
    assert.equal((await reopened.latest())?.index, 3);
    // With no complete snapshot at all, there is none.
    await withTempDir(async (empty) => {
      await Deno.writeTextFile(
        `${empty}/0000000000000001-0000000000000001.snap.tmp`,
        "x",
      );
      assert.equal(await (await SnapshotStore.open(empty)).latest(), null);
    });
  });
});

Deno.test("a corrupt newest snapshot throws SnapshotCorruptError naming the file, with no fallback to an older one", async () => {
  await withTempDir(async (dir) => {
    const store = await SnapshotStore.open(dir);
    await store.save(snap(4));
    await store.save(snap(8, 1, "x".repeat(5000)));
    const [newest] = await store.files();
    const good = await Deno.readFile(newest);
    const damages: Array<[string, Uint8Array, RegExp]> = [];
    for (const at of [0, 9, 14, 20, good.length - 1]) {
      const bad = good.slice();
      bad[at] ^= 0x04;
      damages.push([`flip at ${at}`, bad, /corrupt: /]);
    }
    damages.push([
      "cut",
      good.subarray(0, good.length - 10),
      /does not match the file/,
    ]);
    damages.push(["empty", new Uint8Array(0), /shorter than its fixed header/]);
    for (const [what, bytes, reason] of damages) {
      await Deno.writeFile(newest, bytes);
      await assert.rejects(store.latest(), (err: unknown) => {
        assert.ok(err instanceof SnapshotCorruptError, `${what}: ${err}`);
        assert.equal(err.path, newest, what);
        assert.ok(err.message.includes(newest), what);
        assert.match(err.message, reason, what);
        assert.match(err.message, /no older one is used instead/);
        return true;
      });
    }
    await Deno.writeFile(newest, good);
    assert.equal((await store.latest())?.index, 8);
  });
});

Deno.test("save rejects a bad snapshot with a TypeError and writes nothing", async () => {
  await withTempDir(async (dir) => {
    const store = await SnapshotStore.open(dir);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const bad: Snapshot[] = [
      { index: 0, term: 1, meta: null, data: "" },
      { index: 1.5, term: 1, meta: null, data: "" },
      { index: 1, term: -1, meta: null, data: "" },
      { index: 1, term: 1, meta: null, data: 5 as unknown as string },
      { index: 1, term: 1, meta: cyclic, data: "" },
    ];
    for (const s of bad) await assert.rejects(store.save(s), TypeError);
    assert.deepEqual(await store.files(), []);
  });
});
