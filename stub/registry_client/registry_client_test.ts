import assert from "node:assert/strict";
import {
  CANCELLED,
  DEADLINE_EXCEEDED,
  INVALID_PARAMS,
  RpcError,
} from "../../rpc/errors.ts";
import { denoTcpDialer } from "../../adapter/deno/tcp.ts";
import { serve } from "../../adapter/deno/serve.ts";
import { UNAVAILABLE } from "../../protocol/registry.ts";
import { freePorts } from "../../testing/ports.ts";
import { TEST_SECRET } from "../../testing/cluster.ts";
import { waitFor } from "../../testing/time.ts";
import {
  type RegistryNode,
  startRegistryNode,
} from "../../testing/registry.ts";
import { connect } from "../client.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { RegistryClient } from "./registry_client.ts";

/** Three in-process registry nodes on fixed free ports. */
interface Cluster {
  /** Node id → client URL. */
  urls: Record<string, string>;
  nodes: Map<string, RegistryNode>;
  leader(): Promise<RegistryNode>;
  followers(): Promise<RegistryNode[]>;
  stopNode(id: string): Promise<void>;
}

async function withCluster(fn: (cluster: Cluster) => Promise<void>) {
  const root = await Deno.makeTempDir({ prefix: "rafter_registry_client_" });
  const ids = ["n1", "n2", "n3"];
  const ports = freePorts(6);
  const urls = Object.fromEntries(
    ids.map((id, i) => [id, `tcp://127.0.0.1:${ports[i]}`]),
  );
  const peers = Object.fromEntries(
    ids.map((id, i) => [id, `tcp://127.0.0.1:${ports[3 + i]}`]),
  );
  const nodes = new Map<string, RegistryNode>();
  const leader = () =>
    waitFor(
      () => {
        const running = [...nodes.values()];
        const leaders = running.filter((n) => n.raft.status.role === "leader");
        if (leaders.length !== 1) return null;
        // Settled: every running node follows it.
        const id = leaders[0].id;
        return running.every((n) => n.raft.status.leader === id)
          ? leaders[0]
          : null;
      },
      "one leader that every node knows",
      5_000,
    );
  const cluster: Cluster = {
    urls,
    nodes,
    leader,
    async followers() {
      const current = await leader();
      return [...nodes.values()].filter((n) => n !== current);
    },
    async stopNode(id) {
      await nodes.get(id)?.stop();
      nodes.delete(id);
    },
  };
  try {
    for (const [i, id] of ids.entries()) {
      nodes.set(
        id,
        await startRegistryNode({
          id,
          listen: { hostname: "127.0.0.1", port: ports[i] },
          peers,
          clusterSecret: TEST_SECRET,
          dataDir: `${root}/${id}`,
          tickMs: 20,
          electionTicks: 10,
        }),
      );
    }
    await fn(cluster);
  } finally {
    for (const node of nodes.values()) await node.stop();
    await Deno.remove(root, { recursive: true });
  }
}

const h1 = { id: "h1", url: "tcp://127.0.0.1:9001" };

Deno.test("a client given only a follower's URL follows the NOT_LEADER hint and learns the leader", async () => {
  await withCluster(async (cluster) => {
    const leader = await cluster.leader();
    const [follower] = await cluster.followers();
    const client = connect(follower.url);
    try {
      assert.equal((await client.bind("hello", h1)).revision, 1);
      assert.deepEqual(client.registry.urls, [follower.url, leader.url]);
      // The next write goes straight to the leader.
      assert.equal(
        (await client.bind("hello", { id: "h2", url: "tcp://127.0.0.1:9002" }))
          .revision,
        2,
      );
      assert.deepEqual(client.registry.urls, [follower.url, leader.url]);
      assert.deepEqual(await client.unbind("hello", "h2"), {
        revision: 3,
        removed: 1,
      });
    } finally {
      client.close();
    }
  });
});

