/**
 * The Prometheus pieces the registry node's metrics and `serve()`'s
 * opt-in metrics share (private: not part of the public API): counters and
 * latency histograms by label set, the text exposition format (version
 * 0.0.4), the event-loop delay probe, the process gauges, the `GET
 * /metrics` routing, and the loopback
 * test behind the warning for a metrics port others can reach. Deno's
 * listener is in `http_deno.ts`, so the Node build never meets `Deno`.
 *
 * Not for edge runtimes: it reads the process's memory and listens.
 *
 * @module
 */

import { memoryUsage } from "node:process";
import { clearInterval, setInterval } from "node:timers";

/** The content type of the text exposition format. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Label name → value. */
export type Labels = Record<string, string>;

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

/** One sample read at scrape time. */
export interface Gauge {
  name: string;
  help: string;
  value: number;
  labels?: Labels;
  /** A counter read from elsewhere (e.g. `registry.status`). @default "gauge" */
  type?: "counter" | "gauge";
}

/** One metric family: its help, its type and its samples by label set. */
interface Family {
  help: string;
  type: "counter" | "gauge";
  samples: Map<string, { labels: Labels; value: number }>;
}

/** One counter's sample: add to `value`. */
export interface CounterSample {
  readonly labels: Labels;
  value: number;
}

/**
 * One histogram's series (one label set): cumulative counts per bucket of
 * {@link LATENCY_BUCKETS}, sum and count.
 */
export class HistogramSeries {
  readonly labels: Labels;
  readonly buckets: number[] = LATENCY_BUCKETS.map(() => 0);
  sum = 0;
  count = 0;

  constructor(labels: Labels) {
    this.labels = labels;
  }

  /** Records one value, seconds. */
  observe(seconds: number): void {
    const buckets = this.buckets;
    for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
      if (seconds <= LATENCY_BUCKETS[i]) buckets[i]++;
    }
    this.sum += seconds;
    this.count++;
  }
}

/** One histogram: its series by label set. */
interface Histogram {
  help: string;
  samples: Map<string, HistogramSeries>;
}

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
 * Counters and histograms by name and label set, every sample with the
 * constant labels given first, and their text exposition with gauges read
 * at scrape time.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { MetricFamilies } from "./metrics.ts";
 * const metrics = new MetricFamilies({ node: "n1" });
 * metrics.count("calls_total", "Calls.", { method: "a" });
 * metrics.observe("call_seconds", "Call time.", {}, 0.002);
 * const text = metrics.render([{ name: "up", help: "Up.", value: 1 }]);
 * assert.match(text, /^calls_total\{node="n1",method="a"\} 1$/m);
 * assert.match(text, /^call_seconds_bucket\{node="n1",le="0.0025"\} 1$/m);
 * assert.match(text, /^call_seconds_count\{node="n1"\} 1$/m);
 * assert.match(text, /^up\{node="n1"\} 1$/m);
 * ```
 */
export class MetricFamilies {
  readonly #constant: Labels;
  readonly #counters = new Map<string, Family>();
  readonly #histograms = new Map<string, Histogram>();

  constructor(constant: Labels = {}) {
    this.#constant = constant;
  }

  /** Adds `by` (default 1) to counter `name` with `labels`. */
  count(name: string, help: string, labels: Labels = {}, by = 1): void {
    this.counter(name, help, labels).value += by;
  }

  /**
   * The sample of counter `name` with `labels` (made at 0 the first
   * time): add to its `value`. Keep it to count again without a lookup.
   */
  counter(name: string, help: string, labels: Labels = {}): CounterSample {
    let family = this.#counters.get(name);
    if (family === undefined) {
      family = { help, type: "counter", samples: new Map() };
      this.#counters.set(name, family);
    }
    const all = { ...this.#constant, ...labels };
    const key = labelText(all);
    let sample = family.samples.get(key);
    if (sample === undefined) {
      sample = { labels: all, value: 0 };
      family.samples.set(key, sample);
    }
    return sample;
  }

  /**
   * Records `seconds` in histogram `name` (buckets {@link LATENCY_BUCKETS})
   * with `labels`.
   */
  observe(name: string, help: string, labels: Labels, seconds: number): void {
    this.histogram(name, help, labels).observe(seconds);
  }

  /**
   * The series of histogram `name` with `labels` (made empty the first
   * time). Keep it to record again without a lookup.
   */
  histogram(name: string, help: string, labels: Labels = {}): HistogramSeries {
    let histogram = this.#histograms.get(name);
    if (histogram === undefined) {
      histogram = { help, samples: new Map() };
      this.#histograms.set(name, histogram);
    }
    const all = { ...this.#constant, ...labels };
    const key = labelText(all);
    let sample = histogram.samples.get(key);
    if (sample === undefined) {
      sample = new HistogramSeries(all);
      histogram.samples.set(key, sample);
    }
    return sample;
  }

  /** The text exposition of every counter, histogram and of `gauges`. */
  render(gauges: Gauge[]): string {
    const lines: string[] = [];
    const families = new Map<string, Family>(this.#counters);
    for (const gauge of gauges) {
      let family = families.get(gauge.name);
      if (family === undefined) {
        family = {
          help: gauge.help,
          type: gauge.type ?? "gauge",
          samples: new Map(),
        };
        families.set(gauge.name, family);
      }
      const labels = { ...this.#constant, ...gauge.labels };
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

/** Period of the event-loop probe, ms. */
const LAG_PROBE_MS = 100;

/**
 * Measures how late a 100 ms timer fires (the event loop's delay), kept as
 * the largest since it was last taken. Its timer does not keep the
 * process alive.
 */
export class LagProbe {
  #timer: ReturnType<typeof setInterval> | undefined;
  #maxLagMs = 0;

  /** Starts probing (again a no-op while it runs). */
  start(): void {
    if (this.#timer !== undefined) return;
    let expected = performance.now() + LAG_PROBE_MS;
    this.#timer = setInterval(() => {
      const now = performance.now();
      this.#maxLagMs = Math.max(this.#maxLagMs, now - expected);
      expected = now + LAG_PROBE_MS;
    }, LAG_PROBE_MS);
    this.#timer.unref();
  }

  /** Stops probing. */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** The largest lag since the last call, seconds (then resets). */
  takeMaxLagSeconds(): number {
    const lag = this.#maxLagMs;
    this.#maxLagMs = 0;
    return Math.max(0, lag) / 1000;
  }
}

/** The process's gauges: resident memory, V8 heap, event-loop delay. */
export function processGauges(eventLoopLagSeconds: number): Gauge[] {
  const memory = memoryUsage();
  return [
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
      value: eventLoopLagSeconds,
    },
  ];
}

/** An HTTP answer, whatever server writes it. */
export interface PlainAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * The answer to a request for `pathname`: the text `render` gives for
 * `GET` (or `HEAD`) `/metrics`, 405 for another method there, null for
 * another path (the caller's to answer, or 404).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { metricsAnswer } from "./metrics.ts";
 * assert.equal(metricsAnswer("GET", "/metrics", () => "x 1\n")?.body, "x 1\n");
 * assert.equal(metricsAnswer("POST", "/metrics", () => "")?.status, 405);
 * assert.equal(metricsAnswer("GET", "/", () => ""), null);
 * ```
 */
