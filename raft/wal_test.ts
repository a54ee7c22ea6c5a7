import assert from "node:assert/strict";
import { withTempDir } from "../testing/temp.ts";
import { crc32, crc32c } from "./_crc32.ts";
import type { Entry, HardState } from "./types.ts";
import { Wal, WalCorruptError, WalWriteError } from "./wal.ts";

const encoder = new TextEncoder();
const EMPTY: HardState = { term: 0, vote: null, commit: 0 };

/** Path of the first segment of the log in `dir`. */
function seg1(dir: string): string {
  return `${dir.replace(/\/+$/, "")}/${SEG1}`;
}
const SEG1 = "0000000000000001-0000000000000001.wal";

function entry(index: number, term = 1, data = `cmd-${index}`): Entry {
  return { index, term, data };
}

function range(from: number, to: number, term = 1): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push(entry(i, term));
  return out;
}

/** Encodes one raw record, as the WAL does, around any payload. */
function rawRecord(payload: unknown): Uint8Array {
  const bytes = typeof payload === "string"
    ? encoder.encode(payload)
    : encoder.encode(JSON.stringify(payload));
  const out = new Uint8Array(8 + bytes.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, bytes.length);
  view.setUint32(4, crc32c(bytes));
  out.set(bytes, 8);
  return out;
}

/** Offsets of the records of a well-formed WAL file, plus its length. */
function recordOffsets(bytes: Uint8Array): number[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: number[] = [];
  let off = 0;
  while (off < bytes.length) {
    out.push(off);
    off += 8 + view.getUint32(off);
  }
  assert.equal(off, bytes.length);
  return out;
}

/** Opens, checks the recovered state, and closes. */
async function expectState(
  dir: string,
  hardState: HardState,
  entries: Entry[],
  repairedBytes = 0,
): Promise<void> {
  const r = await Wal.open(dir);
  try {
    assert.deepEqual(r.hardState, hardState);
    assert.deepEqual(r.entries, entries);
    assert.equal(r.repairedBytes, repairedBytes);
    assert.equal(r.wal.lastIndex, entries.length);
    assert.equal(r.wal.sizeBytes, (await Deno.stat(seg1(dir))).size);
  } finally {
    await r.wal.close();
  }
}

Deno.test("open creates the directory and an empty log", async () => {
  await withTempDir(async (root) => {
    const dir = `${root}/a/b/node1`;
    const { wal, hardState, entries, repairedBytes } = await Wal.open(dir);
    assert.deepEqual(hardState, EMPTY);
    assert.deepEqual(entries, []);
    assert.equal(repairedBytes, 0);
    assert.equal(wal.lastIndex, 0);
    assert.equal(wal.sizeBytes, 0);
    await wal.close();
    assert.equal((await Deno.stat(seg1(dir))).size, 0);
    await expectState(`${dir}/`, EMPTY, []);
  });
});

Deno.test("hard states and entries round-trip across close and reopen", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    await wal.append({ hardState: { term: 1, vote: "n1", commit: 0 } });
    await wal.append({ entries: range(1, 3) });
    const odd: Entry = {
      index: 4,
      term: 2,
      data: 'unicode ☃ "quotes" \n newline \u0000 nul',
    };
    await wal.append({
      entries: [odd, { index: 5, term: 2, data: "" }],
      hardState: { term: 2, vote: null, commit: 3 },
    });
    assert.equal(wal.lastIndex, 5);
    const size = wal.sizeBytes;
    await wal.close();
    assert.equal((await Deno.stat(seg1(dir))).size, size);
    const expected = [...range(1, 3), odd, { index: 5, term: 2, data: "" }];
    await expectState(dir, { term: 2, vote: null, commit: 3 }, expected);

    // Reopen again, append more, and the newest hard state wins.
    const again = await Wal.open(dir);
    assert.equal(again.wal.sizeBytes, size);
    await again.wal.append({
      entries: [entry(6, 3)],
      hardState: { term: 3, vote: "n2", commit: 5 },
    });
    await again.wal.close();
    await expectState(dir, { term: 3, vote: "n2", commit: 5 }, [
      ...expected,
      entry(6, 3),
    ]);
  });
});

Deno.test("dissertation §4.1 a membership change entry keeps its type across a restart; an unknown type is refused", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    const config: Entry = {
      index: 1,
      term: 1,
      data: '{"voters":["n1","n2"],"learners":[]}',
      type: "config",
    };
    await wal.append({ entries: [config, entry(2, 1)] });
    await assert.rejects(
      wal.append({
        entries: [{ index: 3, term: 1, data: "", type: "other" } as never],
      }),
      /type\?: "config"/,
    );
    await wal.close();
    await expectState(dir, { term: 0, vote: null, commit: 0 }, [
      config,
      entry(2, 1),
    ]);
  });
});

Deno.test("sync: false writes a commit-only hard state without an fdatasync; the next synced append or close makes it durable", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    await wal.append({
      entries: [entry(1, 1)],
      hardState: { term: 1, vote: "n1", commit: 0 },
    });
    assert.equal(wal.stats.syncs, 1);
    await wal.append({
      hardState: { term: 1, vote: "n1", commit: 1 },
      sync: false,
    });
    assert.equal(wal.stats.syncs, 1, "no fdatasync for a commit-only change");
    assert.equal(wal.stats.writes, 2);
    // A synced append in the same group syncs the unsynced one with it.
    await Promise.all([
      wal.append({
        hardState: { term: 1, vote: "n1", commit: 1 },
        sync: false,
      }),
      wal.append({ entries: [entry(2, 1)] }),
    ]);
    assert.equal(wal.stats.syncs, 2);
    await wal.append({
      hardState: { term: 1, vote: "n1", commit: 2 },
      sync: false,
    });
    assert.equal(wal.stats.syncs, 2);
    await wal.close();
    await expectState(dir, { term: 1, vote: "n1", commit: 2 }, [
      entry(1, 1),
      entry(2, 1),
    ]);
  });
});

