/**
 * A registry node's Prometheus metrics (`--metrics-listen HOST:PORT`):
 * counters the node bumps as it serves (RPC calls by method and outcome,
 * lookups by consistency, writes, leader changes), gauges read at scrape
 * time from what `registry.status` already computes, and the text
 * exposition format (version 0.0.4) served on `GET /metrics` over plain
 * HTTP. Every sample carries the label `node` (the member id).
 *
 * @module
 */

import type { CallInfo } from "../../rpc/server/dispatcher.ts";
import type { Methods, RpcSession } from "../../rpc/server/method.ts";
import { CallCounter, OpenConnections } from "../../rpc/server/metrics.ts";
import type { TcpAddress } from "../../rpc/transport/transport.ts";
import type { RegistryStatus } from "../../protocol/registry.ts";
import {
  type CounterSample,
  type Gauge,
  type HistogramSeries,
  type Labels,
  LagProbe,
  MetricFamilies,
  metricsAnswer,
  NOT_FOUND_ANSWER,
  plainPortWarning,
  processGauges,
  responseOf,
} from "../../internal/metrics.ts";

export {
  type Gauge,
  type HttpListener,
  type Labels,
  LATENCY_BUCKETS,
  METRICS_CONTENT_TYPE,
  plainPortWarning,
} from "../../internal/metrics.ts";
import { listenHttp } from "../../internal/http_deno.ts";
export { listenHttp };

/** A series' cache key: its name and label pairs, unambiguous. */
function seriesKey(name: string, labels: Labels): string {
  let key = name;
  for (const label in labels) key += `\u0000${label}\u0001${labels[label]}`;
  return key;
}

/** Methods that change the registry (counted in `rafter_registry_writes_total`). */
const WRITE_METHODS = new Set([
  "registry.bind",
  "registry.unbind",
  "registry.setState",
  "lease.grant",
  "lease.keepAlive",
  "lease.revoke",
]);

/**
 * The metrics of one node: counters it bumps, and gauges read from the
 * node when scraped.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { NodeMetrics } from "./metrics.ts";
 * const metrics = new NodeMetrics("n1");
 * metrics.count("rafter_raft_leader_changes_total", "Leader changes seen.");
 * const text = metrics.render(() => []);
 * assert.match(text, /^rafter_raft_leader_changes_total\{node="n1"\} 1$/m);
 * ```
 */
export class NodeMetrics {
  readonly #families: MetricFamilies;
  readonly #calls: CallCounter;
  readonly #lag = new LagProbe();
  readonly #connections = new OpenConnections();
  #snapshotBytes = 0;
  /**
   * The samples `count` and `observe` bumped, by name and labels: every
   * write and proposal counts, and the exposition's escaped label text
   * the families key their samples by cost more than the count itself.
   */
  readonly #counters = new Map<string, CounterSample>();
  readonly #histograms = new Map<string, HistogramSeries>();

  constructor(node: string) {
    this.#families = new MetricFamilies({ node });
    this.#calls = new CallCounter(this.#families);
  }

  /**
   * Measures how late a 100 ms timer fires (the event loop's delay), kept
   * as the largest since the last scrape; {@link stop} ends it.
   */
  startLagProbe(): void {
    this.#lag.start();
  }

  /** Stops the event-loop probe. */
  stop(): void {
    this.#lag.stop();
  }

  /** The largest event-loop lag since the last call, seconds (then resets). */
  takeMaxLagSeconds(): number {
    return this.#lag.takeMaxLagSeconds();
  }

  /** Adds `by` (default 1) to counter `name` with `labels` (plus `node`). */
  count(name: string, help: string, labels: Labels = {}, by = 1): void {
    const key = seriesKey(name, labels);
    let sample = this.#counters.get(key);
    if (sample === undefined) {
      sample = this.#families.counter(name, help, labels);
      this.#counters.set(key, sample);
    }
    sample.value += by;
  }

  /**
   * Records `seconds` in histogram `name` (buckets {@link LATENCY_BUCKETS})
   * with `labels` (plus `node`).
   */
  observe(name: string, help: string, labels: Labels, seconds: number): void {
    const key = seriesKey(name, labels);
    let series = this.#histograms.get(key);
    if (series === undefined) {
      series = this.#families.histogram(name, help, labels);
      this.#histograms.set(key, series);
    }
    series.observe(seconds);
  }

