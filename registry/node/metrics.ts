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

import { RpcError } from "../../rpc/errors.ts";
import type { Methods, RpcSession } from "../../rpc/server/method.ts";
import type { TcpAddress } from "../../rpc/transport/transport.ts";
import type { RegistryStatus } from "../../protocol/registry.ts";
import { isLoopbackHost } from "./exposure.ts";

/** The content type of the text exposition format. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Label name → value. */
export type Labels = Record<string, string>;

/** One metric family: its help, its type and its samples by label set. */
interface Family {
  help: string;
  type: "counter" | "gauge";
  samples: Map<string, { labels: Labels; value: number }>;
}

/** Upper bounds of the latency histograms' buckets, seconds. */
export const LATENCY_BUCKETS: readonly number[] = [
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
];

/** One histogram: cumulative counts per bucket, sum and count, by label set. */
interface Histogram {
  help: string;
  samples: Map<
    string,
    { labels: Labels; buckets: number[]; sum: number; count: number }
  >;
}

/** Period of the event-loop probe, ms. */
const LAG_PROBE_MS = 100;

/** Methods that change the registry (counted in `rafter_registry_writes_total`). */
const WRITE_METHODS = new Set([
  "registry.bind",
  "registry.unbind",
  "registry.setState",
  "lease.grant",
  "lease.keepAlive",
  "lease.revoke",
]);

/** Escapes a label value (backslash, double quote, newline). */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(
    /\n/g,
    "\\n",
  );
}

/** `{a="1",b="2"}`, or "" for no labels. */
function labelText(labels: Labels): string {
  const pairs = Object.entries(labels).map(([name, value]) =>
    `${name}="${escapeLabel(value)}"`
  );
  return pairs.length === 0 ? "" : `{${pairs.join(",")}}`;
}

