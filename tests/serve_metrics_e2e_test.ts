/**
 * `serve({ metrics })` end to end, on the Deno and the Node adapter: N
 * calls over TCP of which K fail, then a scrape of `GET /metrics` with
 * `fetch`, whose counters and histogram must say exactly that.
 *
 * @module
 */

import assert from "node:assert/strict";
import { serve as serveDeno } from "../adapter/deno/serve.ts";
import { serve as serveNode } from "../adapter/node/serve.ts";
import type { RpcServer, ServeOptions } from "../rpc/server/server.ts";
import { dial } from "../rpc/transport/dial.ts";
import { RpcError } from "../rpc/errors.ts";
import { METRICS_CONTENT_TYPE } from "../internal/metrics.ts";

const N = 40;
const K = 7;

/** The value of the sample `line` names (exact series), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const runtimes: [string, (options: ServeOptions) => Promise<RpcServer>][] = [
  ["deno", (options) => Promise.resolve(serveDeno(options))],
  ["node", serveNode],
];

for (const [runtime, serve] of runtimes) {
  Deno.test(`serve({ metrics }) on ${runtime}: N calls, K failed, scraped counters, histogram and connections say so`, async () => {
    const server = await serve({
      methods: {
        maybe: (fail: boolean) => {
          if (fail) throw new RpcError(-32042, "asked to fail");
          return "fine";
        },
      },
      metrics: { listen: "127.0.0.1:0" },
    });
    let closed = false;
    try {
      assert.match(server.metricsUrl!, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      const connection = await dial(server.url);
      const outcomes = await Promise.allSettled(
        Array.from(
          { length: N },
          (_, i) => connection.call("maybe", [i < K]),
        ),
      );
      assert.equal(outcomes.filter((o) => o.status === "rejected").length, K);
      await assert.rejects(connection.call("no.such"), { code: -32601 });

      const response = await fetch(server.metricsUrl!);
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("content-type"), METRICS_CONTENT_TYPE);
      const text = await response.text();
      const calls = "rafter_rpc_calls_total";
      assert.equal(
        sample(text, `${calls}{method="maybe",outcome="ok"}`),
        N - K,
      );
      assert.equal(
        sample(text, `${calls}{method="maybe",outcome="-32042"}`),
        K,
      );
      assert.equal(
        sample(text, `${calls}{method="(unknown)",outcome="-32601"}`),
        1,
      );
      const latency = "rafter_rpc_call_duration_seconds";
      assert.equal(sample(text, `${latency}_count{method="maybe"}`), N);
      assert.equal(
        sample(text, `${latency}_bucket{method="maybe",le="+Inf"}`),
        N,
      );
      assert.equal(sample(text, "rafter_rpc_open_connections"), 1);
      assert.ok(sample(text, "rafter_rpc_received_bytes_total")! > N * 30);
      assert.ok(sample(text, "rafter_rpc_sent_bytes_total")! > N * 30);
      assert.ok(sample(text, "process_resident_memory_bytes")! > 0);
      assert.ok(sample(text, "process_event_loop_lag_seconds")! >= 0);

      const other = await fetch(new URL("/", server.metricsUrl));
      assert.equal(other.status, 404);
      await other.body?.cancel();

      connection.close();
      // The connection's end is counted (the server sees it shortly).
      for (let i = 0; i < 200; i++) {
        const now = await (await fetch(server.metricsUrl!)).text();
        if (sample(now, "rafter_rpc_open_connections") === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      const after = await (await fetch(server.metricsUrl!)).text();
      assert.equal(sample(after, "rafter_rpc_open_connections"), 0);

      await server.close();
      closed = true;
      // The metrics port closed with the server.
      await assert.rejects(fetch(server.metricsUrl!));
    } finally {
      if (!closed) await server.close();
    }
  });
}

Deno.test("serve({ metrics }): a bad listen address is refused before anything listens", () => {
  assert.throws(
    () => serveDeno({ methods: {}, metrics: { listen: "nine" } }),
    {
      name: "TypeError",
      message: /^metrics\.listen: invalid listen address "nine"/,
    },
  );
});

Deno.test("serve({ metrics }): a non-loopback metrics address logs a warning", async () => {
  const warned: unknown[] = [];
  const original = console.warn;
  console.warn = (...args: unknown[]) => void warned.push(args.join(" "));
  let server: RpcServer | undefined;
  try {
    server = serveDeno({ methods: {}, metrics: { listen: "0.0.0.0:0" } });
    assert.equal(warned.length, 1);
    assert.match(
      String(warned[0]),
      /WARNING: metrics\.listen 0\.0\.0\.0:0 is not a loopback address/,
    );
  } finally {
    console.warn = original;
    await server?.close();
  }
});