Deno.test("a client whose first URL is dead moves on to the next", async () => {
  await withCluster(async (cluster) => {
    const leader = await cluster.leader();
    const [dead] = freePorts(1);
    const deadUrl = `tcp://127.0.0.1:${dead}`;
    const urls = [deadUrl, ...Object.values(cluster.urls)];
    const client = connect(urls);
    try {
      const started = Date.now();
      assert.equal((await client.bind("hello", h1)).revision, 1);
      assert.ok(Date.now() - started < 2_000, "no long wait on the dead URL");
      assert.deepEqual(client.registry.urls, urls);
      const found = await client.lookup("hello");
      assert.deepEqual(found.endpoints.map((e) => [e.id, e.url]), [[
        h1.id,
        h1.url,
      ]]);
      assert.equal(found.revision, 1);
      const status = await client.registry.status(leader.url);
      assert.equal(status.role, "leader");
      assert.equal(status.url, leader.url);
      assert.equal(status.revision, 1);
    } finally {
      client.close();
    }
  });
});

Deno.test("a lookup through a follower right after a bind through the leader sees it", async () => {
  await withCluster(async (cluster) => {
    const leader = await cluster.leader();
    const followers = await cluster.followers();
    const writer = connect(leader.url);
    const readers = followers.map((f) => connect(f.url));
    try {
      for (let i = 1; i <= 15; i++) {
        const endpoint = { id: `s${i}`, url: `tcp://127.0.0.1:${9000 + i}` };
        assert.equal((await writer.bind("svc", endpoint)).revision, i);
        for (const reader of readers) {
          const result = await reader.lookup("svc", { rotate: false });
          assert.equal(result.revision, i);
          assert.equal(result.endpoints.at(-1)?.url, endpoint.url);
          assert.equal(result.endpoints.length, i);
        }
      }
      // The readers never had to leave their follower.
      for (const [i, reader] of readers.entries()) {
        assert.deepEqual(reader.registry.urls, [followers[i].url]);
      }
    } finally {
      writer.close();
      for (const reader of readers) reader.close();
    }
  });
});

Deno.test("a lookup or list with call options sends none of them as params (the registry refuses unknown params)", async () => {
  await withCluster(async (cluster) => {
    const leader = await cluster.leader();
    const client = connect(leader.url);
    try {
      await client.bind("svc", { id: "s1", url: "tcp://127.0.0.1:9001" });
      const call = {
        deadlineMs: 5_000,
        attemptTimeoutMs: 2_000,
        signal: new AbortController().signal,
      };
      const found = await client.registry.lookup("svc", {
        ...call,
        rotate: false,
      });
      assert.deepEqual(found.endpoints.map((e) => e.id), ["s1"]);
      const listed = await client.registry.list("", call);
      assert.deepEqual(listed.names.map((n) => n.name), ["svc"]);
    } finally {
      client.close();
    }
  });
});

Deno.test("after the leader stops, a bind succeeds once a new leader is elected", async () => {
  await withCluster(async (cluster) => {
    const client = connect(Object.values(cluster.urls), { deadlineMs: 8_000 });
    try {
      const old = await cluster.leader();
      assert.equal((await client.bind("hello", h1)).revision, 1);
      await cluster.stopNode(old.id);
      const h2 = { id: "h2", url: "tcp://127.0.0.1:9002" };
      assert.equal((await client.bind("hello", h2)).revision, 2);
      const fresh = await cluster.leader();
      assert.notEqual(fresh.id, old.id);
      const found = await client.lookup("hello", { rotate: false });
      assert.deepEqual(found.endpoints.map((e) => e.id), ["h1", "h2"]);
      assert.equal(found.revision, 2);
      for (const node of cluster.nodes.values()) {
        await waitFor(() => node.state.revision === 2, `${node.id} to apply`);
        assert.deepEqual(node.state.bindings("hello").map((b) => b.id), [
          "h1",
          "h2",
        ]);
      }
    } finally {
      client.close();
    }
  });
});

