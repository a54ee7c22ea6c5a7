/**
 * Tests of `serverToken`: the pool's connections to servers call
 * `rpc.authenticate {token}` before anything else (calls wait for it), a
 * refused token fails the call with AuthenticationError, and the server
 * token never reaches the registry (nor the registry token a server).
 */

import assert from "node:assert/strict";
import { ConnectionError, UNAUTHENTICATED } from "../rpc/errors.ts";
import { serve } from "../adapter/deno/serve.ts";
import { AUTH_METHODS } from "../protocol/auth.ts";
import { within } from "../testing/time.ts";
import { connect } from "./client.ts";
import { ServerError } from "./call/call_errors.ts";
import { AuthenticationError, presentToken } from "./authenticate.ts";
import { ConnectionPool } from "./connection_pool.ts";
import {
  fakeAuthRegistry,
  tokenServer,
} from "../testing/fake_auth_registry.ts";

Deno.test("a pool with a handshake runs it first on each connection; calls wait for it", async () => {
  const { server, calls } = tokenServer("s3cret", 150);
  const pool = new ConnectionPool({
    handshake: async (connection) => {
      await connection.call("rpc.authenticate", { token: "s3cret" });
    },
  });
  try {
    const results = await within(
      Promise.all(
        ["a", "b", "c"].map(async (text) =>
          (await pool.get(server.url)).call("echo", [text])
        ),
      ),
      10_000,
      "three calls",
    );
    assert.deepEqual(results, ["a", "b", "c"]);
    assert.deepEqual(calls, [["rpc.authenticate", "echo", "echo", "echo"]]);
  } finally {
    pool.close();
    await server.close();
  }
});

Deno.test("serverToken: stub calls authenticate to servers with it, never to the registry", async () => {
  const { server, calls } = tokenServer("s3cret");
  const registry = fakeAuthRegistry({ endpoints: { svc: [server.url] } });
  const client = connect(registry.url, {
    token: registry.admin,
    serverToken: "s3cret",
    watch: false,
  });
  try {
    assert.equal(await client.call("svc", "echo", ["hi"]), "hi");
    assert.equal(await client.call("svc", "echo", ["again"]), "again");
    assert.deepEqual(calls, [["rpc.authenticate", "echo", "echo"]]);
    // The registry saw its own token only.
    for (const seen of registry.calls) {
      assert.equal(seen[0], AUTH_METHODS.authenticate);
      assert.ok(!seen.includes("rpc.authenticate"), `${seen}`);
    }
  } finally {
    client.close();
    await server.close();
    await registry.close();
  }
});

Deno.test("serverToken: a refused token fails the call with a ServerError carrying the refusal; no call is sent", async () => {
  const { server, calls } = tokenServer("s3cret");
  const registry = fakeAuthRegistry({ endpoints: { svc: [server.url] } });
  const client = connect(registry.url, {
    token: registry.admin,
    serverToken: "wrong",
    watch: false,
  });
  try {
    const error = await client.call("svc", "echo", ["hi"]).then(
      () => assert.fail("the call succeeded"),
      (e) => e,
    );
    assert.ok(error instanceof ServerError, String(error));
    assert.equal(error.code, UNAUTHENTICATED);
    assert.equal(error.endpoint, server.url);
    assert.match(error.message, /the server at \S+ refused the token/);
    assert.match(error.message, /serverToken/);
    assert.deepEqual(error.data, {
      url: server.url,
      tokenId: null,
      answer: { code: UNAUTHENTICATED, message: "Unauthenticated: bad token" },
    });
    // Not retried, and echo never reached the server.
    assert.deepEqual(calls, [["rpc.authenticate"]]);
  } finally {
    client.close();
    await server.close();
    await registry.close();
  }
});

Deno.test("without serverToken, servers get no rpc.authenticate", async () => {
  const seen: string[] = [];
  const plain = serve({
    methods: {
      "rpc.authenticate": () => seen.push("rpc.authenticate"),
      echo: (text: string) => (seen.push("echo"), text),
    },
  });
  const registry = fakeAuthRegistry({ endpoints: { svc: [plain.url] } });
  const client = connect(registry.url, { token: registry.admin, watch: false });
  try {
    assert.equal(await client.call("svc", "echo", ["hi"]), "hi");
    assert.deepEqual(seen, ["echo"]);
    assert.deepEqual(
      registry.calls.flat().filter((m) => m.startsWith("rpc.")),
      [],
    );
  } finally {
    client.close();
    await plain.close();
    await registry.close();
  }
});

Deno.test("a handshake the server refuses fails get() with its answer and no back-off; one never answered is a failed dial", async () => {
  const { server, calls } = tokenServer("s3cret");
  const refusing = new ConnectionPool({
    handshake: (connection) =>
      presentToken(connection, "server", "wrong", 2_000),
  });
  const silent = serve({
    methods: { "rpc.authenticate": () => new Promise(() => {}) },
  });
  const hanging = new ConnectionPool({
    handshake: (connection) =>
      presentToken(connection, "server", "s3cret", 100),
  });
  try {
    for (let i = 1; i <= 2; i++) {
      await assert.rejects(refusing.get(server.url), (error: Error) => {
        assert.ok(error instanceof AuthenticationError, String(error));
        return true;
      });
      // Not in a back-off: the next get() dials again.
      assert.equal(calls.length, i);
    }
    await assert.rejects(hanging.get(silent.url), (error: Error) => {
      assert.ok(error instanceof ConnectionError, String(error));
      assert.equal(error.written, false);
      assert.match(error.message, /handshake got no answer/);
      return true;
    });
    await assert.rejects(hanging.get(silent.url), /not redialing/);
  } finally {
    refusing.close();
    hanging.close();
    await server.close();
    await silent.close();
  }
});