Deno.test("an empty update writes nothing", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    await wal.append({});
    await wal.append({ entries: [] });
    assert.equal(wal.sizeBytes, 0);
    await wal.close();
    assert.equal((await Deno.stat(seg1(dir))).size, 0);
  });
});

Deno.test("entries at or below the last index truncate the log (Raft §5.3)", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    await wal.append({ entries: range(1, 5, 1) });
    await wal.append({ entries: range(3, 4, 2) });
    assert.equal(wal.lastIndex, 4);
    await wal.close();
    const expected = [...range(1, 2, 1), ...range(3, 4, 2)];
    await expectState(dir, EMPTY, expected);

    // The in-memory last index follows the truncation: 5 is next, 6 a gap.
    const r = await Wal.open(dir);
    await assert.rejects(r.wal.append({ entries: [entry(6, 2)] }), TypeError);
    await r.wal.append({ entries: [entry(5, 2)] });
    // Truncating all the way back to index 1.
    await r.wal.append({ entries: [entry(1, 3)] });
    assert.equal(r.wal.lastIndex, 1);
    await r.wal.close();
    await expectState(dir, EMPTY, [entry(1, 3)]);
  });
});

Deno.test("a torn tail at every byte offset of the last append is repaired", async () => {
  await withTempDir(async (root) => {
    const dir = `${root}/orig`;
    const { wal } = await Wal.open(dir);
    const hs1: HardState = { term: 1, vote: "n1", commit: 2 };
    await wal.append({ entries: range(1, 5), hardState: hs1 });
    const lastAppendStart = wal.sizeBytes;
    await wal.append({
      entries: [entry(6, 2, "the last entry")],
      hardState: { term: 2, vote: "n3", commit: 5 },
    });
    await wal.close();
    const full = await Deno.readFile(seg1(dir));
    const offsets = recordOffsets(full);
    const hsStart = offsets[offsets.length - 1]; // the last record
    const entryStart = offsets[offsets.length - 2]; // the record before it
    assert.equal(entryStart, lastAppendStart);

    const work = `${root}/work`;
    for (let cut = lastAppendStart; cut < full.length; cut++) {
      await Deno.remove(work, { recursive: true }).catch(() => {});
      await Deno.mkdir(work);
      await Deno.writeFile(seg1(work), full.subarray(0, cut));

      const keptEntries = cut >= hsStart
        ? range(1, 5).concat(entry(6, 2, "the last entry"))
        : range(1, 5);
      const goodEnd = cut >= hsStart ? hsStart : entryStart;
      const r = await Wal.open(work);
      assert.deepEqual(r.entries, keptEntries, `cut at ${cut}`);
      assert.deepEqual(r.hardState, hs1, `cut at ${cut}`);
      assert.equal(r.repairedBytes, cut - goodEnd, `cut at ${cut}`);
      assert.equal(r.wal.sizeBytes, goodEnd);
      assert.equal((await Deno.stat(seg1(work))).size, goodEnd);

      // The repaired log takes appends, and they survive a reopen.
      const next = keptEntries.length + 1;
      await r.wal.append({
        entries: [entry(next, 4)],
        hardState: { term: 4, vote: null, commit: next },
      });
      await r.wal.close();
      await expectState(work, { term: 4, vote: null, commit: next }, [
        ...keptEntries,
        entry(next, 4),
      ]);
    }
  });
});

Deno.test("a zero-filled tail is repaired", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    await wal.append({
      entries: range(1, 3),
      hardState: { term: 1, vote: null, commit: 1 },
    });
    const good = wal.sizeBytes;
    await wal.close();
    const path = seg1(dir);
    const original = await Deno.readFile(path);

    // The file grew (e.g. by a 4 KiB page) but its data never reached disk.
    const f = await Deno.open(path, { append: true });
    await f.write(new Uint8Array(4096));
    f.close();
    await expectState(
      dir,
      { term: 1, vote: null, commit: 1 },
      range(1, 3),
      4096,
    );
    assert.deepEqual(await Deno.readFile(path), original);

    // A record whose header landed but whose payload is zeros.
    const hs = rawRecord({ t: "h", term: 9, vote: "x", commit: 0 });
    const torn = new Uint8Array(good + hs.length + 100);
    torn.set(original);
    torn.set(hs.subarray(0, 8), good);
    await Deno.writeFile(path, torn);
    await expectState(
      dir,
      { term: 1, vote: null, commit: 1 },
      range(1, 3),
      hs.length + 100,
    );

    // A zero-filled region that starts inside a header.
    const cut = new Uint8Array(good + 3 + 50);
    cut.set(original);
    cut.set(hs.subarray(0, 3), good);
    await Deno.writeFile(path, cut);
    await expectState(dir, { term: 1, vote: null, commit: 1 }, range(1, 3), 53);
  });
});

Deno.test("a flipped byte in the last record is repaired", async () => {
  await withTempDir(async (root) => {
    const dir = `${root}/orig`;
    const { wal } = await Wal.open(dir);
    await wal.append({
      entries: range(1, 4),
      hardState: { term: 1, vote: "n2", commit: 1 },
    });
    await wal.append({ entries: [entry(5, 2)] });
    await wal.close();
    const full = await Deno.readFile(seg1(dir));
    const last = recordOffsets(full).at(-1)!;

    const work = `${root}/work`;
    await Deno.mkdir(work);
    // Every byte of the CRC field and of the payload.
    for (let at = last + 4; at < full.length; at++) {
      const bad = full.slice();
      bad[at] ^= 0x5a;
      await Deno.writeFile(seg1(work), bad);
      const r = await Wal.open(work);
      assert.deepEqual(r.entries, range(1, 4), `flip at ${at}`);
      assert.deepEqual(r.hardState, { term: 1, vote: "n2", commit: 1 });
      assert.equal(r.repairedBytes, full.length - last, `flip at ${at}`);
      await r.wal.close();
      assert.equal((await Deno.stat(seg1(work))).size, last);
    }
  });
});

