import assert from "node:assert/strict";
import { INVALID_PARAMS } from "../../rpc/errors.ts";
import { ID_IN_USE } from "../../protocol/registry.ts";
import { serve } from "../../adapter/deno/serve.ts";
import { freePorts } from "../../testing/ports.ts";
import { waitFor } from "../../testing/time.ts";
import type {
  BindResult,
  Endpoint,
  ListResult,
  LookupResult,
} from "../../protocol/registry.ts";
import { BIND_SHAPE, ids, rejectsWith, withSingleNode } from "./_test_util.ts";

Deno.test("bind, lookup and unbind by name and by position, with full endpoints and the revision read", async () => {
  await withSingleNode(async (node, connection) => {
    const h1 = { id: "h1", url: "tcp://127.0.0.1:9001" };
    const bound = await connection.call<BindResult>("registry.bind", {
      name: "hello",
      endpoint: h1,
    });
    assert.deepEqual(bound, {
      revision: 1,
      name: "hello",
      leaseId: null,
      endpoint: {
        id: "h1",
        url: h1.url,
        attrs: {},
        weight: 1,
        zone: null,
        leaseId: null,
        createRevision: 1,
        modRevision: 1,
        state: "serving",
        load: null,
        scope: "global",
        check: null,
      },
    });
    // By position; the id defaults to the URL, spelt one way.
    const byPosition = await connection.call<BindResult>("registry.bind", [
      "hello",
      { url: "127.0.0.1:9002" },
    ]);
    assert.equal(byPosition.endpoint.id, "tcp://127.0.0.1:9002");
    assert.equal(byPosition.revision, 2);
    // The same binding again changes nothing.
    assert.equal(
      (await connection.call<BindResult>("registry.bind", ["hello", h1]))
        .revision,
      2,
    );
    const lookup = await connection.call<LookupResult>("registry.lookup", {
      name: "hello",
      rotate: false,
    });
    assert.deepEqual(ids(lookup), ["h1", "tcp://127.0.0.1:9002"]);
    assert.equal(lookup.revision, 2);
    assert.deepEqual(lookup.query, {});
    const serializable = await connection.call<LookupResult>(
      "registry.lookup",
      ["hello", "serializable"],
    );
    assert.equal(serializable.endpoints.length, 2);
    assert.deepEqual(
      await connection.call("registry.unbind", { name: "hello", id: "h1" }),
      { revision: 3, removed: 1 },
    );
    assert.deepEqual(
      await connection.call("registry.unbind", ["hello", "h1"]),
      { revision: 3, removed: 0 },
    );
    assert.deepEqual(
      await connection.call("registry.lookup", ["nothing"]),
      { name: "nothing", query: {}, endpoints: [], total: 0, revision: 3 },
    );
    assert.equal(node.state.revision, 3);
  });
});

Deno.test("attribute queries return exactly the endpoints that match every pair", async () => {
  await withSingleNode(async (_node, connection) => {
    const bind = (name: string, id: string, attrs?: Record<string, string>) =>
      connection.call("registry.bind", {
        name,
        endpoint: {
          id,
          url: `tcp://127.0.0.1:${9000 + id.length * 7 + id.charCodeAt(0)}`,
          attrs,
        },
      });
    await bind("services/db?version=1.0&team=blue", "a");
    await bind("services/db?version=2.0", "b", { team: "blue" });
    await bind("services/db", "c", { version: "1.0", team: "red" });
    await bind("services/db", "d");
    await bind("services/db?label=a%20b", "e");
    const lookup = async (name: string) =>
      ids(
        await connection.call<LookupResult>("registry.lookup", {
          name,
          rotate: false,
        }),
      );
    assert.deepEqual(await lookup("services/db"), ["a", "b", "c", "d", "e"]);
    assert.deepEqual(await lookup("services/db?version=1.0"), ["a", "c"]);
    assert.deepEqual(await lookup("services/db?team=blue"), ["a", "b"]);
    assert.deepEqual(await lookup("services/db?version=1.0&team=blue"), ["a"]);
    assert.deepEqual(await lookup("services/db?team=green"), []);
    assert.deepEqual(await lookup("services/db?label=a%20b"), ["e"]);
    const result = await connection.call<LookupResult>("registry.lookup", {
      name: "services/db?version=2.0",
    });
    assert.equal(result.name, "services/db");
    assert.deepEqual(result.query, { version: "2.0" });
    assert.deepEqual(result.endpoints[0].attrs, {
      version: "2.0",
      team: "blue",
    });
  });
});

