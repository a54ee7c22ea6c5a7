/**
 * A write-ahead log cut at every byte offset of its last records (a power
 * loss that loses unsynced writes, a torn write), reopened through
 * {@link Wal.open}, the same path a node's restart takes: every entry whose
 * record is complete comes back, only the torn tail is dropped, and the log
 * takes appends after it. Also a snapshot write cut mid-way: the old
 * snapshot stays.
 *
 * The expected state is worked out here from the record framing alone
 * (`[u32 len][u32 crc][JSON]`), independently of the log's reader.
 */

import assert from "node:assert/strict";
import { Wal } from "./wal.ts";
import { SnapshotStore } from "./snapshot_store.ts";
import type { Entry, HardState } from "./types.ts";

interface Framed {
  offset: number;
  end: number;
  record: Record<string, unknown>;
}

/** The records of a segment, parsed from the framing only. */
function records(bytes: Uint8Array): Framed[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Framed[] = [];
  for (let at = 0; at + 8 <= bytes.length;) {
    const end = at + 8 + view.getUint32(at);
    const payload = new TextDecoder().decode(bytes.subarray(at + 8, end));
    out.push({ offset: at, end, record: JSON.parse(payload) });
    at = end;
  }
  return out;
}

/**
 * What a log made of `before` (the state of the earlier segments) plus the
 * complete records of the last segment below `cut` holds.
 */
function expectedAt(
  base: { entries: Entry[]; hardState: HardState },
  tail: Framed[],
  cut: number,
): { entries: Entry[]; hardState: HardState; goodEnd: number } {
  const entries = [...base.entries];
  let hardState = base.hardState;
  let goodEnd = 0;
  for (const { end, record: r } of tail) {
    if (end > cut) break;
    goodEnd = end;
    if (r.t === "h") {
      hardState = {
        term: r.term as number,
        vote: r.vote as string | null,
        commit: r.commit as number,
      };
    } else if (r.t === "e") {
      const index = r.index as number;
      entries.length = Math.min(entries.length, index - 1);
      entries.push({ index, term: r.term as number, data: r.data as string });
    }
  }
  return { entries, hardState, goodEnd };
}

/**
 * A log over two segments whose last segment ends with an entry, a
 * commit-only hard state written without a sync, a conflict rewrite of
 * the last two entries (Raft §5.3) and a vote.
 */
async function writeLog(dir: string): Promise<string[]> {
  const { wal } = await Wal.open(dir, { segmentBytes: 600 });
  for (let i = 1; i <= 12; i++) {
    await wal.append({
      entries: [{ index: i, term: 1, data: `bind e${i} ${"x".repeat(i)}` }],
      hardState: { term: 1, vote: "n1", commit: i - 1 },
    });
  }
  await wal.append({
    hardState: { term: 1, vote: "n1", commit: 11 },
    sync: false,
  });
  await wal.append({
    entries: [
      { index: 11, term: 2, data: "rewritten 11" },
      { index: 12, term: 2, data: "rewritten 12" },
    ],
  });
  await wal.append({
    entries: [{ index: 13, term: 2, data: "last" }],
    hardState: { term: 2, vote: "n2", commit: 11 },
  });
  const paths = wal.segmentPaths;
  await wal.close();
  return paths;
}