Deno.test("a damaged length field in the last record: too long is a torn tail, too short is corruption", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    await wal.append({ entries: range(1, 3) });
    await wal.close();
    const path = seg1(dir);
    const full = await Deno.readFile(path);
    const last = recordOffsets(full).at(-1)!;
    const view = new DataView(full.buffer);
    const len = view.getUint32(last);

    const longer = full.slice();
    new DataView(longer.buffer).setUint32(last, len + 1000);
    await Deno.writeFile(path, longer);
    await expectState(dir, EMPTY, range(1, 2), full.length - last);

    // A shorter length leaves non-zero bytes after a record whose CRC fails:
    // not something a torn write produces.
    const shorter = full.slice();
    new DataView(shorter.buffer).setUint32(last, len - 1);
    await Deno.writeFile(path, shorter);
    await assert.rejects(Wal.open(dir), WalCorruptError);
  });
});

Deno.test("a flipped byte in a middle record is corruption, reported at that record", async () => {
  await withTempDir(async (root) => {
    const dir = `${root}/orig`;
    const { wal } = await Wal.open(dir);
    await wal.append({
      entries: range(1, 2),
      hardState: { term: 1, vote: null, commit: 0 },
    });
    await wal.append({ entries: [entry(3, 1, "middle entry")] });
    await wal.append({
      entries: range(4, 5),
      hardState: { term: 1, vote: null, commit: 4 },
    });
    await wal.close();
    const full = await Deno.readFile(seg1(dir));
    const offsets = recordOffsets(full);
    const middle = offsets[3]; // entry 3
    const middleEnd = offsets[4];

    const work = `${root}/work`;
    await Deno.mkdir(work);
    const path = seg1(work);
    // Every byte of the record, header included.
    for (let at = middle; at < middleEnd; at++) {
      const bad = full.slice();
      bad[at] ^= 0xff;
      await Deno.writeFile(path, bad);
      await assert.rejects(
        Wal.open(work),
        (err: unknown) => {
          assert.ok(err instanceof WalCorruptError, `flip at ${at}: ${err}`);
          assert.equal(err.offset, middle, `flip at ${at}`);
          assert.equal(err.path, path);
          assert.match(err.message, new RegExp(`byte offset ${middle}\\b`));
          assert.ok(err.message.includes(path));
          assert.match(
            err.message,
            /move it aside, wait until the other nodes have a leader, then restart the node empty/,
          );
          return true;
        },
      );
      // The damaged file is left exactly as it was, for inspection.
      assert.deepEqual(await Deno.readFile(path), bad);
    }
  });
});

Deno.test("records with a valid CRC but the wrong content are rejected clearly", async () => {
  await withTempDir(async (dir) => {
    const path = seg1(dir);
    const good = rawRecord({ t: "e", index: 1, term: 1, data: "a" });
    const cases: Array<[unknown, RegExp]> = [
      [{ t: "x" }, /unknown record type "x"/],
      [[1, 2], /not a JSON object/],
      [null, /not a JSON object/],
      [
        { t: "h", term: -1, vote: null, commit: 0 },
        /hard-state record has the wrong shape/,
      ],
      [
        { t: "h", term: 1, vote: 7, commit: 0 },
        /hard-state record has the wrong shape/,
      ],
      [
        { t: "e", index: 2, term: 1, data: 5 },
        /entry record has the wrong shape/,
      ],
      [
        { t: "e", index: 0, term: 1, data: "" },
        /entry record has the wrong shape/,
      ],
      [
        { t: "e", index: 1.5, term: 1, data: "" },
        /entry record has the wrong shape/,
      ],
      [
        { t: "e", index: 3, term: 1, data: "gap" },
        /entry index 3 leaves a gap after last index 1/,
      ],
    ];
    for (const [payload, message] of cases) {
      // Last in the file, and in the middle: both are errors.
      for (const after of [new Uint8Array(0), good]) {
        const bad = rawRecord(payload);
        const bytes = new Uint8Array(good.length + bad.length + after.length);
        bytes.set(good);
        bytes.set(bad, good.length);
        bytes.set(after, good.length + bad.length);
        await Deno.writeFile(path, bytes);
        await assert.rejects(Wal.open(dir), (err: unknown) => {
          assert.ok(err instanceof WalCorruptError, String(err));
          assert.equal(err.offset, good.length);
          assert.match(err.message, message);
          return true;
        });
      }
    }
  });
});

Deno.test("a payload that is not JSON is a torn tail at the end and corruption in the middle", async () => {
  await withTempDir(async (dir) => {
    const path = seg1(dir);
    const good = rawRecord({ t: "e", index: 1, term: 1, data: "a" });
    const notJson = rawRecord("{not json");
    await Deno.writeFile(path, new Uint8Array([...good, ...notJson]));
    await expectState(dir, EMPTY, [entry(1, 1, "a")], notJson.length);

    await Deno.writeFile(path, new Uint8Array([...good, ...notJson, ...good]));
    await assert.rejects(Wal.open(dir), WalCorruptError);

    // An all-zero header is a zero-length record, never valid.
    await Deno.writeFile(
      path,
      new Uint8Array([...good, ...new Uint8Array(8), ...good]),
    );
    await assert.rejects(Wal.open(dir), WalCorruptError);
  });
});

Deno.test("append rejects gaps and bad shapes with a TypeError and writes nothing", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    await assert.rejects(wal.append({ entries: [entry(2)] }), {
      name: "TypeError",
      message: /index 2 leaves a gap after the log's last index 0/,
    });
    await wal.append({ entries: range(1, 3) });
    const size = wal.sizeBytes;

    const bad: Array<Parameters<Wal["append"]>[0]> = [
      { entries: [entry(5)] },
      { entries: [entry(4), entry(6)] },
      { entries: [entry(4), entry(4)] },
      { entries: [entry(3), entry(2)] },
      { entries: [entry(0)] },
      { entries: [{ index: 4, term: 1, data: 1 as unknown as string }] },
      { entries: [{ index: 4, term: -1, data: "" }] },
      { entries: [entry(4)], hardState: { term: 1, vote: null, commit: -1 } },
      { entries: [entry(4)], hardState: { term: 1.5, vote: null, commit: 0 } },
      {
        entries: [entry(4)],
        hardState: { term: 1, vote: undefined as unknown as null, commit: 0 },
      },
    ];
    for (const update of bad) {
      await assert.rejects(
        wal.append(update),
        TypeError,
        JSON.stringify(update),
      );
      assert.equal(wal.sizeBytes, size);
      assert.equal(wal.lastIndex, 3);
    }
    assert.equal((await Deno.stat(seg1(dir))).size, size);

    // The log still works after the rejections.
    await wal.append({ entries: [entry(4)] });
    await wal.close();
    await expectState(dir, EMPTY, range(1, 4));
  });
});