Deno.test("lookups rotate the serving endpoints by one each time; rotate: false keeps binding order; draining ones come last", async () => {
  await withSingleNode(async (_node, connection) => {
    for (const [i, id] of ["a", "b", "c"].entries()) {
      await connection.call("registry.bind", {
        name: "s",
        endpoint: { id, url: `tcp://127.0.0.1:${9100 + i}` },
      });
    }
    const firsts: string[] = [];
    for (let i = 0; i < 6; i++) {
      firsts.push(
        ids(await connection.call<LookupResult>("registry.lookup", ["s"]))[0],
      );
    }
    assert.deepEqual(firsts, ["a", "b", "c", "a", "b", "c"]);
    assert.deepEqual(
      ids(
        await connection.call<LookupResult>("registry.lookup", { name: "s" }),
      ),
      ["a", "b", "c"],
    );
    assert.deepEqual(
      ids(
        await connection.call<LookupResult>("registry.lookup", {
          name: "s",
          rotate: false,
        }),
      ),
      ["a", "b", "c"],
    );
    await connection.call("registry.setState", {
      name: "s",
      id: "a",
      state: "draining",
    });
    const result = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      rotate: false,
    });
    assert.deepEqual(result.endpoints.map((e) => [e.id, e.state]), [
      ["b", "serving"],
      ["c", "serving"],
      ["a", "draining"],
    ]);
  });
});

Deno.test("lookup limit: the first N of the rotated answer, serving ones first, so successive lookups hand out successive subsets; total counts every match; a bad limit is -32602", async () => {
  await withSingleNode(async (_node, connection) => {
    for (const [i, id] of ["a", "b", "c", "d", "e"].entries()) {
      await connection.call("registry.bind", {
        name: "s",
        endpoint: { id, url: `tcp://127.0.0.1:${9300 + i}` },
      });
    }
    await connection.call("registry.setState", {
      name: "s",
      id: "e",
      state: "draining",
    });
    const subsets: string[][] = [];
    for (let i = 0; i < 3; i++) {
      const result = await connection.call<LookupResult>("registry.lookup", {
        name: "s",
        limit: 2,
      });
      assert.equal(result.total, 5);
      subsets.push(ids(result));
    }
    assert.deepEqual(subsets, [["a", "b"], ["b", "c"], ["c", "d"]]);
    // A limit beyond the matches cuts nothing; the draining one comes last.
    const all = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      rotate: false,
      limit: 10,
    });
    assert.deepEqual(ids(all), ["a", "b", "c", "d", "e"]);
    assert.equal(all.total, 5);
    const unlimited = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      rotate: false,
    });
    assert.equal(unlimited.total, unlimited.endpoints.length);
    for (const limit of [0, -1, 1.5, "2", null]) {
      await rejectsWith(
        connection.call("registry.lookup", { name: "s", limit }),
        INVALID_PARAMS,
        'Invalid params: "limit" must be an integer >= 1 (leave it out for every endpoint)',
      );
    }
  });
});

Deno.test("registry.list lists names under a prefix, with counts or endpoints, and the revision", async () => {
  await withSingleNode(async (_node, connection) => {
    await connection.call("registry.bind", ["svc/a", {
      id: "1",
      url: "tcp://127.0.0.1:9201",
    }]);
    await connection.call("registry.bind", ["svc/a", {
      id: "2",
      url: "tcp://127.0.0.1:9202",
    }]);
    await connection.call("registry.bind", ["svc/b", {
      id: "1",
      url: "tcp://127.0.0.1:9203",
    }]);
    await connection.call("registry.bind", ["other", {
      id: "1",
      url: "tcp://127.0.0.1:9204",
    }]);
    assert.deepEqual(
      await connection.call<ListResult>("registry.list", { prefix: "svc/" }),
      {
        revision: 4,
        names: [{ name: "svc/a", count: 2 }, { name: "svc/b", count: 1 }],
      },
    );
    const all = await connection.call<ListResult>("registry.list", {});
    assert.deepEqual(all.names.map((n) => n.name), ["other", "svc/a", "svc/b"]);
    const withEndpoints = await connection.call<ListResult>("registry.list", {
      prefix: "svc/b",
      endpoints: true,
    });
    assert.deepEqual(withEndpoints.names[0].endpoints?.map((e) => e.url), [
      "tcp://127.0.0.1:9203",
    ]);
  });
});

