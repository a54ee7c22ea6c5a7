import assert from "node:assert/strict";
import { tokenIdOf } from "../../protocol/auth.ts";
import { dial } from "../../rpc/transport/dial.ts";
import { waitFor } from "../../testing/time.ts";
import { startRegistryNode } from "../../testing/registry.ts";
import { callOn, withThreeNodes } from "./_test_util.ts";

Deno.test("bootstrap: the first leader records its admin token once; the next leader records none", async () => {
  const lines: string[] = [];
  await withThreeNodes(async (nodes, leader, _stop, dir) => {
    await waitFor(
      () => nodes.every((node) => node.state.bootstrapped),
      "every node to apply the bootstrap token",
    );
    const tokens = nodes[0].state.tokens();
    assert.equal(tokens.length, 1);
    // Each node made its own file; the first leader's is the one recorded.
    const files = await Promise.all(nodes.map(async (node) =>
      tokenIdOf(
        (await Deno.readTextFile(`${dir}/${node.id}/admin_token`)).trim(),
      )
    ));
    assert.equal(new Set(files).size, 3);
    // (The leader that recorded it: the first, unless an early election
    // under load passed leadership on before it committed.)
    const recorder = nodes[files.indexOf(tokens[0].tokenId)];
    assert.ok(recorder !== undefined, "one node's file is the recorded token");
    // The token works on every member; writes with it go to the leader.
    const adminToken =
      (await Deno.readTextFile(`${dir}/${recorder.id}/admin_token`)).trim();
    const follower = nodes.find((node) => node !== leader)!;
    const connection = await dial(follower.url);
    try {
      await connection.call("registry.authenticate", { token: adminToken });
      await assert.rejects(
        connection.call("registry.tokenCreate", {
          name: "x",
          permissions: ["read:*"],
        }),
        { code: -32001, data: { leaderId: leader.id, leaderUrl: leader.url } },
      );
    } finally {
      connection.close();
      await connection.closed;
    }
    assert.equal(tokens[0].name, "bootstrap");
    assert.deepEqual(tokens[0].permissions, ["admin"]);
    // Hand leadership over and let the new leader settle and write.
    const next = await callOn<{ leader: string }>(
      leader,
      "registry.leaderTransfer",
      {},
    );
    const successor = nodes.find((node) => node.id === next.leader)!;
    await waitFor(
      () => successor.raft.status.role === "leader",
      "the successor to lead",
    );
    await callOn(successor, "registry.bind", {
      name: "after",
      endpoint: { url: "tcp://127.0.0.1:9001" },
    });
    await waitFor(
      () => nodes.every((node) => node.state.revision === 1),
      "every node to apply the bind",
    );
    for (const node of nodes) {
      assert.deepEqual(
        node.state.tokens().map((t) => t.tokenId),
        [tokens[0].tokenId],
        node.id,
      );
      assert.equal(node.state.authEnabled, false);
    }
    // The two others say their files are not the cluster's token.
    await waitFor(
      () =>
        nodes.filter((node) => node !== recorder).every((node) =>
          lines.includes(
            `${node.id}: the cluster recorded another member's bootstrap admin token (that of its first leader); ${dir}/${node.id}/admin_token is not a token of this cluster: use the first leader's file, and remove this one`,
          )
        ),
      "the other members to say their token files are unused",
    );
    assert.ok(
      !lines.some((line) =>
        line.startsWith(`${recorder.id}: the cluster recorded another`)
      ),
    );
  }, { log: (line) => lines.push(line) });
});

Deno.test("bootstrap: a restarted node keeps its token file and makes no second token; --auth then enforces", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rafter_bootstrap_" });
  const options = {
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir: `${dir}/n1`,
    tickMs: 10,
    electionTicks: 5,
  };
  try {
    const lines: string[] = [];
    let node = await startRegistryNode({
      ...options,
      log: (line) => lines.push(line),
    });
    const file = `${dir}/n1/admin_token`;
    assert.ok(
      lines.includes(
        `n1: auth is off (anyone may call; rafter auth enable, or --auth, turns it on); the bootstrap admin token is in ${file} (new)`,
      ),
      lines.join("\n"),
    );
    await waitFor(() => node.state.bootstrapped, "the bootstrap token");
    const text = (await Deno.readTextFile(file)).trim();
    const mode = (await Deno.stat(file)).mode! & 0o777;
    assert.equal(mode, 0o600);
    assert.deepEqual(
      node.state.tokens().map((t) => t.tokenId),
      [tokenIdOf(text)],
    );
    await node.stop();
    lines.length = 0;
    node = await startRegistryNode({
      ...options,
      auth: true,
      log: (line) => lines.push(line),
    });
    try {
      assert.ok(
        lines.includes(
          `n1: auth is on (--auth); the cluster's bootstrap admin token was made before; it is in ${file}`,
        ),
        lines.join("\n"),
      );
      await waitFor(() => node.raft.status.role === "leader", "n1 to lead");
      assert.equal((await Deno.readTextFile(file)).trim(), text);
      assert.equal(node.state.tokenCount, 1);
      // Enforced by the node (the replicated switch stayed off).
      assert.equal(node.state.authEnabled, false);
      const connection = await dial(node.url);
      try {
        await assert.rejects(connection.call("registry.status"), {
          code: -32012,
        });
        await connection.call("registry.authenticate", { token: text });
        await connection.call("registry.status");
      } finally {
        connection.close();
        await connection.closed;
      }
    } finally {
      await node.stop();
    }
    // Started with a token file that is not there (another secret folder, or
    // a restored cluster): the line names no file that does not exist.
    lines.length = 0;
    const elsewhere = `${dir}/elsewhere/admin_token`;
    node = await startRegistryNode({
      ...options,
      adminTokenFile: elsewhere,
      log: (line) => lines.push(line),
    });
    try {
      assert.ok(
        lines.includes(
          `n1: auth is off (anyone may call; rafter auth enable, or --auth, turns it on); the cluster's bootstrap admin token was made before, by the node that bootstrapped it (its --admin-token-file; there is none at ${elsewhere} here); a cluster restored from a snapshot keeps the tokens it had`,
        ),
        lines.join("\n"),
      );
      await assert.rejects(Deno.stat(elsewhere), Deno.errors.NotFound);
    } finally {
      await node.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