Deno.test("Wal.open: a last segment cut (or zeroed) at every byte offset from its third-to-last record on keeps every complete record, drops only the torn tail, and appends after it", async () => {
  const dir = await Deno.makeTempDir({ prefix: `rafter-walcut-${Deno.pid}-` });
  try {
    const paths = await writeLog(`${dir}/source`);
    assert.ok(paths.length >= 2, `${paths.length} segments`);
    const lastPath = paths.at(-1)!;
    const lastName = lastPath.slice(lastPath.lastIndexOf("/") + 1);
    const full = await Deno.readFile(lastPath);
    const tail = records(full);
    assert.ok(tail.length >= 4, `${tail.length} records in the last segment`);
    // The state the earlier segments hold, as the log recovers it.
    const copy = `${dir}/copy`;
    await Deno.mkdir(copy);
    for (const p of paths.slice(0, -1)) {
      await Deno.copyFile(p, `${copy}/${p.slice(p.lastIndexOf("/") + 1)}`);
    }
    await Deno.writeFile(`${copy}/${lastName}`, new Uint8Array());
    const base = await Wal.open(copy);
    await base.wal.close();

    const from = tail.at(-3)!.offset;
    let checked = 0;
    for (const zeroed of [false, true]) {
      for (let cut = from; cut <= full.length; cut++) {
        // A cut file, or one that kept its size but whose tail never landed.
        const bytes = zeroed ? new Uint8Array(full.length) : full.slice(0, cut);
        if (zeroed) bytes.set(full.subarray(0, cut));
        await Deno.writeFile(`${copy}/${lastName}`, bytes);
        const want = expectedAt(base, tail, cut);
        const where = `cut at ${cut} of ${full.length}${
          zeroed ? ", zeroed" : ""
        }`;
        const got = await Wal.open(copy);
        try {
          assert.deepEqual(got.entries, want.entries, where);
          assert.deepEqual(got.hardState, want.hardState, where);
          assert.equal(got.repairedBytes, bytes.length - want.goodEnd, where);
          assert.equal(got.wal.lastIndex, want.entries.at(-1)!.index, where);
          // The log takes an append after the cut, and keeps it.
          const next = want.entries.at(-1)!.index + 1;
          await got.wal.append({
            entries: [{ index: next, term: 3, data: "after the cut" }],
            hardState: { term: 3, vote: null, commit: 0 },
          });
        } finally {
          await got.wal.close();
        }
        const again = await Wal.open(copy);
        await again.wal.close();
        assert.deepEqual(again.entries, [
          ...want.entries,
          {
            index: want.entries.at(-1)!.index + 1,
            term: 3,
            data: "after the cut",
          },
        ], where);
        assert.equal(again.repairedBytes, 0, where);
        // Later segments the append may have started are not part of the next cut.
        for await (const e of Deno.readDir(copy)) {
          if (!paths.some((p) => p.endsWith(`/${e.name}`))) {
            await Deno.remove(`${copy}/${e.name}`);
          }
        }
        checked++;
      }
    }
    assert.equal(checked, 2 * (full.length - from + 1));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("SnapshotStore: a snapshot write cut at any byte (a crash before its rename) leaves the old snapshot, and the temp file is removed on open", async () => {
  const dir = await Deno.makeTempDir({ prefix: `rafter-snapcut-${Deno.pid}-` });
  try {
    const old = {
      index: 10,
      term: 2,
      meta: { voters: ["n1"] },
      data: '{"a":1}',
    };
    const store = await SnapshotStore.open(`${dir}/snap`);
    await store.save(old);
    // The bytes the next snapshot's file would hold, made in another folder.
    const other = await SnapshotStore.open(`${dir}/other`);
    await other.save({
      index: 20,
      term: 3,
      meta: { voters: ["n1"] },
      data: '{"a":2,"b":3}',
    });
    const newPath = (await other.files())[0];
    const newBytes = await Deno.readFile(newPath);
    const tmp = `${dir}/snap/${
      newPath.slice(newPath.lastIndexOf("/") + 1)
    }.tmp`;
    for (let cut = 0; cut <= newBytes.length; cut++) {
      await Deno.writeFile(tmp, newBytes.subarray(0, cut));
      const reopened = await SnapshotStore.open(`${dir}/snap`);
      const latest = await reopened.latest();
      assert.equal(latest?.index, 10, `cut at ${cut}`);
      assert.equal(latest?.data, old.data, `cut at ${cut}`);
      await assert.rejects(Deno.stat(tmp), Deno.errors.NotFound);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