  /** Client connections open now (sessions of the client port). */
  get openConnections(): number {
    return this.#connections.value;
  }

  /**
   * Counts one finished call of the client port (its server's `onCall`
   * hook): `rafter_rpc_calls_total` by method and outcome (`ok`,
   * `notification` or the JSON-RPC error code), the latency histogram
   * `rafter_rpc_call_duration_seconds` by method, the bytes in and out,
   * and writes by method and outcome.
   */
  readonly onCall = (call: CallInfo): void => {
    const outcome = this.#calls.count(call);
    if (WRITE_METHODS.has(call.method)) {
      this.count(
        "rafter_registry_writes_total",
        "Registry writes received by this node, by method and outcome (ok or the JSON-RPC error code).",
        { method: call.method, outcome },
      );
    }
  };

  /**
   * Records a snapshot this node took and saved (`taken`) or installed
   * from the leader (`installed`): its size (the gauge
   * `rafter_raft_snapshot_bytes`), the time it took and the count by
   * source.
   */
  snapshotSaved(
    snapshot: { source: "taken" | "installed"; bytes: number; ms: number },
  ): void {
    const labels = { source: snapshot.source };
    this.#snapshotBytes = snapshot.bytes;
    this.#families.count(
      "rafter_raft_snapshots_total",
      "Snapshots this node saved, by source (taken here, or installed from the leader).",
      labels,
    );
    this.#families.observe(
      "rafter_raft_snapshot_seconds",
      "Time to take and save a snapshot (taken), or to save and compact to one received from the leader (installed), seconds.",
      labels,
      snapshot.ms / 1000,
    );
  }

  /** Size of the newest snapshot this node saved, bytes (0: none yet). */
  get snapshotBytes(): number {
    return this.#snapshotBytes;
  }

  /** Records the round-trip time of a ping `peer` answered, ms. */
  pingAnswered(peer: string, ms: number): void {
    this.#families.observe(
      "rafter_peer_rtt_seconds",
      "Round-trip time of the peer links' pings (rpc.ping), seconds, by peer.",
      { peer },
      ms / 1000,
    );
  }

  /**
   * Wraps a session's method table so that lookups are counted by
   * consistency (calls, outcomes and latency come from {@link onCall});
   * counts the session as an open connection until its signal aborts.
   */
  instrument(session: RpcSession, methods: Methods): Methods {
    this.#connections.track(session);
    const lookup = methods["registry.lookup"];
    if (lookup === undefined) return methods;
    return {
      ...methods,
      "registry.lookup": (...args: unknown[]) => {
        this.#countLookup(args[0]);
        return lookup(...args);
      },
    };
  }

  #countLookup(params: unknown): void {
    const given = (params as { consistency?: unknown } | undefined)
      ?.consistency;
    const consistency = typeof given !== "string"
      ? "linearizable"
      : given === "linearizable" || given === "serializable"
      ? given
      : "other";
    this.count(
      "rafter_registry_lookups_total",
      "Lookups this node served, by read consistency.",
      { consistency },
    );
  }

  /**
   * The text exposition of every counter and of the gauges `gauges`
   * gives (read now).
   */
  render(gauges: () => Gauge[]): string {
    return this.#families.render(gauges());
  }
}

/** What a scrape reads besides the counters. */
export interface ScrapeSources {
  status: RegistryStatus;
  names: number;
  bindings: number;
  openConnections: number;
  /** Leases expired (applied on this node). */
  leasesExpired: number;
  /** Binding events applied on this node. */
  events: number;
  /** Largest event-loop lag since the last scrape, seconds. */
  eventLoopLagSeconds: number;
  /** Size of the newest snapshot this node saved, bytes (0: none yet). */
  snapshotBytes: number;
}

