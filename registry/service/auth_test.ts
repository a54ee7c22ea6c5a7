import assert from "node:assert/strict";
import {
  LIMIT_EXCEEDED,
  PERMISSION_DENIED,
  UNAUTHENTICATED,
} from "../../rpc/errors.ts";
import type {
  AuthenticateResult,
  AuthStatusResult,
  TokenListResult,
} from "../../protocol/auth.ts";
import type {
  BindResult,
  LeaseGrantResult,
  LeaseListResult,
  ListResult,
  LookupResult,
  WatchEventsNotification,
} from "../../protocol/registry.ts";
import { dial } from "../../rpc/transport/dial.ts";
import { waitFor, within } from "../../testing/time.ts";
import { rejectsWith, withAuthNode, withSingleNode } from "./_test_util.ts";

const URL_A = "tcp://127.0.0.1:9001";
const URL_B = "tcp://127.0.0.1:9002";

Deno.test("auth: the six anonymous operations of issue #16 are refused UNAUTHENTICATED and change nothing", async () => {
  await withAuthNode(async ({ node, anonymous, makeToken, connect }) => {
    const server = await connect(
      (await makeToken("billing", ["bind:billing"])).token,
    );
    const { id: leaseId } = await server.call<LeaseGrantResult>("lease.grant", {
      ttlMs: 60_000,
    });
    await server.call("registry.bind", {
      name: "billing",
      endpoint: { id: "b1", url: URL_A },
      leaseId,
    });
    const before = JSON.stringify(node.state.snapshot());
    const voters = node.raft.configuration.voters.join(",");
    const refusals: [string, Record<string, unknown>][] = [
      ["registry.memberRemove", { id: "n1" }],
      ["registry.memberAdd", { id: "evil", peerUrl: "tcp://127.0.0.1:9" }],
      ["registry.leaderTransfer", {}],
      ["registry.unbind", { name: "billing", id: "b1" }],
      ["registry.setState", { name: "billing", id: "b1", state: "draining" }],
      ["lease.revoke", { id: leaseId }],
    ];
    for (const [method, params] of refusals) {
      await rejectsWith(
        anonymous.call(method, params),
        UNAUTHENTICATED,
        new RegExp(
          `^Unauthenticated: ${
            method.replace(".", "\\.")
          } needs a token: auth is on and this connection has presented none; set RAFTER_TOKEN`,
        ),
      );
    }
    // Reads too; rpc.ping is the one call left open.
    await rejectsWith(
      anonymous.call("registry.lookup", { name: "billing" }),
      UNAUTHENTICATED,
      /needs a token/,
    );
    await anonymous.call("rpc.ping");
    assert.equal(JSON.stringify(node.state.snapshot()), before);
    assert.equal(node.raft.configuration.voters.join(","), voters);
    assert.deepEqual(node.raft.configuration.learners, []);
    assert.equal(node.raft.status.role, "leader");
  });
});