/** A sample value as the format spells it. */
function valueText(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

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
  readonly #node: string;
  readonly #counters = new Map<string, Family>();
  readonly #histograms = new Map<string, Histogram>();
  #openConnections = 0;
  #lagTimer: ReturnType<typeof setInterval> | undefined;
  /** Largest event-loop lag since the last scrape, ms. */
  #maxLagMs = 0;

  constructor(node: string) {
    this.#node = node;
  }

  /**
   * Measures how late a 100 ms timer fires (the event loop's delay), kept
   * as the largest since the last scrape; {@link stop} ends it.
   */
  startLagProbe(): void {
    if (this.#lagTimer !== undefined) return;
    let expected = performance.now() + LAG_PROBE_MS;
    this.#lagTimer = setInterval(() => {
      const now = performance.now();
      this.#maxLagMs = Math.max(this.#maxLagMs, now - expected);
      expected = now + LAG_PROBE_MS;
    }, LAG_PROBE_MS);
    Deno.unrefTimer(this.#lagTimer);
  }

  /** Stops the event-loop probe. */
  stop(): void {
    clearInterval(this.#lagTimer);
    this.#lagTimer = undefined;
  }

  /** The largest event-loop lag since the last call, seconds (then resets). */
  takeMaxLagSeconds(): number {
    const lag = this.#maxLagMs;
    this.#maxLagMs = 0;
    return Math.max(0, lag) / 1000;
  }

  /** Adds `by` (default 1) to counter `name` with `labels` (plus `node`). */
  count(name: string, help: string, labels: Labels = {}, by = 1): void {
    let family = this.#counters.get(name);
    if (family === undefined) {
      family = { help, type: "counter", samples: new Map() };
      this.#counters.set(name, family);
    }
    const all = { node: this.#node, ...labels };
    const key = labelText(all);
    const sample = family.samples.get(key);
    if (sample === undefined) {
      family.samples.set(key, { labels: all, value: by });
    } else sample.value += by;
  }

  /**
   * Records `seconds` in histogram `name` (buckets {@link LATENCY_BUCKETS})
   * with `labels` (plus `node`).
   */
  observe(name: string, help: string, labels: Labels, seconds: number): void {
    let histogram = this.#histograms.get(name);
    if (histogram === undefined) {
      histogram = { help, samples: new Map() };
      this.#histograms.set(name, histogram);
    }
    const all = { node: this.#node, ...labels };
    const key = labelText(all);
    let sample = histogram.samples.get(key);
    if (sample === undefined) {
      sample = {
        labels: all,
        buckets: LATENCY_BUCKETS.map(() => 0),
        sum: 0,
        count: 0,
      };
      histogram.samples.set(key, sample);
    }
    LATENCY_BUCKETS.forEach((bound, i) => {
      if (seconds <= bound) sample.buckets[i]++;
    });
    sample.sum += seconds;
    sample.count++;
  }

  /** Client connections open now (sessions of the client port). */
  get openConnections(): number {
    return this.#openConnections;
  }

  /**
   * Wraps a session's method table so that each call is counted by method
   * and outcome (`ok` or the JSON-RPC error code), lookups by consistency
   * and writes by method and outcome; counts the session as an open
   * connection until its signal aborts.
   */
  instrument(session: RpcSession, methods: Methods): Methods {
    this.#openConnections++;
    session.signal.addEventListener(
      "abort",
      () => this.#openConnections--,
      { once: true },
    );
    const wrapped: Methods = {};
    for (const [name, handler] of Object.entries(methods)) {
      wrapped[name] = (...args: unknown[]) =>
        this.#counted(name, args, () => handler(...args));
    }
    return wrapped;
  }

  async #counted(
    method: string,
    args: unknown[],
    call: () => unknown,
  ): Promise<unknown> {
    if (method === "registry.lookup") {
      const params = args[0] as { consistency?: unknown } | undefined;
      const consistency = typeof params?.consistency === "string"
        ? params.consistency
        : "linearizable";
      this.count(
        "rafter_registry_lookups_total",
        "Lookups this node served, by read consistency.",
        {
          consistency: ["linearizable", "serializable"].includes(
              consistency,
            )
            ? consistency
            : "other",
        },
      );
    }
    let outcome = "ok";
    try {
      return await call();
    } catch (error) {
      outcome = error instanceof RpcError ? String(error.code) : "-32603";
      throw error;
    } finally {
      this.count(
        "rafter_rpc_calls_total",
        "Client RPC calls this node answered, by method and outcome (ok or the JSON-RPC error code).",
        { method, outcome },
      );
      if (WRITE_METHODS.has(method)) {
        this.count(
          "rafter_registry_writes_total",
          "Registry writes received by this node, by method and outcome (ok or the JSON-RPC error code).",
          { method, outcome },
        );
      }
    }
  }

  /**
   * The text exposition of every counter and of the gauges `gauges`
   * gives (read now).
   */
  render(gauges: () => Gauge[]): string {
    const lines: string[] = [];
    const families = new Map<string, Family>(this.#counters);
    for (const gauge of gauges()) {
      let family = families.get(gauge.name);
      if (family === undefined) {
        family = {
          help: gauge.help,
          type: gauge.type ?? "gauge",
          samples: new Map(),
        };
        families.set(gauge.name, family);
      }
      const labels = { node: this.#node, ...gauge.labels };
      family.samples.set(labelText(labels), { labels, value: gauge.value });
    }
    for (const [name, family] of families) {
      lines.push(
        `# HELP ${name} ${family.help}`,
        `# TYPE ${name} ${family.type}`,
      );
      for (const sample of family.samples.values()) {
        lines.push(
          `${name}${labelText(sample.labels)} ${valueText(sample.value)}`,
        );
      }
    }
    for (const [name, histogram] of this.#histograms) {
      lines.push(
        `# HELP ${name} ${histogram.help}`,
        `# TYPE ${name} histogram`,
      );
      for (const sample of histogram.samples.values()) {
        LATENCY_BUCKETS.forEach((bound, i) =>
          lines.push(
            `${name}_bucket${
              labelText({ ...sample.labels, le: String(bound) })
            } ${sample.buckets[i]}`,
          )
        );
        lines.push(
          `${name}_bucket${
            labelText({ ...sample.labels, le: "+Inf" })
          } ${sample.count}`,
          `${name}_sum${labelText(sample.labels)} ${sample.sum}`,
          `${name}_count${labelText(sample.labels)} ${sample.count}`,
        );
      }
    }
    return lines.join("\n") + "\n";
  }
}

/** One sample read at scrape time. */
export interface Gauge {
  name: string;
  help: string;
  value: number;
  labels?: Labels;
  /** A counter read from elsewhere (e.g. `registry.status`). @default "gauge" */
  type?: "counter" | "gauge";
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
  const memory = Deno.memoryUsage();
  gauges.push(
    {
      name: "process_resident_memory_bytes",
      help: "Resident set size, bytes.",
      value: memory.rss,
    },
    {
      name: "process_heap_used_bytes",
      help: "V8 heap used, bytes.",
      value: memory.heapUsed,
    },
    {
      name: "process_event_loop_lag_seconds",
      help:
        "Largest lateness of a 100 ms timer since the last scrape, seconds.",
      value: sources.eventLoopLagSeconds,
    },
  );
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
    if (url.pathname !== "/metrics") {
      const answer = await other?.(request);
      if (answer) return answer;
      return new Response("not found: the metrics are at /metrics\n", {
        status: 404,
      });
    }
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response("method not allowed: use GET\n", {
        status: 405,
        headers: { allow: "GET, HEAD" },
      });
    }
    return new Response(render(), {
      headers: { "content-type": METRICS_CONTENT_TYPE },
    });
  });
  return { url: `${server.origin}/metrics`, close: server.close };
}

/** A plain-HTTP listener of the node: its origin and how to close it. */
export interface HttpListener {
  /** `http://host:port`, with the actual port. */
  readonly origin: string;
  close(): Promise<void>;
}

/** Serves `handler` over plain HTTP on `address` (the metrics and dashboard ports). */
export function listenHttp(
  address: TcpAddress,
  handler: (request: Request) => Response | Promise<Response>,
): HttpListener {
  const server = Deno.serve({
    hostname: address.hostname,
    port: address.port,
    onListen: () => {},
  }, handler);
  const addr = server.addr as Deno.NetAddr;
  const host = addr.hostname.includes(":")
    ? `[${addr.hostname}]`
    : addr.hostname;
  return {
    origin: `http://${host}:${addr.port}`,
    close: () => server.shutdown(),
  };
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
  if (isLoopbackHost(address.hostname)) return null;
  return `WARNING: --metrics-listen ${address.hostname}:${address.port} is not a loopback address: anyone who reaches it reads the metrics (names, members, counts) over plain HTTP, without a token; keep it behind a firewall or listen on 127.0.0.1`;
}