Deno.test("when no registry URL accepts a connection the call fails fast with UNAVAILABLE naming the URLs and what to do", async () => {
  const urls = freePorts(3).map((port) => `tcp://127.0.0.1:${port}`);
  const client = connect(urls);
  try {
    const started = Date.now();
    await assert.rejects(client.bind("hello", h1), (error: unknown) => {
      assert.ok(error instanceof RpcError);
      assert.equal(error.code, UNAVAILABLE);
      assert.ok(
        error.message.startsWith(
          `Unavailable: no registry node accepted a connection for registry.bind (tried ${
            urls.join(", ")
          }); last error: cannot connect to tcp://127.0.0.1:`,
        ),
        error.message,
      );
      assert.match(
        error.message,
        /Start a registry \(deno task registry\) or check the registry URLs$/,
      );
      assert.deepEqual(error.data, { retryAfterMs: 1000, tried: urls });
      return true;
    });
    // Not the 15 s deadline: two rounds over the three URLs.
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 1_500, `took ${elapsed} ms`);
  } finally {
    client.close();
  }
});

Deno.test("with fail-fast off, a registry that never answers ends in DEADLINE_EXCEEDED listing the URLs tried", async () => {
  const urls = freePorts(2).map((port) => `tcp://127.0.0.1:${port}`);
  const client = connect(urls, { deadlineMs: 400, failFastRounds: Infinity });
  try {
    await assert.rejects(client.lookup("hello"), (error: unknown) => {
      assert.ok(error instanceof RpcError);
      assert.equal(error.code, DEADLINE_EXCEEDED);
      assert.match(
        error.message,
        new RegExp(
          `registry.lookup did not succeed on any registry node \\(${
            urls.join(", ")
          }\\)`,
        ),
      );
      return true;
    });
  } finally {
    client.close();
  }
});

Deno.test("reads are spread over every registry URL; writes stay on the leader", async () => {
  await withCluster(async (cluster) => {
    const leader = await cluster.leader();
    const dialed: string[] = [];
    const client = connect(Object.values(cluster.urls), {
      dialer: (url, options) => {
        dialed.push(url);
        return denoTcpDialer(url, options);
      },
    });
    try {
      for (let i = 0; i < 6; i++) await client.lookup("hello");
      assert.deepEqual(
        [...new Set(dialed)].sort(),
        Object.values(cluster.urls).sort(),
      );
      // Writes go to the leader (found through at most one hint) and stay.
      dialed.length = 0;
      for (let i = 0; i < 5; i++) {
        await client.bind("hello", {
          id: `w${i}`,
          url: `tcp://127.0.0.1:${9500 + i}`,
        });
      }
      assert.deepEqual(dialed, []);
      const status = await client.registry.status(leader.url);
      assert.equal(status.revision, 5);
    } finally {
      client.close();
    }
  });
});

Deno.test("close() cancels a registry call under way", async () => {
  const [port] = freePorts(1);
  const client = connect([`tcp://127.0.0.1:${port}`], {
    deadlineMs: 10_000,
    failFastRounds: Infinity,
  });
  const call = client.lookup("hello");
  await new Promise((resolve) => setTimeout(resolve, 100));
  client.close();
  await assert.rejects(call, { code: CANCELLED });
  await assert.rejects(client.lookup("hello"), { code: CANCELLED });
});

Deno.test("errors a retry cannot fix are thrown at once", async () => {
  await withCluster(async (cluster) => {
    const client = connect(Object.values(cluster.urls));
    try {
      await cluster.leader();
      const started = Date.now();
      await assert.rejects(
        client.bind("hello", { url: "http://127.0.0.1:9001" }),
        (error: unknown) => {
          assert.ok(error instanceof RpcError);
          assert.equal(error.code, INVALID_PARAMS);
          assert.equal(
            error.message,
            'Invalid params: "endpoint.url": invalid endpoint URL "http://127.0.0.1:9001": expected tcp://host:port with a port in 1..65535',
          );
          return true;
        },
      );
      await assert.rejects(
        client.registry.call("registry.nope" as "registry.list", {}),
        { code: -32601 },
      );
      assert.ok(Date.now() - started < 1_000);
    } finally {
      client.close();
    }
  });
});

