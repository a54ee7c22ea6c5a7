/**
 * JSON vs CBOR (issue 9, scenario 3, `codec`): the same `echo` call
 * (params: one nested object of about 1 KiB or 64 KiB as JSON, echoed back
 * as the result) over an NDJSON and a CBOR connection to one server
 * process on 127.0.0.1. For each size it measures calls/s one call at a
 * time and with 16 calls in flight on one connection, in alternating runs
 * (JSON, CBOR, JSON, CBOR, …), and prints a Markdown table of the median
 * run of each, with the bytes on the wire per call (request and response
 * frames, counted on the client's socket), CBOR's ratio to JSON, and the
 * CPU of the client (this process) and of the server over the runs with
 * calls in flight. A script, not a test: it asserts nothing.
 *
 * Flags: `--scenarios codec` (the only one; for `bench/main.ts`), `--runs`,
 * `--run-ms`, `--in-flight`, `--quick`. With `RAFTER_BENCH_JSON=FILE` it
 * also writes its table there as JSON (see `bench/_report.ts`).
 *
 * ```sh
 * deno task bench:codec            # 5 runs of 1 s per cell, about 45 s
 * deno task bench:codec --quick    # 3 runs of 0.25 s, about 7 s
 * deno run -A bench/codec.ts --runs 7 --run-ms 2000
 * deno task bench codec            # through bench/main.ts
 * ```
 *
 * @module
 */

import "../rpc/codec/cbor.ts";
import { benchArgs, benchScenarios, usageError } from "./_args.ts";
import {
  alternate,
  CpuMeter,
  median,
  ratio,
  Report,
  type Row,
} from "./report.ts";
import { countingDialer } from "./_wire.ts";
import type { Codec } from "../rpc/codec/codec.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import { dial } from "../rpc/transport/dial.ts";

const USAGE = `usage: deno task bench:codec [options]

  --runs N       alternating runs per codec and cell; the median is shown (default 5, at least 3)
  --run-ms N     length of one run, ms (default 1000)
  --in-flight N  calls in flight in the concurrent column (default 16)
  --scenarios S  scenarios to run (default: codec, the only one)
  --quick        3 runs of 250 ms
  --help         show this text`;

const values = benchArgs(USAGE, {
  runs: { type: "string", default: "5" },
  "run-ms": { type: "string", default: "1000" },
  "in-flight": { type: "string", default: "16" },
  quick: { type: "boolean", default: false },
  scenarios: { type: "string" },
});
const scenarios = benchScenarios(values.scenarios, ["codec"], USAGE);
const runs = values.quick ? 3 : Number(values.runs);
const runMs = values.quick ? 250 : Number(values["run-ms"]);
const inFlight = Number(values["in-flight"]);
if (
  !Number.isSafeInteger(runs) || runs < 3 || !(runMs > 0) ||
  !Number.isSafeInteger(inFlight) || inFlight < 1
) {
  usageError(
    "--runs must be an integer >= 3, --run-ms positive, --in-flight a positive integer",
    USAGE,
  );
}

const CODECS: Codec[] = ["json", "cbor"];

/** A deterministic pseudo-random sequence (mulberry32). */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = [
  "linen",
  "oak",
  "copper",
  "blue",
  "wool",
  "ceramic",
  "walnut",
  "steel",
  "organic",
  "large",
  "small",
  "set",
  "lamp",
  "chair",
  "mug",
  "throw",
];

/** An order with `count` line items: nested objects, arrays, numbers, text. */
function order(count: number): Record<string, unknown> {
  const next = random(count);
  const word = () => WORDS[Math.floor(next() * WORDS.length)];
  const price = () => Math.round(next() * 20_000) / 100;
  return {
    orderId: `ord-${100_000 + count}`,
    createdAt: "2026-11-30T12:34:56.789Z",
    customer: {
      id: 48_213,
      name: "Ada Lovelace",
      email: "ada@example.com",
      address: {
        street: "12 St James's Square",
        city: "London",
        postcode: "SW1Y 4JH",
        country: "GB",
      },
      vip: true,
    },
    items: Array.from({ length: count }, (_, i) => ({
      sku: `SKU-${(10_000 + i * 37) % 99_991}`,
      title: `${word()} ${word()} ${word()}`,
      quantity: 1 + Math.floor(next() * 5),
      unitPrice: price(),
      discount: next() < 0.3 ? 0.1 : 0,
      tags: [word(), word()],
      size: { w: price(), h: price(), d: price() },
      inStock: next() < 0.9,
    })),
    shipping: { method: "express", cost: 7.5, eta: "2026-12-02" },
    notes: null,
  };
}

/** The order whose JSON text is closest above `bytes`. */
function orderOfSize(bytes: number): Record<string, unknown> {
  let count = 0;
  while (JSON.stringify(order(count)).length < bytes) count++;
  return order(count);
}