Deno.test("repeated lookups see every change at once: a bind, a drain, an unbind, and local bindings that move no revision", async () => {
  await withSingleNode(async (_node, connection) => {
    const look = async () =>
      (await connection.call<LookupResult>("registry.lookup", {
        name: "c",
        rotate: false,
      })).endpoints.map((e) => `${e.id}:${e.state}:${e.scope}`);
    await connection.call("registry.bind", ["c", {
      id: "a",
      url: "tcp://127.0.0.1:9701",
    }]);
    assert.deepEqual(await look(), ["a:serving:global"]);
    assert.deepEqual(await look(), ["a:serving:global"]);
    await connection.call("registry.bind", ["c", {
      id: "b",
      url: "tcp://127.0.0.1:9702",
    }]);
    assert.deepEqual(await look(), ["a:serving:global", "b:serving:global"]);
    await connection.call("registry.setState", {
      name: "c",
      id: "a",
      state: "draining",
    });
    assert.deepEqual(await look(), ["b:serving:global", "a:draining:global"]);
    await connection.call("registry.unbind", ["c", "b"]);
    assert.deepEqual(await look(), ["a:draining:global"]);
    const lease = await connection.call<{ id: string }>("lease.grant", {
      ttlMs: 5_000,
    });
    await connection.call("registry.bind", {
      name: "c",
      endpoint: { id: "l", url: "tcp://127.0.0.1:9703" },
      scope: "local",
      leaseId: lease.id,
    });
    assert.deepEqual(await look(), ["l:serving:local", "a:draining:global"]);
    await connection.call("registry.setState", {
      name: "c",
      id: "l",
      state: "draining",
      scope: "local",
    });
    assert.deepEqual(await look(), ["a:draining:global", "l:draining:local"]);
    await connection.call("registry.unbind", {
      name: "c",
      id: "l",
      scope: "local",
    });
    assert.deepEqual(await look(), ["a:draining:global"]);
  });
});

Deno.test("a local binding lives only on its node's lookups, is not replicated, and goes with its lease", async () => {
  await withSingleNode(async (node, connection) => {
    await connection.call("registry.bind", ["s", {
      id: "g",
      url: "tcp://127.0.0.1:9601",
    }]);
    const lease = await connection.call<{ id: string }>("lease.grant", {
      ttlMs: 5_000,
    });
    const local = await connection.call<BindResult>("registry.bind", {
      name: "s",
      endpoint: { id: "l", url: "tcp://127.0.0.1:9602" },
      scope: "local",
      leaseId: lease.id,
    });
    assert.equal(local.endpoint.scope, "local");
    // The revision did not move: nothing went through the log.
    assert.equal(local.revision, 1);
    assert.equal(node.state.revision, 1);
    assert.deepEqual(node.state.bindings("s").map((b) => b.id), ["g"]);
    const lookup = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      rotate: false,
    });
    assert.deepEqual(lookup.endpoints.map((e) => [e.id, e.scope]), [[
      "g",
      "global",
    ], ["l", "local"]]);
    assert.deepEqual(
      (await connection.call<ListResult>("registry.list", {})).names,
      [{ name: "s", count: 2 }],
    );
    await rejectsWith(
      connection.call("registry.bind", {
        name: "s",
        endpoint: { url: "tcp://127.0.0.1:9603" },
        scope: "local",
        grant: { ttlMs: 1000 },
      }),
      INVALID_PARAMS,
      /a local binding cannot grant its lease in the same call/,
    );
    await connection.call("lease.revoke", { id: lease.id });
    assert.deepEqual(
      ids(await connection.call<LookupResult>("registry.lookup", ["s"])),
      ["g"],
    );
  });
});

Deno.test("a health-checked endpoint whose server stops answering is marked unhealthy, left out of lookups, and comes back", async () => {
  await withSingleNode(async (node, connection) => {
    const [port] = freePorts(1);
    let server = serve({ port, methods: {} });
    await connection.call("registry.bind", {
      name: "s",
      endpoint: {
        id: "a",
        url: `tcp://127.0.0.1:${port}`,
        check: {
          kind: "ping",
          intervalMs: 100,
          timeoutMs: 50,
          failuresBeforeUnhealthy: 2,
        },
      },
    });
    const state = () => node.state.binding("s", "a")?.state;
    const revision = node.state.revision;
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(state(), "serving");
    assert.equal(
      node.state.revision,
      revision,
      "probes that pass write nothing",
    );
    await server.close();
    await waitFor(() => state() === "unhealthy", "unhealthy", 5_000);
    assert.deepEqual(
      (await connection.call<LookupResult>("registry.lookup", ["s"])).endpoints,
      [],
    );
    const all = await connection.call<LookupResult>("registry.lookup", {
      name: "s",
      includeUnhealthy: true,
    });
    assert.deepEqual(all.endpoints.map((e: Endpoint) => e.state), [
      "unhealthy",
    ]);
    // One entry per transition, not per probe.
    const afterDown = node.state.revision;
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(node.state.revision, afterDown);
    server = serve({ port, methods: {} });
    await waitFor(() => state() === "serving", "serving again", 5_000);
    assert.equal(node.state.revision, afterDown + 1);
    await server.close();
  });
});

