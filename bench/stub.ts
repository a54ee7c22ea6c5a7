/**
 * The cluster stub's distributors under one slow server, and the stub's
 * overhead per call over a plain connection.
 *
 * Starts a 1-node registry and three `exec` servers (real `deno run`
 * processes on 127.0.0.1, each bound with a lease through `bindServer`,
 * reporting its calls in flight as its load); every call works
 * `--work-ms` (default 2 ms), and the server `slow` adds `--slow-ms`
 * (default 20 ms). Then, for each built-in distributor in turn, a fresh
 * client runs `--callers` concurrent closed-loop callers (default 16) of
 * idempotent calls for `--seconds` (default 3) after a warm-up, and prints
 * a Markdown table: calls/s, p50, p99, p99.9 latency, the share of calls
 * the slow server answered, and errors.
 *
 * The second table is the stub's overhead: `exec(id, 0)` against a name
 * with one server, through a plain `RpcConnection` and through the cluster
 * stub, interleaved in rounds, sequential (one call at a time: average,
 * p50, p99) and with the callers concurrent (calls/s); the ratio is the
 * stub's cost per call. A script, not a test: it asserts nothing.
 *
 * ```sh
 * deno task bench:stub                      # about 45 s
 * deno task bench:stub --quick              # about 15 s
 * deno run -A bench/stub.ts --seconds 10 --callers 64 --slow-ms 50
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { LocalCluster } from "../examples/demo/local_cluster.ts";
import { dial } from "../rpc/dial.ts";
import { connect } from "../stub/client.ts";
import type { Distributor } from "../stub/distributor.ts";
import {
  consistentHash,
  firstAvailable,
  leastInFlight,
  leastLoaded,
  p2cEwma,
  random,
  roundRobin,
  sticky,
  weightedRoundRobin,
} from "../stub/distributors/mod.ts";

const USAGE = `usage: deno run -A bench/stub.ts [options]

  --seconds N    measured time of each distributor row (default 3)
  --warmup N     warm-up time before each row, seconds (default 0.5)
  --callers N    concurrent closed-loop callers (default 16)
  --work-ms N    time every call works on the server (default 2)
  --slow-ms N    extra time on the slow server (default 20)
  --calls N      sequential calls per path in the overhead table (default 5000)
  --quick        1 s rows, 0.2 s warm-ups, 2000 overhead calls
  --help         show this text`;

let values;
try {
  ({ values } = parseArgs({
    args: Deno.args,
    options: {
      seconds: { type: "string" },
      warmup: { type: "string" },
      callers: { type: "string", default: "16" },
      "work-ms": { type: "string", default: "2" },
      "slow-ms": { type: "string", default: "20" },
      calls: { type: "string" },
      quick: { type: "boolean", default: false },
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
const quick = values.quick;
const seconds = Number(values.seconds ?? (quick ? "1" : "3"));
const warmupSeconds = Number(values.warmup ?? (quick ? "0.2" : "0.5"));
const callers = Number(values.callers);
const workMs = Number(values["work-ms"]);
const slowMs = Number(values["slow-ms"]);
const calls = Number(values.calls ?? (quick ? "2000" : "5000"));
const bad = [
  [seconds > 0 && seconds <= 600, "--seconds must be in (0, 600]"],
  [warmupSeconds >= 0 && warmupSeconds <= 60, "--warmup must be in [0, 60]"],
  [
    Number.isSafeInteger(callers) && callers >= 1 && callers <= 1000,
    "--callers must be an integer in [1, 1000]",
  ],
  [workMs >= 0 && workMs <= 10_000, "--work-ms must be in [0, 10000]"],
  [slowMs >= 0 && slowMs <= 10_000, "--slow-ms must be in [0, 10000]"],
  [
    Number.isSafeInteger(calls) && calls >= 1 && calls <= 1_000_000,
    "--calls must be an integer in [1, 1000000]",
  ],
].filter(([ok]) => !ok).map(([, message]) => message);
if (bad.length > 0) {
  console.error(`bench: ${bad.join("; ")}\n\n${USAGE}`);
  Deno.exit(2);
}

interface Exec {
  exec(callId: string, delayMs?: number): { server: string; callId: string };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

/** The median of `values` (the mean of the middle two for an even count). */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? sorted[mid]
    : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** What a closed-loop run measured. */