Deno.test("auth: a bind:billing token binds under billing only, and cannot touch another token's endpoints and leases", async () => {
  await withAuthNode(async ({ makeToken, connect, admin }) => {
    const one = await connect((await makeToken("one", ["bind:billing"])).token);
    const two = await connect((await makeToken("two", ["bind:billing"])).token);
    await assert.rejects(
      one.call("registry.bind", { name: "search", endpoint: { url: URL_A } }),
      (error: { code: number; message: string; data: unknown }) => {
        assert.equal(error.code, PERMISSION_DENIED);
        assert.match(
          error.message,
          /^Permission denied: registry\.bind on "search" needs bind:search, which token "one" \([0-9a-f]{16}\) lacks \(it has bind:billing\); ask an admin for a token with bind:search$/,
        );
        assert.deepEqual(error.data, {
          method: "registry.bind",
          permission: "bind:search",
          name: "search",
        });
        return true;
      },
    );
    const { id: leaseId } = await one.call<LeaseGrantResult>("lease.grant", {
      ttlMs: 60_000,
    });
    await one.call("registry.bind", {
      name: "billing",
      endpoint: { id: "b1", url: URL_A },
      leaseId,
    });
    const ownerDenied = (method: string) =>
      new RegExp(
        `^Permission denied: ${
          method.replace(".", "\\.")
        } on .*, which another token .* made; only its owner or an admin token may change it$`,
      );
    // The other token of the same permission may not take them over.
    await rejectsWith(
      two.call("lease.revoke", { id: leaseId }),
      PERMISSION_DENIED,
      ownerDenied("lease.revoke"),
      { method: "lease.revoke", permission: "admin" },
    );
    await rejectsWith(
      two.call("lease.keepAlive", { id: leaseId }),
      PERMISSION_DENIED,
      ownerDenied("lease.keepAlive"),
    );
    await rejectsWith(
      two.call("lease.timeToLive", { id: leaseId }),
      PERMISSION_DENIED,
      ownerDenied("lease.timeToLive"),
    );
    await rejectsWith(
      two.call("registry.unbind", { name: "billing", id: "b1" }),
      PERMISSION_DENIED,
      ownerDenied("registry.unbind"),
      { method: "registry.unbind", permission: "admin", name: "billing" },
    );
    await rejectsWith(
      two.call("registry.setState", {
        name: "billing",
        id: "b1",
        state: "draining",
      }),
      PERMISSION_DENIED,
      ownerDenied("registry.setState"),
    );
    await rejectsWith(
      two.call("registry.bind", {
        name: "billing",
        endpoint: { id: "b1", url: URL_B },
      }),
      PERMISSION_DENIED,
      ownerDenied("registry.bind"),
    );
    await rejectsWith(
      two.call("registry.bind", {
        name: "billing",
        endpoint: { id: "b2", url: URL_B },
        leaseId,
      }),
      PERMISSION_DENIED,
      ownerDenied("registry.bind"),
    );
    await rejectsWith(
      one.call("registry.memberRemove", { id: "n1" }),
      PERMISSION_DENIED,
      /registry\.memberRemove needs admin, which token "one"/,
      { method: "registry.memberRemove", permission: "admin" },
    );
    await rejectsWith(
      one.call("registry.tokenCreate", { name: "x", permissions: ["admin"] }),
      PERMISSION_DENIED,
      /registry\.tokenCreate needs admin/,
    );
    // lease.list shows each token its own leases.
    const listed = await two.call<LeaseListResult>("lease.list");
    assert.deepEqual(listed.leases, []);
    const own = await one.call<LeaseListResult>("lease.list");
    assert.deepEqual(own.leases.map((lease) => lease.id), [leaseId]);
    // The owner may; and the endpoint is still there after every refusal.
    const looked = await one.call<LookupResult>("registry.lookup", {
      name: "billing",
      includeUnhealthy: true,
    });
    assert.deepEqual(
      looked.endpoints.map((e) => [e.id, e.url, e.state]),
      [["b1", URL_A, "serving"]],
    );
    await one.call("registry.setState", {
      name: "billing",
      id: "b1",
      state: "draining",
    });
    // An admin may act on anything of anyone.
    const removed = await admin.call<{ removed: number }>("lease.revoke", {
      id: leaseId,
    });
    assert.equal(removed.removed, 1);
  });
});

Deno.test("auth: an admin token may unbind, drain and revoke what others made", async () => {
  await withAuthNode(async ({ makeToken, connect, admin }) => {
    const one = await connect((await makeToken("one", ["bind:*"])).token);
    const bound = await one.call<BindResult>("registry.bind", {
      name: "billing",
      endpoint: { id: "b1", url: URL_A },
      grant: { ttlMs: 60_000 },
    });
    await admin.call("registry.setState", {
      name: "billing",
      id: "b1",
      state: "draining",
    });
    const unbound = await admin.call<{ removed: number }>("registry.unbind", {
      name: "billing",
      id: "b1",
    });
    assert.equal(unbound.removed, 1);
    const revoked = await admin.call<{ removed: number }>("lease.revoke", {
      id: bound.leaseId,
    });
    assert.equal(revoked.removed, 0);
  });
});

