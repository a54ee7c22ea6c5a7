/**
 * The opt-in Prometheus metrics of a server made with `serve()` (its
 * `metrics` option): calls by method and outcome, a latency histogram by
 * method, open connections, bytes in and out, and the process's memory and
 * event-loop delay, on `GET /metrics` of a plain-HTTP port of their own.
 * The runtime adapters listen; this module counts, renders and answers.
 * Not imported by the edge-safe entries (it reads the process's memory).
 *
 * @module
 */

import type { CallInfo } from "./dispatcher.ts";
import type { Methods, RpcSession } from "./method.ts";
import type { SessionMethods } from "./server_connection.ts";
import type { RpcServer, ServeMetricsOptions, ServeOptions } from "./server.ts";
import { METHOD_NOT_FOUND } from "../errors.ts";
import { parseListenAddress, type TcpAddress } from "../transport/transport.ts";
import {
  type CounterSample,
  type HistogramSeries,
  type HttpListener,
  LagProbe,
  MetricFamilies,
  metricsAnswer,
  NOT_FOUND_ANSWER,
  type PlainAnswer,
  plainPortWarning,
  processGauges,
} from "../../internal/metrics.ts";

/** Where the metrics listen when `metrics.listen` is not given. */
export const DEFAULT_METRICS_LISTEN = "127.0.0.1:9464";

/** The method label of calls of a method the table lacks (bounded labels). */
const UNKNOWN_METHOD = "(unknown)";

/** A method's series, kept so that a call of it looks nothing up by labels. */
interface MethodSeries {
  duration: HistogramSeries;
  /** `rafter_rpc_calls_total` by outcome label. */
  calls: Map<string, CounterSample>;
}

/**
 * Counts finished calls (what `onCall` reports) in `families`:
 * `rafter_rpc_calls_total` by method and outcome (`ok`, `notification` or
 * the JSON-RPC error code; a method the table lacks as `(unknown)`, so the
 * labels stay bounded), `rafter_rpc_call_duration_seconds` by method, and
 * the bytes in and out. Shared by `serve()`'s metrics and the registry
 * node's. Each method's series are looked up once, so a call allocates
 * nothing (an error's code label aside).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { MetricFamilies } from "../../internal/metrics.ts";
 * import { CallCounter } from "./metrics.ts";
 * const families = new MetricFamilies();
 * const calls = new CallCounter(families);
 * assert.equal(calls.count({ method: "x", outcome: "error", code: -32601, durationMs: 1 }), "-32601");
 * assert.match(families.render([]), /^rafter_rpc_calls_total\{method="\(unknown\)",outcome="-32601"\} 1$/m);
 * ```
 */
export class CallCounter {
  readonly #families: MetricFamilies;
  readonly #methods = new Map<string, MethodSeries>();
  #received: CounterSample | undefined;
  #sent: CounterSample | undefined;

  constructor(families: MetricFamilies) {
    this.#families = families;
  }

  /** Counts one finished call; returns its outcome label. */
  count(call: CallInfo): string {
    const method = call.code === METHOD_NOT_FOUND
      ? UNKNOWN_METHOD
      : call.method;
    const outcome = call.outcome === "error" ? String(call.code) : call.outcome;
    const series = this.#methods.get(method) ?? this.#seriesOf(method);
    const calls = series.calls.get(outcome) ?? this.#callsOf(method, outcome);
    calls.value++;
    series.duration.observe(call.durationMs / 1000);
    if (call.bytesIn !== undefined) {
      this.#received ??= this.#families.counter(
        "rafter_rpc_received_bytes_total",
        "Bytes of request frames (one message each) this server received.",
      );
      this.#received.value += call.bytesIn;
    }
    if (call.bytesOut !== undefined) {
      this.#sent ??= this.#families.counter(
        "rafter_rpc_sent_bytes_total",
        "Bytes of response frames (to one message each) this server sent.",
      );
      this.#sent.value += call.bytesOut;
    }
    return outcome;
  }

  #seriesOf(method: string): MethodSeries {
    const series: MethodSeries = {
      duration: this.#families.histogram(
        "rafter_rpc_call_duration_seconds",
        "Time from a call's dispatch to its answer, seconds, by method.",
        { method },
      ),
      calls: new Map(),
    };
    this.#methods.set(method, series);
    return series;
  }

  #callsOf(method: string, outcome: string): CounterSample {
    const sample = this.#families.counter(
      "rafter_rpc_calls_total",
      "Calls this server finished, by method and outcome (ok, notification, or the JSON-RPC error code).",
      { method, outcome },
    );
    this.#methods.get(method)!.calls.set(outcome, sample);
    return sample;
  }
}

