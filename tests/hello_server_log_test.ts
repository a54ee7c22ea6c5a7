import assert from "node:assert/strict";
import { withLocalCluster } from "../testing/cluster.ts";

Deno.test("the hello server says when its keep-alives fail and get through again, and on SIGTERM that its lease could not be revoked while the registry is down", async () => {
  await withLocalCluster({}, async (cluster) => {
    await cluster.startRegistryWithLeader(1);
    await cluster.startHello("hello-1", ["--ttl-ms", "3000"]);
    await cluster.pause("n1");
    const failed = await cluster.waitForLine(
      "hello-1",
      /keep-alive failed \(.+\); retrying: the lease lapses after 3000 ms/,
      10_000,
    );
    assert.ok(failed);
    cluster.resume("n1");
    await cluster.waitForLine(
      "hello-1",
      /keep-alives get through again/,
      10_000,
    );
    // Once: a failure run logs one line, not one per attempt.
    const child = cluster.child("hello-1");
    assert.equal(
      child.output.filter((line) => /keep-alive failed/.test(line)).length,
      1,
    );
    await cluster.kill("n1");
    await cluster.kill("hello-1", "SIGTERM");
    const lines = child.output.join("\n");
    assert.match(lines, /a second Ctrl-C or SIGTERM stops at once/);
    assert.match(
      lines,
      /hello-1 stopped; its lease could not be revoked \(registry unreachable\?\)/,
    );
  });
});
