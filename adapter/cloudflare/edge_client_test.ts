/**
 * Tests of edgeClient's tokens, with `cloudflare:sockets`' `connect`
 * played by Deno TCP: `token` and `serverToken` reach every request's
 * client, whose connections authenticate before their first call.
 */

import assert from "node:assert/strict";
import { AUTH_METHODS } from "../../protocol/auth.ts";
import {
  fakeAuthRegistry,
  tokenServer,
} from "../../testing/fake_auth_registry.ts";
import { edgeClient } from "./edge_client.ts";
import type { CloudflareConnect, CloudflareSocket } from "./tcp.ts";

/** `connect` of `cloudflare:sockets`, over Deno TCP. */
const denoConnect: CloudflareConnect = (address): CloudflareSocket => {
  const fromServer = new TransformStream<Uint8Array, Uint8Array>();
  const toServer = new TransformStream<Uint8Array, Uint8Array>();
  const opening = Deno.connect({ ...address, transport: "tcp" });
  const closed = opening.then(async (conn) => {
    await Promise.allSettled([
      conn.readable.pipeTo(fromServer.writable),
      toServer.readable.pipeTo(conn.writable),
    ]);
  });
  return {
    readable: fromServer.readable,
    writable: toServer.writable,
    opened: opening,
    closed,
    close: async () => {
      try {
        (await opening).close();
      } catch {
        // Already closed.
      }
    },
  };
};

Deno.test("edgeClient: each request's connections present token to the registry and serverToken to servers", async () => {
  const { server, calls } = tokenServer("s3cret");
  const registry = fakeAuthRegistry({ endpoints: { svc: [server.url] } });
  const rafter = edgeClient(registry.url, {
    connect: denoConnect,
    token: registry.admin,
    serverToken: "s3cret",
  });
  try {
    for (const text of ["one", "two"]) {
      const answer = await rafter.withRequest((client) =>
        client.call<string>("svc", "echo", [text])
      );
      assert.equal(answer, text);
    }
    // Two requests, two clients: each authenticated its own connections.
    assert.deepEqual(calls, [
      ["rpc.authenticate", "echo"],
      ["rpc.authenticate", "echo"],
    ]);
    // The first request looked the name up (the second took the cached list).
    assert.ok(registry.calls.length >= 1);
    for (const seen of registry.calls) {
      assert.equal(seen[0], AUTH_METHODS.authenticate);
      assert.ok(!seen.includes("rpc.authenticate"));
    }
  } finally {
    await server.close();
    await registry.close();
  }
});
