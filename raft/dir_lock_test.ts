import assert from "node:assert/strict";
import { withTempDir } from "../testing/temp.ts";
import { DataDirInUseError, lockDataDir } from "./dir_lock.ts";
import { RaftNode } from "./node.ts";

Deno.test("a data folder is locked once: a second lock fails until the first is released", async () => {
  await withTempDir(async (dir) => {
    const lock = await lockDataDir(dir);
    await assert.rejects(lockDataDir(dir), (error: unknown) => {
      assert.ok(error instanceof DataDirInUseError);
      assert.equal(
        error.message,
        `data folder ${dir} is in use by another registry node (pid ${Deno.pid}); stop that node first, or pass another --data folder`,
      );
      return true;
    });
    lock.release();
    lock.release(); // twice is fine
    (await lockDataDir(dir)).release();
  }, "rafter_lock_");
});

Deno.test("two Raft nodes cannot share a data folder", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rafter_lock_" });
  const options = {
    id: "n1",
    peers: { n1: "tcp://127.0.0.1:1" },
    transport: { send() {}, close() {} },
    dataDir: dir,
    apply: () => null,
  };
  const first = await RaftNode.start(options);
  try {
    await assert.rejects(RaftNode.start(options), DataDirInUseError);
  } finally {
    await first.stop();
  }
  // Stopping released it.
  await (await RaftNode.start(options)).stop();
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a lock held by a process that is SIGKILLed is free again", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rafter_lock_" });
  const script = `${dir}/hold.ts`;
  await Deno.writeTextFile(
    script,
    `import { lockDataDir } from ${
      JSON.stringify(new URL("./dir_lock.ts", import.meta.url).href)
    };
await lockDataDir(${JSON.stringify(`${dir}/data`)});
console.log("locked");
await new Promise((r) => setTimeout(r, 60_000));`,
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script],
    stdout: "piped",
  }).spawn();
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream())
      .getReader();
    assert.match((await reader.read()).value ?? "", /locked/);
    reader.releaseLock();
    await assert.rejects(
      lockDataDir(`${dir}/data`),
      new RegExp(`in use by another registry node \\(pid ${child.pid}\\)`),
    );
    child.kill("SIGKILL");
    await child.status;
    (await lockDataDir(`${dir}/data`)).release();
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.status;
    await child.stdout.cancel().catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