Deno.test("concurrent appends are serialized in call order", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    const n = 200;
    const calls: Promise<void>[] = [];
    for (let i = 1; i <= n; i++) {
      // Sizes vary so that interleaved writes would corrupt the file.
      calls.push(wal.append({
        entries: [entry(i, 1, "x".repeat((i * 37) % 500))],
        hardState: { term: 1, vote: "n1", commit: i },
      }));
    }
    // One call in the middle has a gap: only it fails.
    const gap = wal.append({ entries: [entry(n + 5)] });
    for (let i = n + 1; i <= n + 10; i++) {
      calls.push(wal.append({ entries: [entry(i)] }));
    }
    await Promise.all(calls);
    await assert.rejects(gap, TypeError);
    assert.equal(wal.lastIndex, n + 10);
    await wal.close();
    const expected: Entry[] = [];
    for (let i = 1; i <= n; i++) {
      expected.push(entry(i, 1, "x".repeat((i * 37) % 500)));
    }
    for (let i = n + 1; i <= n + 10; i++) expected.push(entry(i));
    await expectState(dir, { term: 1, vote: "n1", commit: n }, expected);
  });
});

Deno.test("append copies its input: the caller may reuse its objects at once", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    const entries = range(1, 3);
    const hardState: HardState = { term: 1, vote: "n1", commit: 2 };
    const pending = wal.append({ entries, hardState });
    entries[0].data = "changed";
    entries.length = 1;
    hardState.term = 99;
    await pending;
    assert.equal(wal.lastIndex, 3);
    await wal.close();
    await expectState(dir, { term: 1, vote: "n1", commit: 2 }, range(1, 3));
  });
});

Deno.test("close waits for pending appends; later appends reject", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    const pending = wal.append({ entries: range(1, 50) });
    await wal.close();
    await pending;
    assert.equal(wal.lastIndex, 50);
    await assert.rejects(wal.append({ entries: [entry(51)] }), /closed/);
    await wal.close();
    await expectState(dir, EMPTY, range(1, 50));
  });
});

Deno.test("a bad length field in the middle is corruption, not a torn tail", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    for (let i = 1; i <= 5; i++) await wal.append({ entries: [entry(i)] });
    await wal.close();
    const path = seg1(dir);
    const full = await Deno.readFile(path);
    const second = recordOffsets(full)[1];
    const bad = full.slice();
    new DataView(bad.buffer).setUint32(second, 0x00100000); // runs past EOF
    await Deno.writeFile(path, bad);
    await assert.rejects(Wal.open(dir), (err: unknown) => {
      assert.ok(err instanceof WalCorruptError);
      assert.equal(err.offset, second);
      assert.match(err.message, /runs past the end of the file/);
      return true;
    });
  });
});

Deno.test({
  name: "no acknowledged append is lost when the writer is killed with SIGKILL",
  async fn() {
    await withTempDir(async (root) => {
      const walUrl = new URL("./wal.ts", import.meta.url).href;
      const script = `${root}/writer.ts`;
      await Deno.writeTextFile(
        script,
        `import { Wal } from ${JSON.stringify(walUrl)};
const { wal } = await Wal.open(Deno.args[0], { segmentBytes: 8192 });
const enc = new TextEncoder();
const stop = Date.now() + 5000;
let last = wal.lastIndex;
while (Date.now() < stop && last < 100000) {
  const count = 1 + (last % 3);
  const entries = [];
  for (let i = last + 1; i <= last + count; i++) {
    entries.push({ index: i, term: 1, data: "entry-" + i + "-" + "z".repeat(i % 300) });
  }
  await wal.append({ entries, hardState: { term: 1, vote: "n1", commit: last + count } });
  last += count;
  Deno.stdout.writeSync(enc.encode(last + "\\n"));
}
`,
      );
      const dir = `${root}/data`;
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "--no-config", script, dir],
        cwd: root,
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();

      const acked: number[] = [];
      let buffered = "";
      let killed = false;
      const decoder = new TextDecoder();
      for await (const chunk of child.stdout) {
        buffered += decoder.decode(chunk, { stream: true });
        const lines = buffered.split("\n");
        buffered = lines.pop()!; // an incomplete line is not an acknowledgement
        for (const line of lines) acked.push(Number(line));
        if (!killed && acked.length >= 1000) {
          child.kill("SIGKILL");
          killed = true;
        }
      }
      const status = await child.status;
      const errText = await stderr;
      assert.ok(killed, `the writer exited before it was killed: ${errText}`);
      assert.equal(status.signal, "SIGKILL", errText);

      const maxAcked = Math.max(...acked);
      // The writer rolled segments of 8 KiB while it ran.
      const segments = await Array.fromAsync(Deno.readDir(dir));
      assert.ok(segments.length > 10, `${segments.length} segments`);
      const r = await Wal.open(dir);
      assert.ok(
        r.wal.lastIndex >= maxAcked,
        `lost acknowledged entries: last index ${r.wal.lastIndex} < ${maxAcked}`,
      );
      r.entries.forEach((e, i) => {
        assert.equal(e.index, i + 1);
        assert.equal(e.data, `entry-${i + 1}-${"z".repeat((i + 1) % 300)}`);
      });
      for (const a of acked) assert.equal(r.entries[a - 1]?.index, a);
      assert.ok(r.hardState.commit >= maxAcked);
      assert.ok(r.hardState.commit <= r.wal.lastIndex);
      // The (possibly repaired) log takes appends and reopens cleanly.
      const next = r.wal.lastIndex + 1;
      await r.wal.append({ entries: [entry(next, 2)] });
      await r.wal.close();
      const again = await Wal.open(dir);
      assert.equal(again.repairedBytes, 0);
      assert.equal(again.wal.lastIndex, next);
      await again.wal.close();
    });
  },
});