interface LoadResult {
  latencies: number[];
  byServer: Map<string, number>;
  errors: number;
  firstError?: string;
  elapsedMs: number;
}

/**
 * Runs `callers` closed loops of `once` for `ms` (each caller sends its
 * next call when the last one answered); bounded by time.
 */
async function closedLoop(
  once: (callId: string) => Promise<{ server: string }>,
  ms: number,
): Promise<LoadResult> {
  const result: LoadResult = {
    latencies: [],
    byServer: new Map(),
    errors: 0,
    elapsedMs: 0,
  };
  const started = performance.now();
  const endAt = started + ms;
  let sequence = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < endAt) {
        const callStarted = performance.now();
        try {
          const { server } = await once(`c${++sequence}`);
          result.latencies.push(performance.now() - callStarted);
          result.byServer.set(server, (result.byServer.get(server) ?? 0) + 1);
        } catch (error) {
          result.errors++;
          result.firstError ??= (error as Error).message;
        }
      }
    }),
  );
  result.elapsedMs = performance.now() - started;
  return result;
}

const distributors: [string, () => Distributor][] = [
  ["roundRobin()", () => roundRobin()],
  ["random()", () => random()],
  ["weightedRoundRobin()", () => weightedRoundRobin()],
  ["firstAvailable()", () => firstAvailable()],
  ["leastLoaded()", () => leastLoaded()],
  ["leastInFlight()", () => leastInFlight()],
  ["p2cEwma()", () => p2cEwma()],
  [
    "consistentHash(callId)",
    () => consistentHash((call) => String((call.params as unknown[])[0])),
  ],
  ["sticky()", () => sticky()],
];