Deno.test("auth: lookups, lists and watches show a lease id only to its owner and to admins", async () => {
  const events: WatchEventsNotification[] = [];
  await withAuthNode(async ({ node, makeToken, connect, admin }) => {
    const serverToken = (await makeToken("server", ["bind:billing"])).token;
    const reader = await makeToken("reader", ["read:billing"]);
    const server = await connect(serverToken);
    const watcher = await dial(node.url, {
      onNotification: (method, params) => {
        if (method === "registry.events") {
          events.push(params as unknown as WatchEventsNotification);
        }
      },
    });
    try {
      await watcher.call("registry.authenticate", { token: reader.token });
      await watcher.call("registry.watch", { prefix: "billing" });
      const bound = await server.call<BindResult>("registry.bind", {
        name: "billing",
        endpoint: { id: "b1", url: URL_A },
        grant: { ttlMs: 60_000 },
      });
      assert.match(bound.leaseId!, /^[0-9a-f]{16}$/);
      const leaseOf = async (connection: typeof admin) =>
        (await connection.call<LookupResult>("registry.lookup", {
          name: "billing",
        })).endpoints[0].leaseId;
      const readerConnection = await connect(reader.token);
      assert.equal(await leaseOf(readerConnection), null);
      assert.equal(await leaseOf(server), bound.leaseId);
      assert.equal(await leaseOf(admin), bound.leaseId);
      const listed = await readerConnection.call<ListResult>("registry.list", {
        endpoints: true,
      });
      assert.deepEqual(
        listed.names.map((n) => [n.name, n.endpoints![0].leaseId]),
        [["billing", null]],
      );
      await waitFor(() => events.some((e) => e.events.length > 0), "an event");
      const put = events.find((e) => e.events.length > 0)!.events[0];
      assert.equal(put.endpoint.id, "b1");
      assert.equal(put.endpoint.leaseId, null);
    } finally {
      watcher.close();
      await watcher.closed;
    }
  });
});

Deno.test("auth: reads need read on the name; list answers only the names the token may read", async () => {
  await withAuthNode(async ({ makeToken, connect, admin }) => {
    for (const name of ["billing", "billing.pay", "search"]) {
      await admin.call("registry.bind", { name, endpoint: { url: URL_A } });
    }
    const reader = await connect(
      (await makeToken("r", ["read:billing"])).token,
    );
    const listed = await reader.call<ListResult>("registry.list", {});
    assert.deepEqual(listed.names.map((n) => n.name), [
      "billing",
      "billing.pay",
    ]);
    await rejectsWith(
      reader.call("registry.lookup", { name: "search" }),
      PERMISSION_DENIED,
      /^Permission denied: registry\.lookup on "search" needs read:search/,
      { method: "registry.lookup", permission: "read:search", name: "search" },
    );
    await rejectsWith(
      reader.call("registry.watch", { prefix: "" }),
      PERMISSION_DENIED,
      /registry\.watch needs read:\*/,
    );
    await reader.call("registry.watch", { prefix: "billing.p" });
    await rejectsWith(
      reader.call("registry.bind", {
        name: "billing",
        endpoint: { url: URL_B },
      }),
      PERMISSION_DENIED,
      /needs bind:billing/,
    );
    await rejectsWith(
      reader.call("lease.grant", { ttlMs: 60_000 }),
      PERMISSION_DENIED,
      /lease\.grant needs bind:<prefix>/,
    );
    // A valid token is enough for status, memberList, authStatus.
    await reader.call("registry.status");
    await reader.call("registry.memberList");
    const status = await reader.call<AuthStatusResult>("registry.authStatus");
    assert.equal(status.enabled, true);
    assert.equal(status.enforcedByNode, true);
    assert.equal(status.you?.name, "r");
  });
});

Deno.test("auth: a revoked token loses access at its next call, and its watches end", async () => {
  const cancelled = Promise.withResolvers<unknown>();
  await withAuthNode(async ({ node, makeToken, admin }) => {
    const made = await makeToken("soon-gone", ["read:*"]);
    const connection = await dial(node.url, {
      onNotification: (method, params) => {
        if (method === "registry.watchCancelled") cancelled.resolve(params);
      },
    });
    try {
      const you = await connection.call<AuthenticateResult>(
        "registry.authenticate",
        { token: made.token },
      );
      assert.deepEqual(you, {
        tokenId: made.tokenId,
        name: "soon-gone",
        permissions: ["read:*"],
        createdAt: made.createdAt,
        admin: false,
      });
      await connection.call("registry.watch", { prefix: "", watchId: "w" });
      await connection.call("registry.lookup", { name: "billing" });
      const revoked = await admin.call<{ revoked: boolean }>(
        "registry.tokenRevoke",
        { tokenId: made.tokenId },
      );
      assert.equal(revoked.revoked, true);
      await rejectsWith(
        connection.call("registry.lookup", { name: "billing" }),
        UNAUTHENTICATED,
        `Unauthenticated: this connection's token ${made.tokenId} was revoked; authenticate with another token (ask an admin for one)`,
      );
      const notice = await cancelled.promise as {
        watchId: string;
        message: string;
      };
      assert.equal(notice.watchId, "w");
      assert.match(notice.message, /no longer permits read on ""/);
      // And it cannot authenticate again.
      await rejectsWith(
        connection.call("registry.authenticate", { token: made.token }),
        UNAUTHENTICATED,
        /is not known to this registry/,
      );
      const list = await admin.call<TokenListResult>("registry.tokenList");
      assert.deepEqual(list.tokens.map((t) => t.name), ["bootstrap"]);
    } finally {
      connection.close();
      await connection.closed;
    }
  });
});

