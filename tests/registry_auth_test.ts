import assert from "node:assert/strict";
import { freePorts } from "../testing/ports.ts";
import { waitFor, within } from "../testing/time.ts";
import { dial } from "../rpc/transport/dial.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import type { TokenCreateResult } from "../protocol/auth.ts";
import type { LookupResult } from "../protocol/registry.ts";
import { spawnRegistry } from "./_registry_process.ts";

async function refused(
  call: Promise<unknown>,
  code: number,
  message: RegExp,
): Promise<void> {
  await assert.rejects(call, (error: { code: number; message: string }) => {
    assert.equal(error.code, code, error.message);
    assert.match(error.message, message);
    return true;
  });
}

Deno.test("registry/main.ts --auth: the admin token file makes a bind token over raw JSON-RPC; the wire refuses the rest", async () => {
  const cwd = await Deno.makeTempDir({ prefix: "rafter_auth_main_" });
  const [port, peerPort] = freePorts(2);
  const url = `tcp://127.0.0.1:${port}`;
  const node = spawnRegistry(cwd, [
    "--listen",
    `127.0.0.1:${port}`,
    "--peer-listen",
    `127.0.0.1:${peerPort}`,
    "--auth",
    "--tick-ms",
    "20",
    "--election-ticks",
    "5",
  ]);
  const connections: RpcConnection[] = [];
  const open = async (token?: string) => {
    const connection = await dial(url);
    connections.push(connection);
    if (token !== undefined) {
      await connection.call("registry.authenticate", { token });
    }
    return connection;
  };
  try {
    await waitFor(
      () => node.output.includes(`listening on ${url}`),
      "the registry to listen",
      20_000,
    );
    assert.ok(
      node.output.includes(
        "n1: auth is on (--auth); the bootstrap admin token is in ./data/n1/admin_token (new)",
      ),
      node.output,
    );
    const file = `${cwd}/data/n1/admin_token`;
    assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
    const adminToken = (await Deno.readTextFile(file)).trim();
    await waitFor(
      () => node.output.includes("recorded the bootstrap admin token"),
      "the first leader to record the bootstrap token",
      20_000,
    );
    const admin = await open(adminToken);
    const made = await admin.call<TokenCreateResult>("registry.tokenCreate", {
      name: "billing-servers",
      permissions: ["bind:billing"],
    });
    assert.match(made.token, /^rft_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(made.permissions, ["bind:billing"]);
    const server = await open(made.token);
    const bound = await server.call<{ leaseId: string }>("registry.bind", {
      name: "billing",
      endpoint: { id: "b1", url: "tcp://127.0.0.1:9001" },
      grant: { ttlMs: 60_000 },
    });

    // Nothing but a TCP connection: every call but ping is refused.
    const anonymous = await open();
    await anonymous.call("rpc.ping");
    for (
      const [method, params] of [
        ["registry.lookup", { name: "billing" }],
        ["registry.memberRemove", { id: "n1" }],
        ["registry.unbind", { name: "billing", id: "b1" }],
        ["lease.revoke", { id: bound.leaseId }],
        ["registry.tokenCreate", { name: "x", permissions: ["admin"] }],
      ] as const
    ) {
      await refused(anonymous.call(method, params), -32012, /Unauthenticated/);
    }
    // A bind token keeps to its prefix and away from admin calls.
    await refused(
      server.call("registry.bind", {
        name: "search",
        endpoint: { url: "tcp://127.0.0.1:9002" },
      }),
      -32013,
      /needs bind:search.*ask an admin for a token with bind:search/,
    );
    await refused(
      server.call("registry.leaderTransfer", {}),
      -32013,
      /registry\.leaderTransfer needs admin/,
    );
    const found = await server.call<LookupResult>("registry.lookup", {
      name: "billing",
    });
    assert.deepEqual(
      found.endpoints.map((e) => [e.id, e.leaseId]),
      [["b1", bound.leaseId]],
    );
  } finally {
    for (const connection of connections) {
      connection.close();
      await connection.closed;
    }
    node.child.kill("SIGTERM");
    const code = await within(node.exit(), 15_000, "the registry to exit");
    assert.equal(code, 0, node.output);
    await Deno.remove(cwd, { recursive: true });
  }
});
