/**
 * JSON vs CBOR: the same `echo` call (params: one nested object of about
 * 1 KiB or 64 KiB as JSON, echoed back as the result) over an NDJSON and a
 * CBOR connection to one server process on 127.0.0.1. For each size it
 * measures calls/s one call at a time and with 16 calls in flight on one
 * connection, in alternating runs (JSON, CBOR, JSON, CBOR, …), and prints
 * the median run of each, with the bytes on the wire per call (request and
 * response frames, counted on the client's socket) and CBOR's ratio to
 * JSON. A script, not a test: it asserts nothing.
 *
 * ```sh
 * deno task bench:codec            # 5 runs of 1 s per cell, about 45 s
 * deno task bench:codec --quick    # 3 runs of 0.25 s, about 8 s
 * deno run -A bench/codec.ts --runs 7 --run-ms 2000
 * ```
 *
 * @module
 */

import "../rpc/cbor.ts";
import { benchArgs, usageError } from "./_args.ts";
import type { Codec } from "../rpc/codec.ts";
import type { RpcConnection } from "../rpc/connection.ts";
import { denoTcpDialer } from "../adapter/deno/tcp.ts";
import { dial } from "../rpc/dial.ts";
import type { ByteStream, Dialer } from "../rpc/transport.ts";

const USAGE = `usage: deno task bench:codec [options]

  --runs N       alternating runs per codec and cell; the median is shown (default 5, at least 3)
  --run-ms N     length of one run, ms (default 1000)
  --in-flight N  calls in flight in the concurrent column (default 16)
  --quick        3 runs of 250 ms
  --help         show this text`;

const values = benchArgs(USAGE, {
  runs: { type: "string", default: "5" },
  "run-ms": { type: "string", default: "1000" },
  "in-flight": { type: "string", default: "16" },
  quick: { type: "boolean", default: false },
});
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

/** The Deno dialer, counting the bytes of every stream it opens. */
function countingDialer(counts: { written: number; read: number }): Dialer {
  return async (url, options) => {
    const stream = await denoTcpDialer(url, options);
    const writer = stream.writable.getWriter();
    const counted: ByteStream = {
      readable: stream.readable.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            counts.read += chunk.length;
            controller.enqueue(chunk);
          },
        }),
      ),
      writable: new WritableStream<Uint8Array>({
        write(chunk) {
          counts.written += chunk.length;
          return writer.write(chunk);
        },
      }),
      close: () => stream.close(),
    };
    return counted;
  };
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

function median(numbers: number[]): number {
  const sorted = [...numbers].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const server = new Deno.Command(Deno.execPath(), {
  args: ["run", "-A", new URL("./codec_server.ts", import.meta.url).pathname],
  stdin: "piped",
  stdout: "piped",
}).spawn();
const lines = server.stdout.pipeThrough(new TextDecoderStream()).getReader();
const { value: banner } = await lines.read();
const url = /tcp:\/\/\S+/.exec(banner ?? "")?.[0];
if (url === undefined) throw new Error(`the server said ${banner}`);

interface Row {
  size: string;
  jsonBytes: number;
  codec: Codec;
  wire: number;
  sequential: number;
  concurrent: number;
}

const rows: Row[] = [];
try {
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
    const results = new Map<
      Codec,
      { sequential: number[]; concurrent: number[] }
    >(
      CODECS.map((codec) => [codec, { sequential: [], concurrent: [] }]),
    );
    for (const codec of CODECS) {
      await run(connections.get(codec)!, params, inFlight, runMs / 2); // warm-up
    }
    for (
      const [mode, parallel] of [["sequential", 1], [
        "concurrent",
        inFlight,
      ]] as const
    ) {
      for (let i = 0; i < runs; i++) {
        for (const codec of i % 2 === 0 ? CODECS : [...CODECS].reverse()) {
          results.get(codec)![mode].push(
            await run(connections.get(codec)!, params, parallel, runMs),
          );
        }
      }
    }
    for (const codec of CODECS) {
      const result = results.get(codec)!;
      rows.push({
        size,
        jsonBytes,
        codec,
        wire: await wireBytes(url, codec, params),
        sequential: median(result.sequential),
        concurrent: median(result.concurrent),
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

const number = (n: number) => Math.round(n).toLocaleString("en-US");
console.log(
  `\n${runs} alternating runs of ${runMs} ms per cell (median shown); echo of one params object; server in its own process on 127.0.0.1\n`,
);
console.log(
  `| params (JSON size) | codec | bytes on the wire per call | calls/s sequential | calls/s ${inFlight} in flight |`,
);
console.log("| --- | --- | ---: | ---: | ---: |");
for (const row of rows) {
  const json = rows.find((r) => r.size === row.size && r.codec === "json")!;
  const ratio = (a: number, b: number) =>
    row.codec === "json" ? "" : ` (${(a / b).toFixed(2)}×)`;
  console.log(
    `| ${row.size} (${number(row.jsonBytes)} B) | ${row.codec} | ${
      number(row.wire)
    }${ratio(row.wire, json.wire)} | ${number(row.sequential)}${
      ratio(row.sequential, json.sequential)
    } | ${number(row.concurrent)}${ratio(row.concurrent, json.concurrent)} |`,
  );
}
