/**
 * A wall-clock jump on the process of a registry client (a server keeping
 * its lease alive) neither cuts a call's retries short nor stretches them.
 */

import assert from "node:assert/strict";
import { serve } from "../../adapter/deno/serve.ts";
import { RpcError } from "../../rpc/errors.ts";
import { UNAVAILABLE, type UnavailableData } from "../../protocol/registry.ts";
import { shiftableWallClock, within } from "../../testing/time.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { RegistryClient } from "./registry_client.ts";

/** A node that answers keep-alives UNAVAILABLE (not applied) until `healthyAt` (performance.now). */
async function withNode(
  healthyAt: number,
  deadlineMs: number,
  test: (client: RegistryClient, wall: { offsetMs: number }) => Promise<void>,
) {
  const wall = shiftableWallClock();
  const server = serve({
    methods: {
      "lease.keepAlive": () => {
        if (performance.now() >= healthyAt) return { id: "L1", ttlMs: 3_000 };
        const data: UnavailableData = { retryAfterMs: 0, applied: false };
        throw new RpcError(UNAVAILABLE, "Unavailable: electing a leader", data);
      },
    },
  });
  const pool = new ConnectionPool();
  const client = new RegistryClient([server.url], pool, {
    deadlineMs,
    minBackoffMs: 10,
    maxBackoffMs: 20,
  });
  try {
    await test(client, wall);
  } finally {
    wall.restore();
    client.close();
    pool.close();
    await server.close();
  }
}

Deno.test("a wall clock jumping an hour forward does not end a keep-alive's retries early", async () => {
  await withNode(performance.now() + 400, 3_000, async (client, wall) => {
    const keepAlive = client.keepAlive("L1");
    await new Promise((resolve) => setTimeout(resolve, 50));
    wall.offsetMs = 3_600_000;
    assert.deepEqual(await within(keepAlive, 5_000, "the keep-alive"), {
      id: "L1",
      ttlMs: 3_000,
    });
  });
});

Deno.test("a wall clock stepped back an hour does not stretch a keep-alive's retries", async () => {
  await withNode(Infinity, 400, async (client, wall) => {
    const started = performance.now();
    const keepAlive = client.keepAlive("L1");
    await new Promise((resolve) => setTimeout(resolve, 50));
    wall.offsetMs = -3_600_000;
    await assert.rejects(
      within(keepAlive, 5_000, "the keep-alive to give up"),
      (error: unknown) => error instanceof RpcError,
    );
    const tookMs = performance.now() - started;
    assert.ok(tookMs < 3_000, `gave up after ${tookMs} ms`);
  });
});
