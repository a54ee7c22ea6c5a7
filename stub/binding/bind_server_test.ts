import assert from "node:assert/strict";
import { serve } from "../../adapter/deno/serve.ts";
import { endpoint } from "../../testing/cluster.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { RegistryClient } from "../registry_client/registry_client.ts";
import { bindServer } from "./bind_server.ts";

Deno.test("keep-alives go out every TTL / 3 however long each one takes", async () => {
  // A registry whose keep-alives take 300 ms to answer (a loaded leader;
  // within the client's attempt timeout of TTL / 9).
  const arrivals: number[] = [];
  const registryServer = serve({
    methods: {
      "registry.bind": () => ({
        revision: 1,
        name: "svc",
        endpoint: endpoint("s1", 9),
        leaseId: "L1",
        ttlMs: 3_000,
      }),
      "lease.keepAlive": async () => {
        arrivals.push(performance.now());
        await new Promise((resolve) => setTimeout(resolve, 300));
        return { id: "L1", ttlMs: 3_000 };
      },
      "lease.revoke": () => ({ revision: 2, removed: 1 }),
    },
  });
  const pool = new ConnectionPool();
  const registry = new RegistryClient([registryServer.url], pool);
  const binding = await bindServer(registry, "svc", "tcp://127.0.0.1:9", {
    id: "s1",
    ttlMs: 3_000,
  });
  try {
    while (arrivals.length < 4) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const gaps = arrivals.slice(1).map((at, i) => at - arrivals[i]);
    // Every 1000 ms: not 1000 ms after each answer (1300 ms apart), which
    // a leader whose clock runs fast (x2.5) counts as 3250 of its 3000.
    assert.ok(
      gaps.every((gap) => gap > 900 && gap < 1_150),
      `keep-alives ${gaps.map(Math.round).join(", ")} ms apart`,
    );
  } finally {
    await binding.close();
    registry.close();
    pool.close();
    await registryServer.close();
  }
});