Deno.test("bind, unbind, setState, lookup and list refuse an unknown param, naming it and the accepted ones", async () => {
  await withSingleNode(async (node, connection) => {
    const url = "tcp://127.0.0.1:9001";
    await rejectsWith(
      connection.call("registry.lookup", { name: "a", serializable: true }),
      INVALID_PARAMS,
      'Invalid params: "serializable" is not a param of registry.lookup, which takes { name, consistency?, rotate?, includeUnhealthy?, limit? }',
    );
    await rejectsWith(
      connection.call("registry.lookup", ["a", "serializable", true]),
      INVALID_PARAMS,
      "Invalid params: registry.lookup takes { name, consistency?, rotate?, includeUnhealthy?, limit? }, or at most 2 params by position (name, consistency); 3 were sent",
    );
    await rejectsWith(
      connection.call("registry.bind", {
        name: "a",
        endpoint: { url },
        ttl: 5,
      }),
      INVALID_PARAMS,
      `Invalid params: "ttl" is not a param of registry.bind, which takes ${
        BIND_SHAPE.slice("Invalid params: registry.bind takes ".length)
      }`,
    );
    await rejectsWith(
      connection.call("registry.unbind", { name: "a", id: url, force: true }),
      INVALID_PARAMS,
      'Invalid params: "force" is not a param of registry.unbind, which takes { name, id, leaseId?, scope? }',
    );
    await rejectsWith(
      connection.call("registry.setState", {
        name: "a",
        id: url,
        state: "draining",
        reason: "deploy",
      }),
      INVALID_PARAMS,
      'Invalid params: "reason" is not a param of registry.setState, which takes { name, id, state: "serving" | "draining", leaseId?, scope? }',
    );
    await rejectsWith(
      connection.call("registry.list", { prefix: "", limit: 5 }),
      INVALID_PARAMS,
      'Invalid params: "limit" is not a param of registry.list, which takes { prefix?, consistency?, endpoints? }',
    );
    assert.equal(node.state.revision, 0);
  });
});

Deno.test("registry.bind refuses an id another live lease holds at another url (ID_IN_USE, global and local); the same url takes it over", async () => {
  await withSingleNode(async (node, connection) => {
    const first = await connection.call<BindResult>("registry.bind", {
      name: "hello",
      endpoint: { id: "s1", url: "tcp://127.0.0.1:9001" },
      grant: { ttlMs: 30_000 },
    });
    await rejectsWith(
      connection.call("registry.bind", {
        name: "hello",
        endpoint: { id: "s1", url: "tcp://127.0.0.1:9002" },
        grant: { ttlMs: 30_000 },
      }),
      ID_IN_USE,
      /^Id in use: endpoint "s1" of "hello" is held by another live server at tcp:\/\/127\.0\.0\.1:9001 .*wait for its lease to expire \(30 s after its last keep-alive\)$/,
      {
        name: "hello",
        id: "s1",
        leaseId: first.leaseId,
        url: "tcp://127.0.0.1:9001",
        ttlMs: 30_000,
      },
    );
    assert.equal(node.state.binding("hello", "s1")?.leaseId, first.leaseId);
    const restarted = await connection.call<BindResult>("registry.bind", {
      name: "hello",
      endpoint: { id: "s1", url: "tcp://127.0.0.1:9001" },
      grant: { ttlMs: 30_000 },
    });
    assert.equal(
      node.state.binding("hello", "s1")?.leaseId,
      restarted.leaseId,
    );
    // Local scope: the same rule.
    const local = await connection.call<BindResult>("registry.bind", {
      name: "cache",
      endpoint: { id: "c1", url: "tcp://127.0.0.1:9101" },
      leaseId: restarted.leaseId,
      scope: "local",
    });
    assert.equal(local.leaseId, restarted.leaseId);
    await rejectsWith(
      connection.call("registry.bind", {
        name: "cache",
        endpoint: { id: "c1", url: "tcp://127.0.0.1:9102" },
        scope: "local",
      }),
      ID_IN_USE,
      /^Id in use: endpoint "c1" of "cache"/,
    );
  });
});
