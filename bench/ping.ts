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

const { values } = parseArgs({
  args: Deno.args,
  options: {
    calls: { type: "string", default: "10000" },
    warmup: { type: "string", default: "1000" },
  },
});
const calls = Number(values.calls);
const warmup = Number(values.warmup);

/** Round-trip times in ms of `count` sequential runs of `once`. */
async function measure(once: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await once();
  const times = new Array<number>(calls);
  for (let i = 0; i < calls; i++) {
    const start = performance.now();
    await once();
    times[i] = performance.now() - start;
  }
  return times;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

interface Row {
  path: string;
  times: number[];
}

async function rawTcp(): Promise<number[]> {
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
  try {
    return await measure(async () => {
      await conn.write(line);
      let got = 0;
      while (got < line.length) {
        const n = await conn.read(buffer);
        if (n === null) throw new Error("echo server closed");
        got += n;
      }
    });
  } finally {
    conn.close();
    reader.releaseLock();
    await server.stdin.close();
    await server.status;
    await server.stdout.cancel().catch(() => {});
  }
}

const cluster = new LocalCluster();
const rows: Row[] = [];
try {
  rows.push({ path: "raw TCP line echo", times: await rawTcp() });

  await cluster.startRegistry(1);
  await cluster.waitForLeader();
  await cluster.startHello("hello-1");
  const client = connect(cluster.registryUrls);
  const [endpoint] = await client.registry.endpoints("hello");

  const connection = await dial(endpoint.url);
  rows.push({
    path: "plain connection (RpcConnection)",
    times: await measure(() => connection.call("rpc.ping")),
  });
  connection.close();

  rows.push({
    path: "cluster stub (connect + roundRobin)",
    times: await measure(() => client.call("hello", "rpc.ping")),
  });
  client.close();
} finally {
  await cluster.stop();
}

const us = (ms: number) => (ms * 1000).toFixed(1);
const plainAverage = average(rows[1].times);
function average(times: number[]): number {
  return times.reduce((a, b) => a + b, 0) / times.length;
}
console.log(
  `\n${calls} sequential rpc.ping round trips per path (after ${warmup} warm-up calls), 127.0.0.1\n`,
);
console.log("| path | avg µs | p50 µs | p99 µs | avg vs plain connection |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const row of rows) {
  const sorted = [...row.times].sort((a, b) => a - b);
  const avg = average(row.times);
  console.log(
    `| ${row.path} | ${us(avg)} | ${us(percentile(sorted, 0.5))} | ${
      us(percentile(sorted, 0.99))
    } | ${(avg / plainAverage).toFixed(2)}× |`,
  );
}
