/**
 * The classic RMI experiment: N sequential `rpc.ping` round trips (default
 * 10,000), timed one by one, over three paths side by side in one run:
 *
 * 1. raw TCP: a line echoed by a plain TCP server (the floor);
 * 2. plain connection: `RpcConnection.call("rpc.ping")` to a hello server;
 * 3. cluster stub: the same call through `connect(...).call("hello",
 *    "rpc.ping")` (registry lookup once, cluster map, distributor, pool).
 *
 * Servers run as separate processes; the registry is a single node. Prints
 * a Markdown table of average, p50 and p99 round-trip time in µs and each
 * path's ratio to the plain connection.
 *
 * ```sh
 * deno task bench            # 10,000 calls per path
 * deno task bench --calls 2000
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { LocalCluster } from "../examples/demo/local_cluster.ts";
import { dial } from "../rpc/dial.ts";
import { connect } from "../stub/client.ts";

const USAGE = `usage: deno task bench [options]

  --calls N    round trips measured per path (default 10000)
  --warmup N   round trips before measuring, per path (default 1000)
  --help       show this text`;

let values;
try {
  ({ values } = parseArgs({
    args: Deno.args,
    options: {
      calls: { type: "string", default: "10000" },
      warmup: { type: "string", default: "1000" },
      help: { type: "boolean", default: false },
    },
    strict: true,
  }));
} catch (error) {
  console.error(`bench: ${(error as Error).message}\n\n${USAGE}`);
  Deno.exit(2);
}
if (values.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const calls = Number(values.calls);
const warmup = Number(values.warmup);
if (
  !Number.isSafeInteger(calls) || calls < 1 || !Number.isSafeInteger(warmup) ||
  warmup < 0
) {
  console.error(
    `bench: --calls must be a positive integer and --warmup an integer >= 0\n\n${USAGE}`,
  );
  Deno.exit(2);
}

/** A path under test: one sequential round trip per `once()` call. */
interface Path {
  name: string;
  once: () => Promise<unknown>;
  times: number[];
}

/** Number of rounds the calls are split into. */
const ROUNDS = 10;

/**
 * Warms every path up, then measures them interleaved: each round runs
 * `calls / ROUNDS` round trips on each path in turn, so drift in the
 * machine's load and JIT warm-up hit all paths alike.
 */
async function measure(paths: Path[]): Promise<void> {
  for (const path of paths) {
    for (let i = 0; i < warmup; i++) await path.once();
  }
  const perRound = Math.ceil(calls / ROUNDS);
  for (let round = 0; round < ROUNDS; round++) {
    for (const path of paths) {
      for (let i = 0; i < perRound && path.times.length < calls; i++) {
        const start = performance.now();
        await path.once();
        path.times.push(performance.now() - start);
      }
    }
  }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

/** Starts the echo server and connects: the raw TCP path and its cleanup. */
async function rawTcp(): Promise<{ path: Path; close(): Promise<void> }> {
  const server = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./echo_server.ts", import.meta.url).pathname],
    stdin: "piped",
    stdout: "piped",
  }).spawn();
  const reader = server.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const { value } = await reader.read();
  const port = Number(/:(\d+)/.exec(value ?? "")?.[1]);
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  conn.setNoDelay(true);
  const line = new TextEncoder().encode(
    '{"jsonrpc":"2.0","method":"rpc.ping","id":1}\n',
  );
  const buffer = new Uint8Array(4096);
  return {
    path: {
      name: "raw TCP line echo",
      times: [],
      once: async () => {
        await conn.write(line);
        let got = 0;
        while (got < line.length) {
          const n = await conn.read(buffer);
          if (n === null) throw new Error("echo server closed");
          got += n;
        }
      },
    },
    async close() {
      conn.close();
      reader.releaseLock();
      await server.stdin.close();
      await server.status;
      await server.stdout.cancel().catch(() => {});
    },
  };
}

const cluster = new LocalCluster();
const raw = await rawTcp();
let paths: Path[] = [];
try {
  await cluster.startRegistry(1);
  await cluster.waitForLeader();
  await cluster.startHello("hello-1");
  const client = connect(cluster.registryUrls);
  const [endpoint] = (await client.lookup("hello")).endpoints;
  const connection = await dial(endpoint.url);
  paths = [
    raw.path,
    {
      name: "plain connection (RpcConnection)",
      times: [],
      once: () => connection.call("rpc.ping"),
    },
    {
      name: "cluster stub (connect + roundRobin)",
      times: [],
      once: () => client.call("hello", "rpc.ping"),
    },
  ];
  try {
    await measure(paths);
  } finally {
    connection.close();
    client.close();
  }
} finally {
  await raw.close();
  await cluster.stop();
}

const us = (ms: number) => (ms * 1000).toFixed(1);
const plainAverage = average(paths[1].times);
function average(times: number[]): number {
  return times.reduce((a, b) => a + b, 0) / times.length;
}
console.log(
  `\n${calls} sequential rpc.ping round trips per path, interleaved in ${ROUNDS} rounds (after ${warmup} warm-up calls each), 127.0.0.1\n`,
);
console.log("| path | avg µs | p50 µs | p99 µs | avg vs plain connection |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const path of paths) {
  const sorted = [...path.times].sort((a, b) => a - b);
  const avg = average(path.times);
  console.log(
    `| ${path.name} | ${us(avg)} | ${us(percentile(sorted, 0.5))} | ${
      us(percentile(sorted, 0.99))
    } | ${(avg / plainAverage).toFixed(2)}× |`,
  );
}
