import assert from "node:assert/strict";
import { serve } from "../../adapter/deno/serve.ts";
import { endpoint } from "../../testing/cluster.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { RegistryClient } from "../registry_client/registry_client.ts";
import { bindServer } from "./bind_server.ts";
import { RpcError } from "../../rpc/errors.ts";
import { ID_IN_USE } from "../../protocol/registry.ts";

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

Deno.test("a local bind refused with ID_IN_USE rejects with the registry's error and revokes the lease it granted", async () => {
  const revoked: string[] = [];
  const data = {
    name: "svc",
    id: "s1",
    leaseId: "L0",
    url: "tcp://127.0.0.1:8",
    ttlMs: 3_000,
  };
  const registryServer = serve({
    methods: {
      "lease.grant": () => ({ id: "L1", ttlMs: 3_000, revision: 1 }),
      "registry.bind": () => {
        throw new RpcError(ID_IN_USE, "Id in use: endpoint s1", data);
      },
      "lease.revoke": ({ id }: { id: string }) => {
        revoked.push(id);
        return { revision: 2, removed: 0 };
      },
    },
  });
  const pool = new ConnectionPool();
  const registry = new RegistryClient([registryServer.url], pool);
  try {
    await assert.rejects(
      bindServer(registry, "svc", "tcp://127.0.0.1:9", {
        id: "s1",
        ttlMs: 3_000,
        scope: "local",
      }),
      (error: unknown) => {
        assert.ok(error instanceof RpcError);
        assert.equal(error.code, ID_IN_USE);
        assert.equal(error.message, "Id in use: endpoint s1");
        assert.deepEqual(error.data, data);
        return true;
      },
    );
    assert.deepEqual(revoked, ["L1"]);
  } finally {
    registry.close();
    pool.close();
    await registryServer.close();
  }
});

Deno.test("waitForIdMs: an id held by another live lease is bound again until that lease runs out (onIdInUse told once); past it, ID_IN_USE", async () => {
  let refusals = 2;
  let binds = 0;
  const registryServer = serve({
    methods: {
      "registry.bind": () => {
        binds++;
        if (refusals-- > 0) {
          throw new RpcError(ID_IN_USE, "Id in use: endpoint s1", {
            name: "svc",
            id: "s1",
          });
        }
        return {
          revision: 1,
          name: "svc",
          endpoint: endpoint("s1", 9),
          leaseId: "L1",
          ttlMs: 3_000,
        };
      },
      "lease.keepAlive": () => ({ id: "L1", ttlMs: 3_000 }),
      "lease.revoke": () => ({ revision: 2, removed: 1 }),
    },
  });
  const pool = new ConnectionPool();
  const registry = new RegistryClient([registryServer.url], pool);
  try {
    const told: string[] = [];
    const binding = await bindServer(registry, "svc", "tcp://127.0.0.1:9", {
      id: "s1",
      ttlMs: 3_000,
      drainMs: 0,
      waitForIdMs: 10_000,
      onIdInUse: (error) => told.push(error.message),
    });
    assert.equal(binds, 3);
    assert.deepEqual(told, ["Id in use: endpoint s1"]);
    await binding.close();
    refusals = 1_000;
    await assert.rejects(
      bindServer(registry, "svc", "tcp://127.0.0.1:9", {
        id: "s1",
        ttlMs: 3_000,
        waitForIdMs: 300,
      }),
      (error: unknown) => error instanceof RpcError && error.code === ID_IN_USE,
    );
  } finally {
    registry.close();
    pool.close();
    await registryServer.close();
  }
});