const cluster = new LocalCluster();
const rows: string[] = [];
const overheadRows: string[] = [];
/** Concurrent windows a path in the overhead table, alternating A B, B A. */
const windows = quick ? 6 : 10;
/** Plain calls/s over stub calls/s: the median of the windows' ratios. */
let concurrentRatio = Number.NaN;
try {
  await cluster.startRegistry(1);
  await cluster.waitForLeader();
  const server = (id: string, name: string, extraMs: number) =>
    cluster.spawn(id, "tests/_exec_server.ts", [
      "--registry",
      cluster.registryUrls.join(","),
      "--id",
      id,
      "--name",
      name,
      "--ttl-ms",
      "10000",
      "--extra-delay-ms",
      String(extraMs),
    ], /ready on/);
  await Promise.all([
    server("fast-1", "exec", 0),
    server("fast-2", "exec", 0),
    server("slow", "exec", slowMs),
    server("solo", "solo", 0),
  ]);

  for (const [label, make] of distributors) {
    const client = connect(cluster.registryUrls);
    try {
      const stub = client.stub<Exec>("exec", {
        distributor: make(),
        idempotent: true,
      });
      await closedLoop((id) => stub.exec(id, workMs), warmupSeconds * 1000);
      const r = await closedLoop((id) => stub.exec(id, workMs), seconds * 1000);
      const sorted = [...r.latencies].sort((a, b) => a - b);
      const total = r.latencies.length;
      const slowShare = total === 0 ? 0 : (r.byServer.get("slow") ?? 0) / total;
      rows.push(
        `| ${label} | ${(total / (r.elapsedMs / 1000)).toFixed(0)} | ${
          percentile(sorted, 0.5).toFixed(1)
        } | ${percentile(sorted, 0.99).toFixed(1)} | ${
          percentile(sorted, 0.999).toFixed(1)
        } | ${(slowShare * 100).toFixed(1)}% | ${r.errors}${
          r.firstError ? ` (${r.firstError.slice(0, 60)})` : ""
        } |`,
      );
    } finally {
      client.close();
    }
  }

  // The stub's overhead: one server, plain connection vs stub.
  const client = connect(cluster.registryUrls);
  const [solo] = (await client.lookup("solo")).endpoints;
  const connection = await dial(solo.url);
  try {
    const stub = client.stub<Exec>("solo");
    const paths = [
      {
        name: "plain connection (RpcConnection)",
        once: (id: string) =>
          connection.call("exec", [id, 0]) as Promise<{ server: string }>,
        times: [] as number[],
        rate: 0,
      },
      {
        name: "cluster stub (roundRobin)",
        once: (id: string) => stub.exec(id, 0),
        times: [] as number[],
        rate: 0,
      },
    ];
    for (const path of paths) {
      for (let i = 0; i < Math.min(1000, calls); i++) await path.once(`w${i}`);
    }
    const rounds = 10;
    const perRound = Math.ceil(calls / rounds);
    for (let round = 0; round < rounds; round++) {
      for (const path of paths) {
        for (let i = 0; i < perRound && path.times.length < calls; i++) {
          const started = performance.now();
          await path.once(`s${round}-${i}`);
          path.times.push(performance.now() - started);
        }
      }
    }
    // Concurrent: alternate short windows (A B, B A, ...) so drift hits
    // both alike; the ratio is the median of the windows' ratios.
    const sums = paths.map(() => ({ count: 0, ms: 0 }));
    const ratios: number[] = [];
    for (let w = 0; w < windows; w++) {
      const rates = [0, 0];
      const order = w % 2 === 0 ? [0, 1] : [1, 0];
      for (const i of order) {
        const r = await closedLoop(paths[i].once, (seconds * 1000) / windows);
        sums[i].count += r.latencies.length;
        sums[i].ms += r.elapsedMs;
        rates[i] = r.latencies.length / r.elapsedMs;
      }
      ratios.push(rates[0] / rates[1]);
    }
    for (const [i, path] of paths.entries()) {
      path.rate = sums[i].count / (sums[i].ms / 1000);
    }
    concurrentRatio = median(ratios);
    const average = (t: number[]) => t.reduce((a, b) => a + b, 0) / t.length;
    const plainAverage = average(paths[0].times);
    for (const path of paths) {
      const sorted = [...path.times].sort((a, b) => a - b);
      overheadRows.push(
        `| ${path.name} | ${(average(path.times) * 1000).toFixed(1)} | ${
          (percentile(sorted, 0.5) * 1000).toFixed(1)
        } | ${(percentile(sorted, 0.99) * 1000).toFixed(1)} | ${
          (average(path.times) / plainAverage).toFixed(3)
        }× | ${path.rate.toFixed(0)} | ${
          (path === paths[0] ? 1 : concurrentRatio).toFixed(3)
        }× |`,
      );
    }
  } finally {
    connection.close();
    client.close();
  }
} finally {
  await cluster.stop();
}

console.log(
  `\n${callers} concurrent callers of idempotent calls, ${seconds} s a row after ${warmupSeconds} s warm-up; every call works ${workMs} ms, server "slow" (1 of 3) adds ${slowMs} ms; 127.0.0.1\n`,
);
console.log(
  "| distributor | calls/s | p50 ms | p99 ms | p99.9 ms | share to slow | errors |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | --- |");
for (const row of rows) console.log(row);
console.log(
  `\nStub overhead: exec(id, 0) on a name with one server; ${calls} sequential calls a path, interleaved in 10 rounds, then ${callers} concurrent callers for ${seconds} s a path in ${windows} alternating windows (time per call vs plain: the median of the windows' ratios)\n`,
);
console.log(
  "| path | avg µs | p50 µs | p99 µs | avg vs plain | calls/s (concurrent) | time per call vs plain |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const row of overheadRows) console.log(row);
