/**
 * Honest outcomes (issue 17): a registry write that may have been applied
 * is not sent again when a second one would not be the same.
 */

import assert from "node:assert/strict";
import { serve } from "../../adapter/deno/serve.ts";
import { RpcError } from "../../rpc/errors.ts";
import { UNAVAILABLE, type UnavailableData } from "../../protocol/registry.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { RegistryClient } from "./registry_client.ts";

/** A registry node that answers every write UNAVAILABLE with `applied`. */
function flakyNode(applied: false | "unknown") {
  const calls: string[] = [];
  const answer = (method: string) => () => {
    calls.push(method);
    const data: UnavailableData = { retryAfterMs: 0, applied };
    throw new RpcError(UNAVAILABLE, "Unavailable: timed out", data);
  };
  const server = serve({
    methods: {
      "lease.grant": answer("lease.grant"),
      "registry.unbind": answer("registry.unbind"),
    },
  });
  return { server, calls };
}

async function withClient(
  applied: false | "unknown",
  test: (client: RegistryClient, calls: string[]) => Promise<void>,
) {
  const { server, calls } = flakyNode(applied);
  const pool = new ConnectionPool();
  const client = new RegistryClient([server.url], pool, {
    deadlineMs: 600,
    minBackoffMs: 10,
    maxBackoffMs: 20,
  });
  try {
    await test(client, calls);
  } finally {
    client.close();
    pool.close();
    await server.close();
  }
}

Deno.test("a lease.grant that may have been applied is not sent again: it ends UNAVAILABLE with applied unknown", async () => {
  await withClient("unknown", async (client, calls) => {
    await assert.rejects(client.grantLease(5_000), (error: unknown) => {
      assert.ok(error instanceof RpcError);
      assert.equal(error.code, UNAVAILABLE);
      assert.equal((error.data as UnavailableData).applied, "unknown");
      assert.match(error.message, /lease\.grant may have been applied/);
      return true;
    });
    assert.deepEqual(calls, ["lease.grant"]);
  });
});

Deno.test("writes that repeat harmlessly, or that were not applied, are retried as before", async () => {
  // Idempotent: retried until the deadline although it may have applied.
  await withClient("unknown", async (client, calls) => {
    await assert.rejects(
      client.call("registry.unbind", { name: "a", id: "a-1" }),
    );
    assert.ok(calls.length > 1, String(calls.length));
  });
  // Not applied: a grant is retried too.
  await withClient(false, async (client, calls) => {
    await assert.rejects(client.grantLease(5_000));
    assert.ok(calls.length > 1, String(calls.length));
  });
});