export function metricsAnswer(
  method: string,
  pathname: string,
  render: () => string,
): PlainAnswer | null {
  if (pathname !== "/metrics") return null;
  if (method !== "GET" && method !== "HEAD") {
    return {
      status: 405,
      headers: { allow: "GET, HEAD" },
      body: "method not allowed: use GET\n",
    };
  }
  return {
    status: 200,
    headers: { "content-type": METRICS_CONTENT_TYPE },
    body: render(),
  };
}

/** `answer` as a fetch `Response`. */
export function responseOf(answer: PlainAnswer): Response {
  return new Response(answer.body, {
    status: answer.status,
    headers: answer.headers,
  });
}

/** The 404 answer of a metrics port. */
export const NOT_FOUND_ANSWER: PlainAnswer = {
  status: 404,
  headers: {},
  body: "not found: the metrics are at /metrics\n",
};

/** A plain-HTTP listener: its origin and how to close it. */
export interface HttpListener {
  /** `http://host:port`, with the actual port. */
  readonly origin: string;
  close(): Promise<void>;
}

/** The address of a listener. */
export interface ListenAddress {
  hostname: string;
  port: number;
}

/** `http://host:port`, an IPv6 host in brackets. */
export function httpOrigin(hostname: string, port: number): string {
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  return `http://${host}:${port}`;
}

/**
 * Whether `hostname` is a loopback address (`localhost`, `127.0.0.0/8`,
 * `::1`, an IPv4-mapped loopback), which other hosts cannot reach.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { isLoopbackHost } from "./metrics.ts";
 * assert.equal(isLoopbackHost("127.0.0.2"), true);
 * assert.equal(isLoopbackHost("::1"), true);
 * assert.equal(isLoopbackHost("0.0.0.0"), false);
 * assert.equal(isLoopbackHost("10.0.0.5"), false);
 * ```
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (host === "localhost" || host === "::1" || host === "0:0:0:0:0:0:0:1") {
    return true;
  }
  const v4 = host.replace(/^::ffff:/, "");
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(v4);
  return match !== null && Number(match[1]) === 127 &&
    match.slice(2).every((part) => Number(part) <= 255);
}

/**
 * The warning for a plain-HTTP port (`option`) on a non-loopback
 * address: what `exposed` says, and what to do; null on loopback.
 */
export function plainPortWarning(
  option: string,
  address: ListenAddress,
  exposed: string,
): string | null {
  if (isLoopbackHost(address.hostname)) return null;
  return `WARNING: ${option} ${address.hostname}:${address.port} is not a loopback address: ${exposed}, over plain HTTP; keep it behind a firewall or listen on 127.0.0.1`;
}
