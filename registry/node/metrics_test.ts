import assert from "node:assert/strict";
import {
  gaugesOf,
  METRICS_CONTENT_TYPE,
  NodeMetrics,
  serveMetrics,
} from "./metrics.ts";
import type { RegistryStatus } from "../../protocol/registry.ts";
import { parseRegistryArgs } from "./args.ts";
import type { RpcSession } from "../../rpc/server/method.ts";

function fakeSession(): { session: RpcSession; end(): void } {
  const controller = new AbortController();
  return {
    session: { signal: controller.signal } as unknown as RpcSession,
    end: () => controller.abort(),
  };
}

/** Asserts that `text` has each of `expected` as a whole line. */
function assertLines(text: string, expected: string[]): void {
  const lines = text.split("\n");
  for (const line of expected) {
    assert.ok(lines.includes(line), `${line}\nin:\n${text}`);
  }
}

Deno.test("NodeMetrics counts calls by method and outcome, lookups by consistency, open connections", async () => {
  const metrics = new NodeMetrics('n"1');
  const { session, end } = fakeSession();
  const methods = metrics.instrument(session, {
    "registry.lookup": (p: unknown) => p,
    "registry.bind": () => "ok",
  });
  assert.equal(metrics.openConnections, 1);
  await methods["registry.lookup"]({ name: "a" });
  await methods["registry.lookup"]({ name: "a", consistency: "serializable" });
  await methods["registry.lookup"]({ name: "a", consistency: "eventual" });
  assert.equal(await methods["registry.bind"]({}), "ok");
  end();
  assert.equal(metrics.openConnections, 0);
  // What the client port's onCall reports.
  metrics.onCall({
    method: "registry.lookup",
    outcome: "ok",
    durationMs: 2,
    bytesIn: 40,
    bytesOut: 60,
  });
  metrics.onCall({
    method: "registry.lookup",
    outcome: "ok",
    durationMs: 30,
    bytesIn: 41,
    bytesOut: 61,
  });
  metrics.onCall({
    method: "registry.bind",
    outcome: "ok",
    durationMs: 4,
    bytesIn: 100,
    bytesOut: 20,
  });
  metrics.onCall({
    method: "registry.bind",
    outcome: "error",
    code: -32010,
    durationMs: 1,
  });
  metrics.onCall({
    method: "no.such",
    outcome: "error",
    code: -32601,
    durationMs: 0.1,
  });
  const text = metrics.render(() => [
    { name: "rafter_raft_term", help: "Term.", value: 7 },
  ]);
  const lines = text.split("\n");
  const node = 'node="n\\"1"';
  for (
    const expected of [
      `rafter_registry_lookups_total{${node},consistency="linearizable"} 1`,
      `rafter_registry_lookups_total{${node},consistency="serializable"} 1`,
      `rafter_registry_lookups_total{${node},consistency="other"} 1`,
      `rafter_rpc_calls_total{${node},method="registry.bind",outcome="ok"} 1`,
      `rafter_rpc_calls_total{${node},method="registry.bind",outcome="-32010"} 1`,
      `rafter_rpc_calls_total{${node},method="registry.lookup",outcome="ok"} 2`,
      `rafter_rpc_calls_total{${node},method="(unknown)",outcome="-32601"} 1`,
      `rafter_registry_writes_total{${node},method="registry.bind",outcome="ok"} 1`,
      `rafter_registry_writes_total{${node},method="registry.bind",outcome="-32010"} 1`,
      "# TYPE rafter_rpc_call_duration_seconds histogram",
      `rafter_rpc_call_duration_seconds_bucket{${node},method="registry.lookup",le="0.0025"} 1`,
      `rafter_rpc_call_duration_seconds_bucket{${node},method="registry.lookup",le="0.05"} 2`,
      `rafter_rpc_call_duration_seconds_count{${node},method="registry.lookup"} 2`,
      `rafter_rpc_call_duration_seconds_sum{${node},method="registry.lookup"} 0.032`,
      `rafter_rpc_call_duration_seconds_count{${node},method="registry.bind"} 2`,
      `rafter_rpc_received_bytes_total{${node}} 181`,
      `rafter_rpc_sent_bytes_total{${node}} 141`,
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

Deno.test("NodeMetrics count and observe: a repeated series adds up in one sample; other label values, names and escapes stay apart", () => {
  const metrics = new NodeMetrics("n1");
  metrics.count("a_total", "A.", { x: "1", y: "2" });
  metrics.count("a_total", "A.", { x: "1", y: "2" }, 2);
  metrics.count("a_total", "A.", { x: "1", y: 'q"' });
  metrics.count("b_total", "B.", { x: "1", y: "2" });
  metrics.observe("t_seconds", "T.", { m: "k" }, 0.001);
  metrics.observe("t_seconds", "T.", { m: "k" }, 0.002);
  metrics.observe("t_seconds", "T.", { m: "j" }, 0.002);
  const text = metrics.render(() => []);
  assert.match(text, /^a_total\{node="n1",x="1",y="2"\} 3$/m);
  assert.match(text, /^a_total\{node="n1",x="1",y="q\\""\} 1$/m);
  assert.match(text, /^b_total\{node="n1",x="1",y="2"\} 1$/m);
  assert.match(text, /^t_seconds_count\{node="n1",m="k"\} 2$/m);
  assert.match(text, /^t_seconds_count\{node="n1",m="j"\} 1$/m);
});

Deno.test("NodeMetrics snapshots: count and time by source, the newest one's size as a gauge", () => {
  const metrics = new NodeMetrics("n1");
  assert.equal(metrics.snapshotBytes, 0);
  metrics.snapshotSaved({ source: "taken", bytes: 5000, ms: 3 });
  metrics.snapshotSaved({ source: "taken", bytes: 7000, ms: 47 });
  metrics.snapshotSaved({ source: "installed", bytes: 6000, ms: 2 });
  assert.equal(metrics.snapshotBytes, 6000, "the newest one's size");
  assertLines(metrics.render(() => []), [
    'rafter_raft_snapshots_total{node="n1",source="taken"} 2',
    'rafter_raft_snapshots_total{node="n1",source="installed"} 1',
    "# TYPE rafter_raft_snapshot_seconds histogram",
    'rafter_raft_snapshot_seconds_bucket{node="n1",source="taken",le="0.005"} 1',
    'rafter_raft_snapshot_seconds_bucket{node="n1",source="taken",le="0.05"} 2',
    'rafter_raft_snapshot_seconds_sum{node="n1",source="taken"} 0.05',
    'rafter_raft_snapshot_seconds_count{node="n1",source="installed"} 1',
  ]);
});

Deno.test("NodeMetrics peer round trips: a histogram by peer", () => {
  const metrics = new NodeMetrics("n1");
  metrics.pingAnswered("n2", 0.4);
  metrics.pingAnswered("n2", 3);
  metrics.pingAnswered("n3", 20);
  assertLines(metrics.render(() => []), [
    "# TYPE rafter_peer_rtt_seconds histogram",
    'rafter_peer_rtt_seconds_bucket{node="n1",peer="n2",le="0.001"} 1',
    'rafter_peer_rtt_seconds_bucket{node="n1",peer="n2",le="0.005"} 2',
    'rafter_peer_rtt_seconds_count{node="n1",peer="n2"} 2',
    'rafter_peer_rtt_seconds_bucket{node="n1",peer="n3",le="0.01"} 0',
    'rafter_peer_rtt_seconds_bucket{node="n1",peer="n3",le="0.025"} 1',
    'rafter_peer_rtt_seconds_sum{node="n1",peer="n3"} 0.02',
  ]);
});

Deno.test("gaugesOf: the newest snapshot's size", () => {
  const status = { security: { raft: {}, peerServer: {}, peerTransport: {} } };
  const gauges = gaugesOf({
    status: status as unknown as RegistryStatus,
    names: 0,
    bindings: 0,
    openConnections: 0,
    leasesExpired: 0,
    events: 0,
    eventLoopLagSeconds: 0,
    snapshotBytes: 1234,
  });
  const found = gauges.filter((g) => g.name === "rafter_raft_snapshot_bytes");
  assert.equal(found.length, 1);
  assert.equal(found[0].value, 1234);
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
  const l = 'node="n1",kind="a"';
  assertLines(metrics.render(() => []), [
    "# TYPE x_seconds histogram",
    `x_seconds_bucket{${l},le="0.001"} 1`,
    `x_seconds_bucket{${l},le="0.0025"} 1`,
    `x_seconds_bucket{${l},le="0.005"} 3`,
    `x_seconds_bucket{${l},le="5"} 3`,
    `x_seconds_bucket{${l},le="+Inf"} 4`,
    `x_seconds_sum{${l}} 7.0065`,
    `x_seconds_count{${l}} 4`,
  ]);
});