/** The gauges of one scrape: Raft, registry, peer drops and the process. */
export function gaugesOf(sources: ScrapeSources): Gauge[] {
  const { status } = sources;
  const security = status.security;
  const gauges: Gauge[] = [
    {
      name: "rafter_raft_term",
      help: "Current Raft term.",
      value: status.term,
    },
    ...(["follower", "candidate", "leader"] as const).map((role) => ({
      name: "rafter_raft_role",
      help: "1 for this node's Raft role, 0 for the others.",
      labels: { role },
      value: status.role === role ? 1 : 0,
    })),
    {
      name: "rafter_raft_commit_index",
      help: "Highest Raft log index known to be committed.",
      value: status.commitIndex,
    },
    {
      name: "rafter_raft_applied_index",
      help: "Highest Raft log index applied to this node's registry state.",
      value: status.appliedIndex,
    },
    {
      name: "rafter_raft_snapshot_index",
      help: "Index of this node's newest snapshot, 0 for none.",
      value: status.snapshotIndex,
    },
    {
      name: "rafter_raft_snapshot_bytes",
      help:
        "Size of the newest snapshot this node saved since it started (file on disk), bytes; 0 for none.",
      value: sources.snapshotBytes,
    },
    {
      name: "rafter_raft_dropped_messages_total",
      help:
        "Raft messages this node dropped, by reason (from registry.status).",
      type: "counter",
      labels: { reason: "not_member" },
      value: security.raft.droppedNotMember,
    },
    {
      name: "rafter_raft_dropped_messages_total",
      help: "",
      type: "counter",
      labels: { reason: "misaddressed" },
      value: security.raft.droppedMisaddressed,
    },
    {
      name: "rafter_raft_dropped_messages_total",
      help: "",
      type: "counter",
      labels: { reason: "stale" },
      value: security.raft.droppedStale,
    },
    ...Object.entries(security.peerServer).map(([reason, value]) => ({
      name: "rafter_peer_server_messages_total",
      help:
        "What the peer port delivered or refused, by kind (from registry.status).",
      type: "counter" as const,
      labels: { kind: reason },
      value,
    })),
    {
      name: "rafter_peer_redials_total",
      help: "Times this node redialled a peer.",
      type: "counter",
      value: security.peerTransport.redials,
    },
    {
      name: "rafter_registry_revision",
      help: "Registry revision applied on this node.",
      value: status.revision,
    },
    {
      name: "rafter_registry_names",
      help: "Names with at least one global binding.",
      value: sources.names,
    },
    {
      name: "rafter_registry_bindings",
      help: "Global bindings, under every name.",
      value: sources.bindings,
    },
    { name: "rafter_registry_leases", help: "Leases.", value: status.leases },
    {
      name: "rafter_registry_lease_expiries_total",
      help: "Leases that expired (entries applied on this node).",
      type: "counter",
      value: sources.leasesExpired,
    },
    {
      name: "rafter_registry_events_total",
      help: "Binding events applied on this node (what its watches are sent).",
      type: "counter",
      value: sources.events,
    },
    {
      name: "rafter_registry_watchers",
      help: "Watches open on this node.",
      value: status.watchers,
    },
    {
      name: "rafter_rpc_open_connections",
      help: "Client connections open on this node.",
      value: sources.openConnections,
    },
  ];
  gauges.push(...processGauges(sources.eventLoopLagSeconds));
  return gauges;
}

/** A running metrics listener. */
export interface MetricsServer {
  /** `http://host:port/metrics`, with the actual port. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (the text `render` gives) on `address` over plain
 * HTTP; any other path goes to `other` (the dashboard), then 404; 405 for
 * another method.
 */
export function serveMetrics(
  address: TcpAddress,
  render: () => string,
  other?: (request: Request) => Promise<Response | null>,
): MetricsServer {
  const server = listenHttp(address, async (request) => {
    const url = new URL(request.url);
    const answer = metricsAnswer(request.method, url.pathname, render);
    if (answer !== null) return responseOf(answer);
    return (await other?.(request)) ?? responseOf(NOT_FOUND_ANSWER);
  });
  return { url: `${server.origin}/metrics`, close: server.close };
}

/**
 * The warning a node logs when its metrics listen on a non-loopback
 * address, or null.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { metricsWarning } from "./metrics.ts";
 * assert.equal(metricsWarning({ hostname: "127.0.0.1", port: 9464 }), null);
 * assert.match(metricsWarning({ hostname: "0.0.0.0", port: 9464 })!, /WARNING/);
 * ```
 */
export function metricsWarning(address: TcpAddress): string | null {
  return plainPortWarning(
    "--metrics-listen",
    address,
    "anyone who reaches it reads the metrics (names, members, counts) without a token",
  );
}