// ---------------------------------------------------------------------------
// Segments, compaction, group commit, streaming, legacy import, disk errors.

const SEGMENT_NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.wal$/;

function names(paths: string[]): string[] {
  return paths.map((p) => p.slice(p.lastIndexOf("/") + 1));
}

/** Writes `count` entries one append each (so segments roll between them). */
async function fill(wal: Wal, from: number, to: number, term = 1) {
  for (let i = from; i <= to; i++) {
    await wal.append({
      entries: [entry(i, term)],
      hardState: { term, vote: "n1", commit: i - 1 },
    });
  }
}

Deno.test("segments roll once they reach segmentBytes and are named <sequence>-<firstIndex> in hex", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir, { segmentBytes: 300 });
    await fill(wal, 1, 40);
    const paths = wal.segmentPaths;
    assert.ok(paths.length >= 5, `only ${paths.length} segments`);
    const listed = [];
    for await (const e of Deno.readDir(dir)) listed.push(e.name);
    assert.deepEqual(listed.sort(), names(paths));
    let expectedFirst = 1;
    for (const [i, name] of names(paths).entries()) {
      const m = SEGMENT_NAME.exec(name)!;
      assert.ok(m, name);
      assert.equal(parseInt(m[1], 16), i + 1, name);
      // The first index is the log's last index + 1 when the segment began.
      assert.equal(parseInt(m[2], 16), expectedFirst, name);
      const size = (await Deno.stat(paths[i])).size;
      if (i < paths.length - 1) {
        assert.ok(size >= 300, `${name} rolled at ${size} bytes`);
        // Entries of this segment: up to the next segment's first index - 1.
        expectedFirst = parseInt(
          SEGMENT_NAME.exec(names(paths)[i + 1])![2],
          16,
        );
      }
    }
    assert.equal(names(paths)[0], "0000000000000001-0000000000000001.wal");
    const total = wal.sizeBytes;
    await wal.close();

    // Reopen: every entry across the segments, appends continue the last one.
    const r = await Wal.open(dir, { segmentBytes: 300 });
    assert.deepEqual(r.entries, range(1, 40));
    assert.deepEqual(r.hardState, { term: 1, vote: "n1", commit: 39 });
    assert.equal(r.snapshot, null);
    assert.equal(r.wal.sizeBytes, total);
    assert.deepEqual(r.wal.segmentPaths, paths);
    await fill(r.wal, 41, 60);
    assert.ok(r.wal.segmentPaths.length > paths.length);
    await r.wal.close();
    const again = await Wal.open(dir);
    assert.deepEqual(again.entries, range(1, 60));
    await again.wal.close();
  });
});

Deno.test("§5.3 a conflict truncation reaching back into an older segment survives a reopen", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir, { segmentBytes: 200 });
    await fill(wal, 1, 20);
    assert.ok(wal.segmentPaths.length > 3);
    await wal.append({ entries: [entry(3, 2), entry(4, 2)] });
    assert.equal(wal.lastIndex, 4);
    await wal.close();
    const r = await Wal.open(dir);
    assert.deepEqual(r.entries, [...range(1, 2), entry(3, 2), entry(4, 2)]);
    await r.wal.close();
  });
});

Deno.test("§7 compaction deletes the segments a snapshot covers; a restart replays only the entries after the marker", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir, { segmentBytes: 300 });
    await fill(wal, 1, 50, 3);
    const before = wal.segmentPaths;
    const firsts = names(before).map((n) =>
      parseInt(SEGMENT_NAME.exec(n)![2], 16)
    );
    await wal.compact({ index: 30, term: 3 });
    const after = wal.segmentPaths;
    // Deleted: exactly the segments whose successor starts at or below 31.
    const kept = before.filter((_, i) =>
      i === before.length - 1 || firsts[i + 1] - 1 > 30
    );
    assert.deepEqual(after, kept);
    assert.ok(after.length < before.length);
    for (const p of before.filter((p) => !after.includes(p))) {
      await assert.rejects(Deno.stat(p), Deno.errors.NotFound);
    }
    assert.deepEqual(wal.snapshot, { index: 30, term: 3 });
    assert.equal(wal.lastIndex, 50);
    // Appends at or below the marker are refused; after it they continue.
    await assert.rejects(wal.append({ entries: [entry(30, 3)] }), {
      name: "TypeError",
      message: /at or below the snapshot's index 30/,
    });
    await wal.append({ entries: [entry(51, 3)] });
    await wal.close();

    const r = await Wal.open(dir, { segmentBytes: 300 });
    assert.deepEqual(r.snapshot, { index: 30, term: 3 });
    // Entries 31..51, though the first kept segment also holds some <= 30.
    assert.deepEqual(r.entries, range(31, 51, 3));
    assert.deepEqual(r.hardState, { term: 3, vote: "n1", commit: 49 });
    assert.equal(r.wal.lastIndex, 51);
    // A later compaction moves on; a marker never moves back.
    await assert.rejects(r.wal.compact({ index: 29, term: 3 }), TypeError);
    await fill(r.wal, 52, 80, 3);
    await r.wal.compact({ index: 75, term: 3 });
    await r.wal.close();
    const again = await Wal.open(dir);
    assert.deepEqual(again.snapshot, { index: 75, term: 3 });
    assert.deepEqual(again.entries, range(76, 80, 3));
    await again.wal.close();
  });
});

