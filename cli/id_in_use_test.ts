/**
 * `rafter bind` of an id another live lease holds (issue 18): refused,
 * one line naming the holder, a hint on what to do, exit 1.
 */

import assert from "node:assert/strict";
import { startRegistryNode } from "../registry/main.ts";
import { EXIT, runCli } from "./main.ts";

Deno.test("rafter bind of an id another live lease holds at another url prints ID_IN_USE with the holder and a hint, exit 1", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "rafter_id_in_use_" });
  const node = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir,
    tickMs: 10,
  });
  try {
    const run = async (args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(args, {
        out: (line) => out.push(line),
        err: (line) => err.push(line),
        env: (name) => name === "RAFTER_REGISTRY" ? node.url : undefined,
      });
      return { code, out: out.join("\n"), err: err.join("\n") };
    };
    const first = await run([
      "bind",
      "hello",
      "tcp://127.0.0.1:9001",
      "--id",
      "s1",
      "--ttl-ms",
      "60000",
    ]);
    assert.equal(first.code, EXIT.ok, first.err);
    const leaseId = first.out.match(/, lease (\S+) \(ttl/)![1];
    const second = await run([
      "bind",
      "hello",
      "tcp://127.0.0.1:9002",
      "--id",
      "s1",
      "--ttl-ms",
      "60000",
    ]);
    assert.equal(second.code, EXIT.failed);
    assert.equal(
      second.err,
      `rafter: Id in use: endpoint "s1" of "hello" is held by another live server at tcp://127.0.0.1:9001 (lease ${leaseId}); start this one with another id, stop the other server, or wait for its lease to expire (60 s after its last keep-alive)\n` +
        `rafter lookup hello shows the holder; bind with another --id, or free the id at once with rafter lease revoke ${leaseId} (it unbinds the other server).`,
    );
    const lookup = await run(["lookup", "hello"]);
    assert.match(lookup.out, /tcp:\/\/127\.0\.0\.1:9001/);
    assert.doesNotMatch(lookup.out, /9002/);
  } finally {
    await node.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});
