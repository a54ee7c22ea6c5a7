import assert from "node:assert/strict";
import { startRegistryNode } from "../mod.ts";
import { freePorts } from "../../testing/ports.ts";
import { TEST_SECRET } from "../../testing/cluster.ts";
import { shiftableWallClock } from "../../testing/time.ts";
import { parseRegistryArgs } from "./args.ts";
import { awaitLeaderContact } from "./join.ts";

Deno.test("a joining node does not give up on the leader because its wall clock jumped an hour forward", async () => {
  // A node that joined a cluster whose members it cannot reach (n1's peer
  // port is closed): it gives up after 30 election timeouts (at least
  // 5 s) of real waiting, not when its wall clock says an hour passed.
  const [client, peer, dead] = freePorts(3);
  const args = parseRegistryArgs(
    `--id n2 --listen 127.0.0.1:${client} --peer-listen 127.0.0.1:${peer} --tick-ms 10 --election-ticks 5`
      .split(" "),
  );

  const dataDir = await Deno.makeTempDir({ prefix: "rafter-join-clock-" });
  const peers = {
    n1: `tcp://127.0.0.1:${dead}`,
    n2: `tcp://127.0.0.1:${peer}`,
  };
  const wall = shiftableWallClock();
  const node = await startRegistryNode({
    id: "n2",
    listen: { hostname: "127.0.0.1", port: client },
    peerListen: { hostname: "127.0.0.1", port: peer },
    peers,
    join: { clusterId: "0123456789abcdef" },
    clusterSecret: TEST_SECRET,
    dataDir,
    tickMs: 10,
    electionTicks: 5,
  });
  const stopped = Promise.withResolvers<void>();
  try {
    const lines: string[] = [];
    const contact = awaitLeaderContact(
      args,
      node,
      { clusterId: "0123456789abcdef", peers, added: true, clientUrls: [] },
      stopped.promise,
      (line) => lines.push(line),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    wall.offsetMs = 3_600_000;
    const early = await Promise.race([
      contact,
      new Promise((resolve) => setTimeout(() => resolve("waiting"), 1_000)),
    ]);
    assert.equal(early, "waiting", `gave up at once: ${early}`);
    stopped.resolve();
    assert.equal(await contact, null);
  } finally {
    wall.restore();
    stopped.resolve();
    await node.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});