Deno.test("§7 a snapshot marker beyond the last entry (an installed snapshot) restarts the log after it", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir, { segmentBytes: 300 });
    await fill(wal, 1, 10, 1);
    const before = wal.segmentPaths;
    assert.ok(before.length > 1);
    await wal.compact({ index: 500, term: 7 });
    // Every older segment is covered; the one being written is kept.
    assert.deepEqual(wal.segmentPaths, before.slice(-1));
    assert.equal(wal.lastIndex, 500);
    await assert.rejects(wal.append({ entries: [entry(11, 7)] }), TypeError);
    await assert.rejects(wal.append({ entries: [entry(502, 7)] }), /gap/);
    await wal.append({
      entries: [entry(501, 7), entry(502, 7)],
      hardState: { term: 7, vote: null, commit: 502 },
    });
    assert.equal(wal.lastIndex, 502);
    await wal.close();
    const r = await Wal.open(dir);
    assert.deepEqual(r.snapshot, { index: 500, term: 7 });
    assert.deepEqual(r.entries, [entry(501, 7), entry(502, 7)]);
    assert.equal(r.wal.lastIndex, 502);
    await r.wal.close();

    // A marker with nothing after it: lastIndex is the marker's index.
    await withTempDir(async (dir2) => {
      const w = await Wal.open(dir2);
      await w.wal.compact({ index: 9, term: 2 });
      await w.wal.close();
      const back = await Wal.open(dir2);
      assert.deepEqual(back.entries, []);
      assert.equal(back.wal.lastIndex, 9);
      assert.deepEqual(back.hardState, EMPTY);
      await back.wal.close();
    });
  });
});

/** A log of 12 entries in 3 or more segments of 250 bytes; their paths. */
async function segmentedLog(dir: string): Promise<string[]> {
  const { wal } = await Wal.open(dir, { segmentBytes: 250 });
  await fill(wal, 1, 12);
  const paths = wal.segmentPaths;
  await wal.close();
  assert.ok(paths.length >= 3);
  return paths;
}

/** A fresh `work` folder with copies of `paths`, then `name` → `bytes`. */
async function copyWith(
  work: string,
  paths: string[],
  name: string,
  bytes: Uint8Array,
): Promise<void> {
  await Deno.remove(work, { recursive: true }).catch(() => {});
  await Deno.mkdir(work);
  for (const p of paths) {
    await Deno.copyFile(p, `${work}/${p.slice(p.lastIndexOf("/") + 1)}`);
  }
  await Deno.writeFile(`${work}/${name}`, bytes);
}

Deno.test("a torn last record of the last segment is cut at every cut position; earlier segments are untouched", async () => {
  await withTempDir(async (root) => {
    const paths = await segmentedLog(`${root}/orig`);
    const lastName = names(paths).at(-1)!;
    const full = await Deno.readFile(paths.at(-1)!);
    const lastStart = recordOffsets(full).at(-1)!;
    const work = `${root}/work`;
    for (let cut = lastStart; cut < full.length; cut++) {
      await copyWith(work, paths, lastName, full.subarray(0, cut));
      const r = await Wal.open(work);
      // The last record is entry 12's hard state (commit 11): 11 is lost.
      assert.deepEqual(r.entries, range(1, 12), `cut at ${cut}`);
      assert.deepEqual(r.hardState, { term: 1, vote: "n1", commit: 10 });
      assert.equal(r.repairedBytes, cut - lastStart, `cut at ${cut}`);
      assert.equal((await Deno.stat(`${work}/${lastName}`)).size, lastStart);
      await r.wal.close();
    }
  });
});

Deno.test("damage in a segment before the last is corruption naming that file and offset, even in its last record", async () => {
  await withTempDir(async (root) => {
    const paths = await segmentedLog(`${root}/orig`);
    const target = names(paths)[1];
    const bytes = await Deno.readFile(paths[1]);
    const offsets = recordOffsets(bytes);
    const work = `${root}/work`;
    const cases: Array<[string, Uint8Array, number]> = [];
    for (const off of [offsets[0], offsets.at(-1)!]) {
      const flipped = bytes.slice();
      flipped[off + 10] ^= 0x01; // inside the payload
      cases.push([`flip at ${off + 10}`, flipped, off]);
    }
    cases.push([
      "cut last record",
      bytes.subarray(0, bytes.length - 3),
      offsets.at(-1)!,
    ]);
    for (const [what, damaged, offset] of cases) {
      await copyWith(work, paths, target, damaged);
      await assert.rejects(Wal.open(work), (err: unknown) => {
        assert.ok(err instanceof WalCorruptError, `${what}: ${err}`);
        assert.equal(err.path, `${work}/${target}`, what);
        assert.equal(err.offset, offset, what);
        assert.ok(err.message.includes(`${work}/${target}`), what);
        assert.match(err.message, new RegExp(`byte offset ${offset}\\b`));
        return true;
      });
    }
  });
});

Deno.test("a missing segment is corruption: in the middle, or at the start with no snapshot marker", async () => {
  await withTempDir(async (dir) => {
    const paths = await segmentedLog(dir);
    await Deno.remove(paths[1]);
    await assert.rejects(Wal.open(dir), {
      name: "WalCorruptError",
      message: /segments between them are missing/,
    });
    await Deno.remove(paths[0]);
    await assert.rejects(Wal.open(dir), {
      name: "WalCorruptError",
      message: /there is no snapshot marker: segments are missing/,
    });
  });
});

