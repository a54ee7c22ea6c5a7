import assert from "node:assert/strict";
import { METRICS_CONTENT_TYPE, NodeMetrics, serveMetrics } from "./metrics.ts";
import { RpcError } from "../../rpc/errors.ts";
import { parseRegistryArgs } from "./args.ts";
import type { RpcSession } from "../../rpc/server/method.ts";

function fakeSession(): { session: RpcSession; end(): void } {
  const controller = new AbortController();
  return {
    session: { signal: controller.signal } as unknown as RpcSession,
    end: () => controller.abort(),
  };
}

Deno.test("NodeMetrics counts calls by method and outcome, lookups by consistency, open connections", async () => {
  const metrics = new NodeMetrics('n"1');
  const { session, end } = fakeSession();
  const methods = metrics.instrument(session, {
    "registry.lookup": (p: unknown) => p,
    "registry.bind": (p: { fail?: boolean }) => {
      if (p.fail) throw new RpcError(-32010, "not leader");
      return "ok";
    },
  });
  assert.equal(metrics.openConnections, 1);
  await methods["registry.lookup"]({ name: "a" });
  await methods["registry.lookup"]({ name: "a", consistency: "serializable" });
  await methods["registry.bind"]({});
  await assert.rejects(
    async () => await methods["registry.bind"]({ fail: true }),
    { code: -32010 },
  );
  end();
  assert.equal(metrics.openConnections, 0);
  const text = metrics.render(() => [
    { name: "rafter_raft_term", help: "Term.", value: 7 },
  ]);
  const lines = text.split("\n");
  const node = 'node="n\\"1"';
  for (
    const expected of [
      `rafter_registry_lookups_total{${node},consistency="linearizable"} 1`,
      `rafter_registry_lookups_total{${node},consistency="serializable"} 1`,
      `rafter_rpc_calls_total{${node},method="registry.bind",outcome="ok"} 1`,
      `rafter_rpc_calls_total{${node},method="registry.bind",outcome="-32010"} 1`,
      `rafter_rpc_calls_total{${node},method="registry.lookup",outcome="ok"} 2`,
      `rafter_registry_writes_total{${node},method="registry.bind",outcome="-32010"} 1`,
      "# TYPE rafter_rpc_calls_total counter",
      "# TYPE rafter_raft_term gauge",
      `rafter_raft_term{${node}} 7`,
    ]
  ) assert.ok(lines.includes(expected), `${expected}\nin:\n${text}`);
  // A lookup is no write.
  assert.ok(!/writes_total\{[^}]*registry\.lookup/.test(text));
  // Each family's HELP and TYPE come once.
  const types = lines.filter((l) => l.startsWith("# TYPE "));
  assert.equal(new Set(types).size, types.length);
});

Deno.test("serveMetrics: GET /metrics in the text format, 404 elsewhere, 405 for POST", async () => {
  const server = serveMetrics(
    { hostname: "127.0.0.1", port: 0 },
    () => "x 1\n",
  );
  try {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const ok = await fetch(server.url);
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get("content-type"), METRICS_CONTENT_TYPE);
    assert.equal(await ok.text(), "x 1\n");
    const missing = await fetch(server.url.replace("/metrics", "/"));
    assert.equal(missing.status, 404);
    await missing.body?.cancel();
    const post = await fetch(server.url, { method: "POST" });
    assert.equal(post.status, 405);
    await post.body?.cancel();
  } finally {
    await server.close();
  }
});

Deno.test("--metrics-listen parses HOST:PORT and is off by default", () => {
  const base = ["--id", "n1", "--listen", "127.0.0.1:7001"];
  assert.equal(parseRegistryArgs(base).metricsListen, undefined);
  assert.deepEqual(
    parseRegistryArgs([...base, "--metrics-listen", "127.0.0.1:9464"])
      .metricsListen,
    { hostname: "127.0.0.1", port: 9464 },
  );
  assert.throws(
    () => parseRegistryArgs([...base, "--metrics-listen", "nope"]),
    /--metrics-listen/,
  );
});

Deno.test("NodeMetrics histograms: cumulative buckets, +Inf, sum and count", () => {
  const metrics = new NodeMetrics("n1");
  for (const seconds of [0.0005, 0.003, 0.003, 7]) {
    metrics.observe("x_seconds", "X.", { kind: "a" }, seconds);
  }
  const lines = metrics.render(() => []).split("\n");
  const l = 'node="n1",kind="a"';
  for (
    const expected of [
      "# TYPE x_seconds histogram",
      `x_seconds_bucket{${l},le="0.001"} 1`,
      `x_seconds_bucket{${l},le="0.0025"} 1`,
      `x_seconds_bucket{${l},le="0.005"} 3`,
      `x_seconds_bucket{${l},le="5"} 3`,
      `x_seconds_bucket{${l},le="+Inf"} 4`,
      `x_seconds_sum{${l}} 7.0065`,
      `x_seconds_count{${l}} 4`,
    ]
  ) {
    assert.ok(
      lines.includes(expected),
      `${expected}\nin:\n${lines.join("\n")}`,
    );
  }
});