Deno.test("an aborted registry call rejects with CANCELLED", async () => {
  const urls = freePorts(2).map((port) => `tcp://127.0.0.1:${port}`);
  const client = connect(urls, { deadlineMs: 5_000, failFastRounds: Infinity });
  try {
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 100);
    await assert.rejects(
      client.bind("hello", h1, { signal: controller.signal }),
      (error: unknown) => {
        assert.ok(error instanceof RpcError);
        assert.equal(error.code, CANCELLED);
        assert.equal(
          error.message,
          "Cancelled: the caller aborted registry.bind",
        );
        return true;
      },
    );
    assert.ok(Date.now() - started < 1_000);
    await assert.rejects(
      client.lookup("hello", { signal: AbortSignal.abort() }),
      { code: CANCELLED },
    );
  } finally {
    client.close();
  }
});

Deno.test("an abort during the backoff between rounds ends the call at once", async () => {
  // One dead URL: every attempt fails fast, then the client backs off.
  const [port] = freePorts(1);
  const client = connect([`tcp://127.0.0.1:${port}`], {
    deadlineMs: 10_000,
    failFastRounds: Infinity,
  });
  try {
    const controller = new AbortController();
    const call = client.lookup("hello", { signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const aborted = Date.now();
    controller.abort();
    await assert.rejects(call, { code: CANCELLED });
    assert.ok(Date.now() - aborted < 200, "CANCELLED came late");
  } finally {
    client.close();
  }
});

Deno.test("a registry URL that cannot work is refused at once, and URLs are normalised", () => {
  assert.throws(
    () => new RegistryClient(["http://127.0.0.1:7001"], new ConnectionPool()),
    {
      name: "TypeError",
      message:
        'invalid endpoint URL "http://127.0.0.1:7001": expected tcp://host:port with a port in 1..65535',
    },
  );
  const client = new RegistryClient(
    ["127.0.0.1:7001", "tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"],
    new ConnectionPool(),
  );
  assert.deepEqual(client.urls, [
    "tcp://127.0.0.1:7001",
    "tcp://127.0.0.1:7002",
  ]);
});

Deno.test("a registry client needs at least one URL", () => {
  assert.throws(() => new RegistryClient([], new ConnectionPool()), {
    name: "TypeError",
    message: "give at least one registry URL (tcp://host:port)",
  });
  assert.throws(() => connect([]), TypeError);
});

Deno.test("without a quorum, a registry read ends with the node's explanation, and a stub still finds its servers from one node", async () => {
  await withCluster(async (cluster) => {
    const server = serve({ methods: { who: () => "s1" } });
    const admin = connect(Object.values(cluster.urls));
    try {
      await admin.bind("svc", { id: "s1", url: server.url });
      const leader = await cluster.leader();
      // Every node has applied the bind before two of them stop.
      for (const node of cluster.nodes.values()) {
        await waitFor(() => node.state.revision === 1, `${node.id} to apply`);
      }
      const survivor = [...cluster.nodes.values()].find((n) => n !== leader)!;
      for (const id of [...cluster.nodes.keys()]) {
        if (id !== survivor.id) await cluster.stopNode(id);
      }
      const client = connect(Object.values(cluster.urls), {
        deadlineMs: 2_500,
      });
      try {
        await assert.rejects(client.lookup("svc"), (error: unknown) => {
          assert.ok(error instanceof RpcError);
          assert.match(
            error.message,
            /last error: Unavailable: .*pass consistency: "serializable" for a possibly stale answer/,
          );
          return true;
        });
        // The stub's map takes one node's (serializable) answer instead.
        assert.equal(await client.call("svc", "who"), "s1");
      } finally {
        client.close();
      }
    } finally {
      admin.close();
      await server.close();
    }
  });
});