Deno.test("a file that is not a segment in the log folder is refused by name", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/notes.txt`, "hello");
    await assert.rejects(
      Wal.open(dir),
      /notes\.txt, which is not a log segment/,
    );
  });
});

Deno.test("group commit: concurrent appends share one write and one fdatasync, in call order", async () => {
  await withTempDir(async (dir) => {
    let hooked = 0;
    const syncMs: number[] = [];
    const { wal } = await Wal.open(dir, {
      onSync: (ms) => {
        hooked++;
        syncMs.push(ms);
      },
    });
    const n = 64;
    const calls: Promise<void>[] = [];
    for (let i = 1; i <= n; i++) {
      calls.push(wal.append({
        entries: [entry(i)],
        hardState: { term: 1, vote: null, commit: i },
      }));
    }
    await Promise.all(calls);
    const s = wal.stats;
    assert.ok(
      s.syncs <= 2,
      `${s.syncs} fdatasyncs for ${n} concurrent appends`,
    );
    assert.equal(s.writes, s.syncs);
    assert.equal(hooked, s.syncs);
    // Each hook call is told how long its fdatasync took.
    assert.ok(
      syncMs.every((ms) => Number.isFinite(ms) && ms >= 0),
      `fdatasync times ${syncMs}`,
    );
    assert.equal(s.bytes, wal.sizeBytes);
    // Sequential appends: one fdatasync each.
    await wal.append({ entries: [entry(n + 1)] });
    await wal.append({ entries: [entry(n + 2)] });
    assert.equal(wal.stats.syncs, s.syncs + 2);
    await wal.close();
    await expectState(dir, { term: 1, vote: null, commit: n }, range(1, n + 2));
  });
});

Deno.test("group commit off: every entry record is written and fdatasynced on its own", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir, {
      groupCommit: false,
      segmentBytes: 400,
    });
    const calls = [
      wal.append({
        entries: range(1, 3),
        hardState: { term: 1, vote: null, commit: 0 },
      }),
      wal.append({ entries: range(4, 5) }),
      wal.append({ hardState: { term: 1, vote: null, commit: 5 } }),
    ];
    await Promise.all(calls);
    assert.equal(wal.stats.syncs, 6);
    assert.equal(wal.stats.writes, 6);
    await fill(wal, 6, 20);
    assert.ok(wal.segmentPaths.length > 1);
    await wal.close();
    const r = await Wal.open(dir);
    assert.deepEqual(r.entries, range(1, 20));
    await r.wal.close();
  });
});

Deno.test("open reads segments as a stream: a buffer far smaller than the segment, grown only for one large record", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir);
    const big = entry(1, 1, "b".repeat(20_000));
    await wal.append({ entries: [big] });
    const rest: Entry[] = [];
    for (let i = 2; i <= 1000; i++) rest.push(entry(i, 1, "s".repeat(i % 900)));
    await wal.append({ entries: rest });
    const size = wal.sizeBytes;
    await wal.close();
    assert.ok(size > 400_000);
    const r = await Wal.open(dir, { readBufferBytes: 1024 });
    assert.deepEqual(r.entries, [big, ...rest]);
    const peak = r.wal.stats.peakReadBufferBytes;
    assert.ok(peak >= 20_000 && peak <= 2 * 20_100, `peak ${peak}`);
    assert.ok(peak < size / 10);
    await r.wal.close();
  });
});

/** Encodes one record of the old single-file format (CRC-32, IEEE). */
function legacyRecord(payload: unknown): Uint8Array {
  const bytes = encoder.encode(JSON.stringify(payload));
  const out = new Uint8Array(8 + bytes.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, bytes.length);
  view.setUint32(4, crc32(bytes));
  out.set(bytes, 8);
  return out;
}

Deno.test("an old single-file wal.log is imported into the first segment and removed", async () => {
  await withTempDir(async (root) => {
    const legacy = `${root}/wal.log`;
    const records = [
      legacyRecord({ t: "h", term: 1, vote: "n1", commit: 0 }),
      ...range(1, 4).map((e) => legacyRecord({ t: "e", ...e })),
      legacyRecord({ t: "e", index: 3, term: 2, data: "replaced" }),
      legacyRecord({ t: "h", term: 2, vote: "n2", commit: 2 }),
    ];
    const torn = legacyRecord({ t: "e", index: 4, term: 2, data: "torn" });
    const bytes = new Uint8Array(
      [...records, torn.subarray(0, 11)].reduce((n, r) => n + r.length, 0),
    );
    let off = 0;
    for (const r of [...records, torn.subarray(0, 11)]) {
      bytes.set(r, off);
      off += r.length;
    }
    await Deno.writeFile(legacy, bytes);
    const dir = `${root}/wal`;
    const expected = [...range(1, 2), entry(3, 2, "replaced")];
    const hs = { term: 2, vote: "n2", commit: 2 };
    const r = await Wal.open(dir, { legacyFile: legacy });
    assert.deepEqual(r.entries, expected);
    assert.deepEqual(r.hardState, hs);
    await r.wal.append({ entries: [entry(4, 2)] });
    await r.wal.close();
    await assert.rejects(Deno.stat(legacy), Deno.errors.NotFound);
    assert.deepEqual(
      names((await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name)),
      [SEG1],
    );
    await expectState(dir, hs, [...expected, entry(4, 2)]);

    // A crash after the import but before the removal: the segments win.
    await Deno.writeFile(legacy, bytes);
    const again = await Wal.open(dir, { legacyFile: legacy });
    assert.deepEqual(again.entries, [...expected, entry(4, 2)]);
    await again.wal.close();
    await assert.rejects(Deno.stat(legacy), Deno.errors.NotFound);

    // A corrupt legacy file is refused by name and left in place.
    const bad = bytes.slice();
    bad[records[0].length + 12] ^= 0xff;
    await Deno.writeFile(legacy, bad);
    await assert.rejects(
      Wal.open(`${root}/fresh`, { legacyFile: legacy }),
      (err: unknown) => err instanceof WalCorruptError && err.path === legacy,
    );
    assert.ok((await Deno.stat(legacy)).isFile);
  });
});

Deno.test("WalWriteError names the path, the errno and what to do", () => {
  const cases: Array<[string, RegExp]> = [
    ["ENOSPC", /disk full \(ENOSPC\)\. Free space/],
    ["EROFS", /read-only file system \(EROFS\)\. Remount/],
    ["EACCES", /permission denied \(EACCES\)\. Fix the permissions/],
    ["EIO", /I\/O error \(EIO\)\. Check the disk/],
  ];
  for (const [code, message] of cases) {
    const err = new WalWriteError(
      "/d/wal/x.wal",
      "write",
      Object.assign(new Error("os says no"), { code }),
    );
    assert.equal(err.code, code);
    assert.match(
      err.message,
      /^write-ahead log \/d\/wal\/x\.wal: write failed: /,
    );
    assert.match(err.message, message);
    assert.match(err.message, /Nothing acknowledged is lost/);
  }
  const open = new WalWriteError(
    "/d",
    "open",
    Object.assign(new Error("x"), { code: "EROFS" }),
  );
  assert.doesNotMatch(open.message, /Nothing acknowledged/);
  const deletion = new WalWriteError(
    "/d",
    "segment deletion",
    Object.assign(new Error("x"), { code: "EIO" }),
  );
  assert.doesNotMatch(deletion.message, /refuses further appends/);
});

Deno.test("an onSync hook that throws does not fail a durable append", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir, {
      onSync: () => {
        throw new Error("metrics broke");
      },
    });
    await wal.append({ entries: range(1, 2) });
    await wal.append({ entries: [entry(3)] });
    assert.equal(wal.stats.syncs, 2);
    await wal.close();
    await expectState(dir, EMPTY, range(1, 3));
  });
});

/** Whether this process may mount a tmpfs (root, outside most CI). */
async function canMount(): Promise<string | null> {
  if (Deno.build.os !== "linux") return "not Linux";
  const dir = await Deno.makeTempDir({ prefix: "rafter_mount_probe_" });
  try {
    const out = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir],
      stderr: "piped",
      stdout: "null",
    }).output().catch((e) => ({
      success: false,
      stderr: encoder.encode(String(e)),
    }));
    if (!out.success) {
      return `mounting a tmpfs is not permitted here: ${
        new TextDecoder().decode(out.stderr).trim()
      }`;
    }
    await run("umount", dir);
    return null;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
const mountProblem = await canMount();

async function run(cmd: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command(cmd, { args, stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(
      `${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
}

/**
 * Unmounts `dir`: a mount can be busy for a moment while another test of
 * the run makes a mount namespace (`ip netns exec` copies every mount), so
 * a few tries, then a lazy unmount (detached now, freed once unused).
 */
async function unmount(dir: string): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return await run("umount", dir);
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  await run("umount", "-l", dir);
}