/** Request + response bytes per call on a fresh connection (preamble left out). */
async function wireBytes(
  url: string,
  codec: Codec,
  params: unknown,
): Promise<number> {
  const counts = { written: 0, read: 0 };
  const connection = await dial(url, {
    codec,
    dialer: countingDialer(counts),
  });
  await connection.call("echo", [params]);
  counts.written = 0;
  counts.read = 0;
  const calls = 20;
  for (let i = 0; i < calls; i++) await connection.call("echo", [params]);
  connection.close();
  await connection.closed;
  return (counts.written + counts.read) / calls;
}

/** Calls/s of one run: `parallel` closed-loop callers for `ms`. */
async function run(
  connection: RpcConnection,
  params: unknown,
  parallel: number,
  ms: number,
): Promise<number> {
  let calls = 0;
  const start = performance.now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (performance.now() < end) {
        await connection.call("echo", [params]);
        calls++;
      }
    }),
  );
  return calls / ((performance.now() - start) / 1000);
}

/** Calls/s of `run` on `connection`, with the CPU shares of this process and the server. */
async function measured(
  connection: RpcConnection,
  params: unknown,
  parallel: number,
  serverPid: number,
): Promise<{ rate: number; client: number; server: number }> {
  const meter = new CpuMeter(new Map([["server", serverPid]]));
  const rate = await run(connection, params, parallel, runMs);
  const shares = meter.shares();
  return {
    rate,
    client: shares.get("bench") ?? NaN,
    server: shares.get("server") ?? NaN,
  };
}

const report = new Report("codec.ts");
if (scenarios.has("codec")) await codecScenario();
await report.finish();

async function codecScenario(): Promise<void> {
  const server = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./codec_server.ts", import.meta.url).pathname],
    stdin: "piped",
    stdout: "piped",
  }).spawn();
  const lines = server.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const rows: Row[] = [];
  try {
    const { value: banner } = await lines.read();
    const url = /tcp:\/\/\S+/.exec(banner ?? "")?.[0];
    if (url === undefined) throw new Error(`the server said ${banner}`);
    const connections = new Map<Codec, RpcConnection>();
    for (const codec of CODECS) {
      connections.set(
        codec,
        await dial(url, { codec, maxFrameBytes: 4 * 1024 * 1024 }),
      );
    }
    for (
      const [size, bytes] of [["1 KiB", 1024], ["64 KiB", 64 * 1024]] as const
    ) {
      const params = orderOfSize(bytes);
      const jsonBytes = JSON.stringify(params).length;
      for (const codec of CODECS) {
        await run(connections.get(codec)!, params, inFlight, runMs / 2); // warm-up
      }
      // Runs A B A B …: one call at a time, then `inFlight` at a time.
      const [sequential, concurrent] = [
        await alternate(
          runs,
          CODECS,
          (codec) => measured(connections.get(codec)!, params, 1, server.pid),
        ),
        await alternate(
          runs,
          CODECS,
          (codec) =>
            measured(connections.get(codec)!, params, inFlight, server.pid),
        ),
      ];
      const wire = [];
      for (const codec of CODECS) {
        wire.push(await wireBytes(url, codec, params));
      }
      const of = (results: { rate: number }[]) =>
        median(results.map((r) => r.rate));
      for (const [i, codec] of CODECS.entries()) {
        const cpu = (key: "client" | "server") =>
          median(concurrent[i].map((r) => r[key]));
        rows.push({
          label: `${size} (${
            jsonBytes.toLocaleString("en-US")
          } B as JSON), ${codec}`,
          cells: [
            wire[i],
            ratio(wire[i], wire[0]),
            of(sequential[i]),
            ratio(of(sequential[i]), of(sequential[0])),
            of(concurrent[i]),
            ratio(of(concurrent[i]), of(concurrent[0])),
            cpu("client"),
            cpu("server"),
          ],
        });
      }
    }
    for (const connection of connections.values()) connection.close();
  } finally {
    await server.stdin.close();
    await server.status;
    lines.releaseLock();
    await server.stdout.cancel().catch(() => {});
  }
  report.table({
    scenario: "codec",
    title: "Codec: JSON (NDJSON) vs CBOR, echo of one params object",
    note:
      `${runs} alternating runs (JSON, CBOR, JSON, …) of ${runMs} ms per cell, the median shown; the server in its own process on 127.0.0.1, one connection per codec. Bytes on the wire: request + response frames of one call, counted on the client's socket. Ratios: to JSON of the same size. CPU: % of one core over the runs with ${inFlight} in flight (client: this process).`,
    columns: [
      { name: "bytes on the wire per call", unit: "bytes" },
      { name: "bytes vs JSON", unit: "×" },
      { name: "calls/s sequential", unit: "/s" },
      { name: "sequential vs JSON", unit: "×" },
      { name: `calls/s ${inFlight} in flight`, unit: "/s" },
      { name: "in flight vs JSON", unit: "×" },
      { name: "client CPU", unit: "%" },
      { name: "server CPU", unit: "%" },
    ],
    rows,
  });
  const busy = rows.filter((row) => (row.cells[6] as number) >= 90);
  if (busy.length > 0) {
    report.note(
      `codec: the client process was at ≥ 90% of a core in ${
        busy.map((row) => row.label).join("; ")
      } with ${inFlight} in flight: those calls/s measure the client's encoding and decoding as much as the server's (both sides run the codec).`,
    );
  }
}