Deno.test("auth: authenticate refuses a wrong secret of a real token id, and a malformed token", async () => {
  await withAuthNode(async ({ anonymous, adminToken }) => {
    const forged = adminToken.slice(0, -4) +
      (adminToken.endsWith("AAAA") ? "BBBB" : "AAAA");
    await rejectsWith(
      anonymous.call("registry.authenticate", { token: forged }),
      UNAUTHENTICATED,
      /is not known to this registry/,
    );
    await rejectsWith(
      anonymous.call("registry.authenticate", { token: "hunter2" }),
      UNAUTHENTICATED,
      /not a registry token/,
    );
    await rejectsWith(
      anonymous.call("registry.status"),
      UNAUTHENTICATED,
      /needs a token/,
    );
  });
});

Deno.test("auth: authEnable needs an admin token even with auth off; then anonymous calls are refused", async () => {
  await withAuthNode(
    async ({ anonymous, admin, adminTokenFile, makeToken, connect }) => {
      // Auth off: everything as before auth, but tokens and the switch.
      await anonymous.call("registry.bind", {
        name: "billing",
        endpoint: { url: URL_A },
      });
      await rejectsWith(
        anonymous.call("registry.authEnable"),
        UNAUTHENTICATED,
        `Unauthenticated: registry.authEnable needs an admin token, and this connection has presented none; set RAFTER_TOKEN to an admin token (such as the bootstrap token, written to ${adminTokenFile} on the node that bootstrapped the cluster) or call registry.authenticate with it first`,
      );
      await rejectsWith(
        anonymous.call("registry.tokenCreate", {
          name: "mine",
          permissions: ["admin"],
        }),
        UNAUTHENTICATED,
        /needs an admin token/,
      );
      const binder = await connect((await makeToken("b", ["bind:*"])).token);
      await rejectsWith(
        binder.call("registry.authEnable"),
        PERMISSION_DENIED,
        /registry\.authEnable needs admin/,
      );
      const before = await anonymous.call<AuthStatusResult>(
        "registry.authStatus",
      );
      assert.equal(before.enabled, false);
      const status = await admin.call<AuthStatusResult>("registry.authEnable");
      assert.deepEqual(
        [status.enabled, status.enabledInState, status.enforcedByNode],
        [true, true, false],
      );
      assert.equal(status.you?.admin, true);
      await rejectsWith(
        anonymous.call("registry.lookup", { name: "billing" }),
        UNAUTHENTICATED,
        /needs a token/,
      );
      // The anonymous binding is nobody's: only an admin may remove it.
      await rejectsWith(
        binder.call("registry.unbind", { name: "billing", id: URL_A }),
        PERMISSION_DENIED,
        /another token \(or an anonymous client, before auth was on\)/,
      );
      // The last admin token cannot be revoked while auth is on.
      const tokens = await admin.call<TokenListResult>("registry.tokenList");
      const bootstrap = tokens.tokens.find((t) => t.name === "bootstrap")!;
      await rejectsWith(
        admin.call("registry.tokenRevoke", { tokenId: bootstrap.tokenId }),
        -32602,
        /is the last admin token and auth is on/,
      );
      const off = await admin.call<AuthStatusResult>("registry.authDisable");
      assert.equal(off.enabled, false);
      await anonymous.call("registry.lookup", { name: "billing" });
    },
    { auth: false },
  );
});

Deno.test("limits: an abusive client hits maxWatchesPerConnection, another connection carries on", async () => {
  await withSingleNode(async (node, connection) => {
    for (let i = 0; i < 3; i++) {
      await connection.call("registry.watch", { prefix: `p${i}` });
    }
    await rejectsWith(
      connection.call("registry.watch", { prefix: "p3" }),
      LIMIT_EXCEEDED,
      /^Limit exceeded: this connection has 3 watches open, the most a registry node allows one connection \(maxWatchesPerConnection, --max-watches-per-connection\)/,
      { limit: "maxWatchesPerConnection", value: 3 },
    );
    const other = await dial(node.url);
    try {
      await other.call("registry.watch", { prefix: "p0" });
    } finally {
      other.close();
      await other.closed;
    }
  }, { node: { maxWatchesPerConnection: 3 } });
});

