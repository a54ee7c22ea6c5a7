/**
 * End-to-end: a 3-node registry of real processes with TLS on every link
 * and auth on (`LocalCluster({ secure: true })`), attacked over raw
 * JSON-RPC: anonymous writes, a token beyond its permissions, plain-text
 * clients on the TLS ports; and the honest paths: an admin token, openssl
 * and the CLI.
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { dial as dialPlain } from "../rpc/transport/dial.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import { PERMISSION_DENIED, UNAUTHENTICATED } from "../rpc/errors.ts";
import type {
  BindResult,
  LeaseListResult,
  LeaseRevokeResult,
  LookupResult,
  MemberListResult,
} from "../protocol/registry.ts";

const ROOT = new URL("../", import.meta.url);

/** What an attacker's call could change: members, leader, bindings, leases. */
interface Observed {
  leader: string;
  members: string[];
  bindings: Record<string, string[]>;
  revision: number;
  leases: string[];
}

/** Asserts `call` is refused with `code`; @returns the error's `data`. */
async function refusedWith(
  call: Promise<unknown>,
  code: number,
  what: string,
): Promise<Record<string, unknown>> {
  let data: Record<string, unknown> = {};
  await assert.rejects(
    call,
    (error: { code: number; message: string; data?: unknown }) => {
      assert.equal(error.code, code, `${what}: ${error.message}`);
      data = (error.data ?? {}) as Record<string, unknown>;
      return true;
    },
    `${what} was not refused`,
  );
  return data;
}

/** Ms until a plain-text ping on `port` fails (it must fail). */
async function plainTextRefusalMs(port: number): Promise<number> {
  const started = performance.now();
  await assert.rejects(async () => {
    const connection = await dialPlain(`tcp://127.0.0.1:${port}`, {
      connectTimeoutMs: 5000,
    });
    try {
      await connection.call("rpc.ping", [], { timeoutMs: 10_000 });
    } finally {
      connection.close();
    }
  });
  return performance.now() - started;
}

function portOf(url: string): number {
  return Number(new URL(url.replace(/^tls:/, "http:")).port);
}

