/**
 * SIGHUP (what systemd's `ExecReload` in examples/deploy sends) never
 * stops a registry node or the hello server: without TLS files each logs
 * one line and goes on serving. Real processes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { withLocalCluster } from "../testing/cluster.ts";
import { connect } from "../mod.ts";

const NOTHING = /SIGHUP: nothing to reload \(no TLS files\); still serving/;

Deno.test({
  name:
    "SIGHUP: a plain registry node and a plain hello server log that there is nothing to reload and go on serving",
  ignore: Deno.build.os === "windows",
  async fn() {
    await withLocalCluster({}, async (cluster) => {
      await cluster.startRegistryWithLeader(1);
      await cluster.startHello("hello-1");
      const node = cluster.child("n1");
      const hello = cluster.child("hello-1");
      Deno.kill(node.pid, "SIGHUP");
      Deno.kill(hello.pid, "SIGHUP");
      const line = await cluster.waitForLine("n1", NOTHING, 10_000);
      assert.match(line, /n1: SIGHUP/);
      assert.match(line, /info/);
      await cluster.waitForLine("hello-1", NOTHING, 10_000);
      // Both still serve: the registry answers a call and resolves hello,
      // and hello answers a greet through it.
      const connection = await cluster.dialNode("n1");
      try {
        const status = await connection.call("registry.status", {}) as {
          id: string;
        };
        assert.equal(status.id, "n1");
      } finally {
        connection.close();
      }
      const client = connect(cluster.registryUrls);
      try {
        const hello = client.stub<
          { greet(name: string): { greeting: string; server: string } }
        >("hello");
        const { greeting, server } = await hello.greet("Ada");
        assert.equal(server, "hello-1");
        assert.match(greeting, /Ada/);
      } finally {
        client.close();
      }
      assert.ok(node.running && hello.running);
      // One line per signal, not more.
      assert.equal(node.output.filter((l) => NOTHING.test(l)).length, 1);
      // It still stops cleanly on SIGTERM (exit 0), and the SIGHUP listener
      // is gone by then: nothing keeps the process alive.
      await cluster.kill("hello-1", "SIGTERM");
      assert.equal(await hello.exited, 0);
      await cluster.kill("n1", "SIGTERM");
      assert.equal(await node.exited, 0);
      assert.match(node.output.join("\n"), /registry n1 stopped/);
    });
  },
});

Deno.test({
  name:
    "SIGHUP: a registry node and a hello server with TLS files reload them (and do not say there is nothing to reload)",
  ignore: Deno.build.os === "windows",
  async fn() {
    await withLocalCluster({ secure: true }, async (cluster) => {
      await cluster.startRegistryWithLeader(1);
      await cluster.startHello("hello-1");
      const node = cluster.child("n1");
      const hello = cluster.child("hello-1");
      Deno.kill(node.pid, "SIGHUP");
      Deno.kill(hello.pid, "SIGHUP");
      await cluster.waitForLine(
        "n1",
        /n1: reloaded the client port's TLS certificate \(SIGHUP\)/,
        10_000,
      );
      await cluster.waitForLine(
        "hello-1",
        /hello-1: reloaded its TLS certificate \(SIGHUP\)/,
        10_000,
      );
      assert.ok(node.running && hello.running);
      assert.equal(node.output.some((l) => NOTHING.test(l)), false);
      assert.equal(hello.output.some((l) => NOTHING.test(l)), false);
    });
  },
});
