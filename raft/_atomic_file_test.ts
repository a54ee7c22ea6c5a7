import assert from "node:assert/strict";
import { withTempDir } from "../testing/temp.ts";
import {
  readFileIfExists,
  syncDir,
  writeAll,
  writeFileAtomic,
} from "./_atomic_file.ts";

const text = (s: string) => new TextEncoder().encode(s);

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) out.push(e.name);
  return out.sort();
}

Deno.test("writeFileAtomic creates, then replaces content and leaves no .tmp", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/meta.json`;
    await writeFileAtomic(path, text('{"id":"n1","peers":["n2","n3"]}'));
    assert.deepEqual(
      await Deno.readFile(path),
      text('{"id":"n1","peers":["n2","n3"]}'),
    );
    await writeFileAtomic(path, text('{"id":"n1"}'));
    assert.deepEqual(await Deno.readFile(path), text('{"id":"n1"}'));
    await writeFileAtomic(path, new Uint8Array(0));
    assert.equal((await Deno.readFile(path)).length, 0);
    assert.deepEqual(await names(dir), ["meta.json"]);
  });
});

Deno.test("writeFileAtomic overwrites a stale .tmp left by a crash", async () => {
  await withTempDir(async (dir) => {
    const path = `${dir}/snap`;
    await Deno.writeFile(`${path}.tmp`, new Uint8Array(10_000).fill(7));
    await writeFileAtomic(path, text("short"));
    assert.deepEqual(await Deno.readFile(path), text("short"));
    assert.deepEqual(await names(dir), ["snap"]);
  });
});

Deno.test("writeFileAtomic writes a large buffer completely", async () => {
  await withTempDir(async (dir) => {
    const big = crypto.getRandomValues(new Uint8Array(65536)).slice();
    const data = new Uint8Array(5 * 1024 * 1024);
    for (let i = 0; i < data.length; i += big.length) data.set(big, i);
    await writeFileAtomic(`${dir}/big`, data);
    assert.deepEqual(await Deno.readFile(`${dir}/big`), data);
  });
});

Deno.test("writeFileAtomic throws NotFound when the parent directory is missing", async () => {
  await withTempDir(async (dir) => {
    await assert.rejects(
      writeFileAtomic(`${dir}/missing/meta.json`, text("x")),
      Deno.errors.NotFound,
    );
  });
});

Deno.test("writeFileAtomic onto a directory fails and removes its .tmp", async () => {
  await withTempDir(async (dir) => {
    await Deno.mkdir(`${dir}/sub`);
    await Deno.writeTextFile(`${dir}/sub/keep`, "x");
    await assert.rejects(writeFileAtomic(`${dir}/sub`, text("x")));
    assert.deepEqual(await names(dir), ["sub"]);
  });
});

Deno.test("readFileIfExists gives null for a missing file and bytes otherwise", async () => {
  await withTempDir(async (dir) => {
    assert.equal(await readFileIfExists(`${dir}/nope`), null);
    await Deno.writeFile(`${dir}/yes`, text("hi"));
    assert.deepEqual(await readFileIfExists(`${dir}/yes`), text("hi"));
  });
});

Deno.test("readFileIfExists rethrows errors other than NotFound", async () => {
  await withTempDir(async (dir) => {
    await assert.rejects(readFileIfExists(dir));
  });
});

Deno.test("syncDir flushes an existing directory and rejects a missing one", async () => {
  await withTempDir(async (dir) => {
    await syncDir(dir);
    await assert.rejects(syncDir(`${dir}/missing`), Deno.errors.NotFound);
  });
});

Deno.test("writeAll writes every byte", async () => {
  await withTempDir(async (dir) => {
    const file = await Deno.open(`${dir}/f`, { create: true, append: true });
    const data = new Uint8Array(3 * 1024 * 1024).map((_, i) => i % 251);
    await writeAll(file, data);
    await writeAll(file, new Uint8Array(0));
    await file.syncData();
    file.close();
    assert.deepEqual(await Deno.readFile(`${dir}/f`), data);
  });
});