Deno.test("registry over TLS with auth: anonymous and under-permitted callers change nothing; plain text is refused; admin, openssl and the CLI work", async (t) => {
  const fileStarted = performance.now();
  const cluster = new LocalCluster({ secure: true });
  const connections: RpcConnection[] = [];
  const open = async (id: string, token?: string) => {
    const connection = await cluster.dialNode(id, { token, timeoutMs: 5000 });
    connections.push(connection);
    return connection;
  };
  try {
    await cluster.startRegistry(3);
    const leader = await cluster.waitForLeader(30_000);
    const followers = [...cluster.registry.keys()].filter((id) =>
      id !== leader
    );
    const admin = await open(leader, await cluster.adminToken(30_000));
    const [serverA, serverB, reader] = await Promise.all([
      cluster.createToken("server-a", ["bind:hello"]),
      cluster.createToken("server-b", ["bind:hello"]),
      cluster.createToken("reader", ["read:hello"]),
    ]);
    const a = await open(leader, serverA.token);
    const b = await open(leader, serverB.token);
    const bind = (connection: RpcConnection, id: string, port: number) =>
      connection.call<BindResult>("registry.bind", {
        name: "hello",
        endpoint: { id, url: `tls://127.0.0.1:${port}` },
        grant: { ttlMs: 120_000 },
      });
    const boundA = await bind(a, "a1", 1);
    const boundB = await bind(b, "b1", 2);
    const leaseB = boundB.leaseId!;

    const observe = async (): Promise<Observed> => {
      const members = await admin.call<MemberListResult>(
        "registry.memberList",
        [],
      );
      const lookup = await admin.call<LookupResult>("registry.lookup", {
        name: "hello",
      });
      const leases = await admin.call<LeaseListResult>("lease.list", []);
      return {
        leader: members.leader,
        members: members.members.map((m) => `${m.id}:${m.kind}:${m.peerUrl}`)
          .sort(),
        bindings: Object.fromEntries(
          lookup.endpoints.map((e) => [e.id, [e.state, e.leaseId ?? "-"]]),
        ),
        revision: lookup.revision,
        leases: leases.leases.map((l) => l.id).sort(),
      };
    };
    const before = await observe();
    assert.equal(before.members.length, 3, JSON.stringify(before));
    assert.deepEqual(Object.keys(before.bindings).sort(), ["a1", "b1"]);
    assert.deepEqual(before.leases, [boundA.leaseId!, leaseB].sort());

    await t.step(
      "six anonymous writes are refused UNAUTHENTICATED and change nothing",
      async () => {
        const anonymous = await open(leader);
        const attempts: Array<[string, Record<string, unknown>]> = [
          ["registry.memberRemove", { id: followers[0] }],
          ["registry.memberAdd", {
            id: "n9",
            peerUrl: "tcp://127.0.0.1:1",
            learner: true,
          }],
          ["registry.leaderTransfer", {}],
          ["registry.unbind", { name: "hello", id: "b1" }],
          ["registry.setState", { name: "hello", id: "b1", state: "draining" }],
          ["lease.revoke", { id: leaseB }],
        ];
        for (const [method, params] of attempts) {
          await refusedWith(
            anonymous.call(method, params),
            UNAUTHENTICATED,
            `anonymous ${method}`,
          );
        }
        assert.deepEqual(await observe(), before);
      },
    );

    await t.step(
      "a bind:hello token is refused PERMISSION_DENIED beyond its prefix, for others' leases and members, and changes nothing",
      async () => {
        const outside = await refusedWith(
          a.call("registry.bind", {
            name: "billing",
            endpoint: { id: "x1", url: "tls://127.0.0.1:3" },
            grant: { ttlMs: 60_000 },
          }),
          PERMISSION_DENIED,
          "bind:hello binding billing",
        );
        assert.equal(
          outside.permission,
          "bind:billing",
          JSON.stringify(outside),
        );
        const othersLease = await refusedWith(
          a.call("lease.revoke", { id: leaseB }),
          PERMISSION_DENIED,
          "bind:hello revoking another token's lease",
        );
        assert.equal(othersLease.method, "lease.revoke");
        assert.equal(
          othersLease.permission,
          "admin",
          JSON.stringify(othersLease),
        );
        const member = await refusedWith(
          a.call("registry.memberRemove", { id: followers[0] }),
          PERMISSION_DENIED,
          "bind:hello removing a member",
        );
        assert.equal(member.permission, "admin", JSON.stringify(member));
        assert.deepEqual(await observe(), before);
        const billing = await admin.call<LookupResult>("registry.lookup", {
          name: "billing",
        });
        assert.deepEqual(billing.endpoints, []);
      },
    );

    await t.step(
      "a read token's lookup hides the lease ids of others; owners and admins see theirs",
      async () => {
        const read = await open(followers[0], reader.token);
        const seen = await read.call<LookupResult>("registry.lookup", {
          name: "hello",
        });
        assert.deepEqual(
          seen.endpoints.map((e) => [e.id, e.leaseId]).sort(),
          [["a1", null], ["b1", null]],
        );
        const own = await a.call<LookupResult>("registry.lookup", {
          name: "hello",
        });
        assert.deepEqual(
          own.endpoints.map((e) => [e.id, e.leaseId]).sort(),
          [["a1", boundA.leaseId], ["b1", null]],
        );
        assert.deepEqual(before.bindings.b1, ["serving", leaseB]);
      },
    );

    await t.step(
      "a plain-text client is refused quickly on the TLS client port and on the peer port",
      async () => {
        const clientMs = await plainTextRefusalMs(
          portOf(cluster.registry.get(leader)!),
        );
        const peerMs = await plainTextRefusalMs(
          portOf(cluster.peers.get(leader)!),
        );
        console.log(
          `plain-text refusal: client port ${
            clientMs.toFixed(0)
          } ms, peer port ${peerMs.toFixed(0)} ms`,
        );
        assert.ok(clientMs < 3000, `client port took ${clientMs} ms`);
        assert.ok(peerMs < 3000, `peer port took ${peerMs} ms`);
      },
    );

    await t.step(
      "openssl s_client completes a verified handshake with the client port",
      async () => {
        const port = portOf(cluster.registry.get(leader)!);
        let output;
        try {
          output = await new Deno.Command("openssl", {
            args: [
              "s_client",
              "-connect",
              `127.0.0.1:${port}`,
              "-CAfile",
              await cluster.caFile(),
            ],
            stdin: "null",
            stdout: "piped",
            stderr: "piped",
            signal: AbortSignal.timeout(15_000),
          }).output();
        } catch (error) {
          if (error instanceof Deno.errors.NotFound) {
            console.log("SKIPPED: openssl is not installed");
            return;
          }
          throw error;
        }
        const text = new TextDecoder().decode(output.stdout);
        assert.match(text, /Verify return code: 0 \(ok\)/, text);
        assert.match(text, /^New, TLSv1\.[23], Cipher is /m, text);
      },
    );

    await t.step(
      "the CLI's status answers with every member with RAFTER_TOKEN, and exits 5 without",
      async () => {
        const env = Deno.env.toObject();
        for (const name of Object.keys(env)) {
          if (name.startsWith("RAFTER_")) delete env[name];
        }
        env.RAFTER_REGISTRY = cluster.registryUrls.join(",");
        env.RAFTER_CA = await cluster.caFile();
        const status = (token?: string) =>
          new Deno.Command(Deno.execPath(), {
            args: ["run", "-A", "cli/main.ts", "status"],
            cwd: ROOT.pathname,
            clearEnv: true,
            env: token === undefined ? env : { ...env, RAFTER_TOKEN: token },
            stdout: "piped",
            stderr: "piped",
            signal: AbortSignal.timeout(30_000),
          }).output();
        const [withToken, without] = await Promise.all([
          status(reader.token),
          status(),
        ]);
        const text = new TextDecoder().decode(withToken.stdout) +
          new TextDecoder().decode(withToken.stderr);
        assert.equal(withToken.code, 0, text);
        for (const id of cluster.registry.keys()) {
          assert.match(text, new RegExp(`\\b${id}\\b`), text);
        }
        const refusal = new TextDecoder().decode(without.stderr);
        assert.equal(without.code, 5, refusal);
        assert.match(refusal, /RAFTER_TOKEN|token/i, refusal);
      },
    );

    await t.step(
      "an admin token binds outside hello, revokes another token's lease and removes a member",
      async () => {
        await admin.call("registry.bind", {
          name: "billing",
          endpoint: { id: "x1", url: "tls://127.0.0.1:3" },
        });
        const revoked = await admin.call<LeaseRevokeResult>("lease.revoke", {
          id: leaseB,
        });
        // b1, the one binding on the lease, went with it.
        assert.equal(revoked.removed, 1, JSON.stringify(revoked));
        const removed = await admin.call<MemberListResult>(
          "registry.memberRemove",
          { id: followers[0] },
        );
        assert.deepEqual(
          removed.members.map((m) => m.id).sort(),
          [leader, followers[1]].sort(),
        );
        const after = await observe();
        assert.deepEqual(Object.keys(after.bindings), ["a1"]);
        assert.deepEqual(after.leases, [boundA.leaseId!]);
        const billing = await admin.call<LookupResult>("registry.lookup", {
          name: "billing",
        });
        assert.deepEqual(billing.endpoints.map((e) => e.id), ["x1"]);
      },
    );
  } finally {
    for (const connection of connections) connection.close();
    await cluster.stop();
    console.log(
      `registry_secure_e2e: ${
        ((performance.now() - fileStarted) / 1000).toFixed(1)
      } s`,
    );
  }
});