/** Runs `fn` on a fresh tmpfs of `size`, unmounted afterwards. */
async function withTmpfs(size: string, fn: (dir: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "rafter_tmpfs_" });
  try {
    await run("mount", "-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir);
    try {
      await fn(dir);
    } finally {
      await unmount(dir);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "disk full: the failed append rejects with WalWriteError (ENOSPC), later appends are refused, nothing acknowledged is lost",
  ignore: mountProblem !== null,
  async fn() {
    await withTmpfs("256k", async (mnt) => {
      const dir = `${mnt}/wal`;
      const { wal } = await Wal.open(dir);
      let acked = 0;
      let failure: unknown = null;
      for (let i = 1; i <= 2000 && failure === null; i++) {
        try {
          await wal.append({ entries: [entry(i, 1, "f".repeat(1000))] });
          acked = i;
        } catch (err) {
          failure = err;
        }
      }
      assert.ok(failure instanceof WalWriteError, String(failure));
      assert.equal(failure.code, "ENOSPC");
      assert.ok(failure.message.includes(`${dir}/${SEG1}`), failure.message);
      assert.match(failure.message, /disk full \(ENOSPC\)\. Free space/);
      assert.ok(acked > 100);
      await assert.rejects(
        wal.append({ entries: [entry(acked + 1)] }),
        (err: unknown) =>
          err instanceof WalWriteError &&
          /refused: an earlier write failed/.test(err.message),
      );
      await assert.rejects(wal.compact({ index: 1, term: 1 }), WalWriteError);
      await wal.close();
      // Reopening cuts the half-written record off; every acknowledged entry is there.
      const r = await Wal.open(dir);
      assert.equal(r.wal.lastIndex, acked);
      assert.deepEqual(
        r.entries.map((e) => e.index),
        range(1, acked).map((e) => e.index),
      );
      await r.wal.close();
    });
  },
});

Deno.test({
  name:
    "read-only file system: open fails with WalWriteError (EROFS) naming the path",
  ignore: mountProblem !== null,
  async fn() {
    await withTmpfs("1m", async (mnt) => {
      const dir = `${mnt}/wal`;
      const { wal } = await Wal.open(dir);
      await wal.append({ entries: range(1, 3) });
      await wal.close();
      await run("mount", "-o", "remount,ro", mnt);
      try {
        for (const d of [dir, `${mnt}/new`]) {
          await assert.rejects(Wal.open(d), (err: unknown) => {
            assert.ok(err instanceof WalWriteError, String(err));
            assert.equal(err.code, "EROFS");
            assert.ok(err.message.includes(d), err.message);
            assert.match(
              err.message,
              /read-only file system \(EROFS\)\. Remount the file system read-write/,
            );
            return true;
          });
        }
      } finally {
        await run("mount", "-o", "remount,rw", mnt);
      }
      await expectState(dir, EMPTY, range(1, 3));
    });
  },
});

Deno.test("§7 receiver rule 7: a snapshot marker with discardAfter drops the entries after it, at once and after a restart", async () => {
  await withTempDir(async (dir) => {
    const { wal } = await Wal.open(dir, { segmentBytes: 300 });
    await fill(wal, 1, 10, 1);
    // The leader's snapshot at 6 has term 2: this log disagrees there.
    await wal.compact({ index: 6, term: 2 }, { discardAfter: true });
    assert.equal(wal.lastIndex, 6);
    await wal.close();
    const r = await Wal.open(dir);
    assert.deepEqual(r.snapshot, { index: 6, term: 2 });
    assert.deepEqual(r.entries, []);
    assert.equal(r.wal.lastIndex, 6);
    await r.wal.append({ entries: [entry(7, 2)] });
    await r.wal.close();
    const again = await Wal.open(dir);
    assert.deepEqual(again.entries, [entry(7, 2)]);
    await again.wal.close();
    // Without discardAfter the entries after the marker stay (rule 6).
    const kept = await Deno.makeTempDir();
    try {
      const { wal: other } = await Wal.open(kept);
      await fill(other, 1, 10, 1);
      await other.compact({ index: 6, term: 1 });
      assert.equal(other.lastIndex, 10);
      await other.close();
      const reopened = await Wal.open(kept);
      assert.deepEqual(reopened.entries, range(7, 10));
      await reopened.wal.close();
    } finally {
      await Deno.remove(kept, { recursive: true });
    }
  });
});