/**
 * Client connections open now: each session counted until its signal
 * aborts. Shared by `serve()`'s metrics and the registry node's.
 */
export class OpenConnections {
  #open = 0;

  /** Sessions open now. */
  get value(): number {
    return this.#open;
  }

  /** Counts `session` as open until its signal aborts. */
  track(session: RpcSession): void {
    this.#open++;
    session.signal.addEventListener("abort", () => this.#open--, {
      once: true,
    });
  }
}

/**
 * The counters of one server: what `onCall` reports and the connections
 * its method tables were made for.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ServerMetrics } from "./metrics.ts";
 * const metrics = new ServerMetrics({ listen: "127.0.0.1:0" });
 * metrics.onCall({ method: "a", outcome: "ok", durationMs: 2, bytesIn: 30, bytesOut: 20 });
 * metrics.onCall({ method: "a", outcome: "error", code: -32602, durationMs: 1 });
 * const text = metrics.render();
 * assert.match(text, /^rafter_rpc_calls_total\{method="a",outcome="ok"\} 1$/m);
 * assert.match(text, /^rafter_rpc_calls_total\{method="a",outcome="-32602"\} 1$/m);
 * assert.match(text, /^rafter_rpc_call_duration_seconds_count\{method="a"\} 2$/m);
 * assert.match(text, /^rafter_rpc_received_bytes_total 30$/m);
 * ```
 */
export class ServerMetrics {
  /** Where to listen. */
  readonly address: TcpAddress;
  readonly #families = new MetricFamilies();
  readonly #calls = new CallCounter(this.#families);
  readonly #lag = new LagProbe();
  readonly #connections = new OpenConnections();

  /**
   * @throws {TypeError} for a `listen` that is not `host:port`.
   */
  constructor(options: ServeMetricsOptions) {
    const listen = options.listen ?? DEFAULT_METRICS_LISTEN;
    try {
      this.address = parseListenAddress(listen);
    } catch (error) {
      throw new TypeError(
        `metrics.listen: ${
          (error as Error).message
        } (e.g. "${DEFAULT_METRICS_LISTEN}")`,
      );
    }
  }

  /** Counts one finished call (the server's `onCall` hook). */
  readonly onCall = (call: CallInfo): void => {
    this.#calls.count(call);
  };

  /** Client connections open now. */
  get openConnections(): number {
    return this.#connections.value;
  }

  /**
   * `options` with the metrics' `onCall` (before the caller's own) and
   * connection count.
   */
  instrument(options: ServeOptions): ServeOptions {
    const given: Methods | SessionMethods = options.methods;
    const own = options.onCall;
    return {
      ...options,
      methods: (session) => {
        this.#connections.track(session);
        return typeof given === "function" ? given(session) : given;
      },
      onCall: own === undefined ? this.onCall : (call) => {
        this.onCall(call);
        own(call);
      },
    };
  }

  /** The text exposition (what a scrape gets). */
  render(): string {
    return this.#families.render([
      {
        name: "rafter_rpc_open_connections",
        help: "Client connections open on this server.",
        value: this.#connections.value,
      },
      ...processGauges(this.#lag.takeMaxLagSeconds()),
    ]);
  }

  /** The answer to an HTTP request of the metrics port. */
  answer(method: string, pathname: string): PlainAnswer {
    return metricsAnswer(method, pathname, () => this.render()) ??
      NOT_FOUND_ANSWER;
  }

  /**
   * The warning for a listen address other hosts can reach, or null.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { ServerMetrics } from "./metrics.ts";
   * assert.equal(new ServerMetrics({}).warning(), null);
   * assert.match(new ServerMetrics({ listen: "0.0.0.0:9464" }).warning()!, /WARNING/);
   * ```
   */
  warning(): string | null {
    const warning = plainPortWarning(
      "metrics.listen",
      this.address,
      "anyone who reaches it reads the server's metrics (method names, counts) without a token",
    );
    return warning === null ? null : `rpc: ${warning}`;
  }

  /**
   * `server` with {@link RpcServer.metricsUrl}, the metrics port closed
   * when it finishes; starts the event-loop probe (stopped then too).
   */
  attach(server: RpcServer, listener: HttpListener): RpcServer {
    const warning = this.warning();
    if (warning !== null) console.warn(warning);
    this.#lag.start();
    const finished = server.finished.then(async () => {
      this.#lag.stop();
      await listener.close().catch(() => {});
    });
    return {
      ...server,
      metricsUrl: `${listener.origin}/metrics`,
      finished,
      close: () => server.close().then(() => finished),
      drain: (graceMs) => server.drain(graceMs).then(() => finished),
    };
  }
}