Deno.test("limits: a lease carries at most maxBindingsPerLease bindings; rebinding and other leases carry on", async () => {
  await withSingleNode(async (_node, connection) => {
    const { id } = await connection.call<LeaseGrantResult>("lease.grant", {
      ttlMs: 60_000,
    });
    for (const port of [9001, 9002]) {
      await connection.call("registry.bind", {
        name: "spam",
        endpoint: { url: `tcp://127.0.0.1:${port}` },
        leaseId: id,
      });
    }
    await rejectsWith(
      connection.call("registry.bind", {
        name: "spam",
        endpoint: { url: "tcp://127.0.0.1:9003" },
        leaseId: id,
      }),
      LIMIT_EXCEEDED,
      `Limit exceeded: lease ${id} already carries 2 bindings, the most this registry allows (maxBindingsPerLease, --max-bindings-per-lease 2); bind the rest with another lease`,
      { limit: "maxBindingsPerLease", value: 2 },
    );
    // The same binding again is no new one.
    await connection.call("registry.bind", {
      name: "spam",
      endpoint: { url: "tcp://127.0.0.1:9002", weight: 3 },
      leaseId: id,
    });
    const other = await connection.call<LeaseGrantResult>("lease.grant", {
      ttlMs: 60_000,
    });
    await connection.call("registry.bind", {
      name: "spam",
      endpoint: { url: "tcp://127.0.0.1:9003" },
      leaseId: other.id,
    });
    const looked = await connection.call<LookupResult>("registry.lookup", {
      name: "spam",
    });
    assert.equal(looked.total, 3);
  }, { node: { maxBindingsPerLease: 2 } });
});

Deno.test("limits: the registry holds at most maxTokens tokens", async () => {
  await withAuthNode(async ({ admin, makeToken }) => {
    await makeToken("second", ["read:*"]);
    await rejectsWith(
      admin.call("registry.tokenCreate", {
        name: "third",
        permissions: ["read:*"],
      }),
      LIMIT_EXCEEDED,
      /^Limit exceeded: the registry holds 2 tokens, the most allowed \(maxTokens 2\)/,
      { limit: "maxTokens", value: 2 },
    );
    // Revoking one makes room.
    const list = await admin.call<TokenListResult>("registry.tokenList");
    const second = list.tokens.find((t) => t.name === "second")!;
    await admin.call("registry.tokenRevoke", { tokenId: second.tokenId });
    await makeToken("third", ["read:*"]);
  }, { maxTokens: 2 });
});

Deno.test("auth off: an authenticated client's bindings and leases record its token, so they stay its own once auth is on", async () => {
  await withAuthNode(async ({ node, makeToken, connect, admin }) => {
    const made = await makeToken("early", ["bind:billing"]);
    const early = await connect(made.token);
    const bound = await early.call<BindResult>("registry.bind", {
      name: "billing",
      endpoint: { id: "b1", url: URL_A },
      grant: { ttlMs: 60_000 },
    });
    assert.equal(node.state.lease(bound.leaseId!)?.owner, made.tokenId);
    assert.equal(node.state.binding("billing", "b1")?.owner, made.tokenId);
    await admin.call("registry.authEnable");
    await early.call("lease.keepAlive", { id: bound.leaseId });
    await early.call("registry.unbind", { name: "billing", id: "b1" });
  }, { auth: false });
});

Deno.test("with auth on, a connection that does not authenticate within authTimeoutMs is closed; one that did stays", async () => {
  await withAuthNode(async ({ connect, adminToken }) => {
    const started = performance.now();
    const anonymous = await connect();
    const signedIn = await connect(adminToken);
    await within(anonymous.closed, 5_000, "the anonymous connection to close");
    const closedAfter = performance.now() - started;
    assert.ok(closedAfter >= 250, `closed after ${closedAfter} ms, too early`);
    // The one that authenticated is still served, past the deadline.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const status = await signedIn.call<{ id: string }>("registry.status");
    assert.equal(status.id, "n1");
  }, { authTimeoutMs: 300 });
});
