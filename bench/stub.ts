/**
 * The cluster stub (issue 9, scenario 4, `stub`): its overhead per call
 * over a plain connection with each built-in distributor, and the
 * distributors under one slow server.
 *
 * Starts a 1-node registry and four `exec` servers (real `deno run`
 * processes on 127.0.0.1, each bound with a lease through `bindServer`,
 * reporting its calls in flight as its load).
 *
 * 1. **Overhead**: `exec(id, 0)` against the name `solo` with one server,
 *    through a plain `RpcConnection` and through a cluster stub with each
 *    built-in distributor, in alternating rounds (plain, roundRobin,
 *    random, …, plain, …; `--rounds`, default 3): `--calls` sequential
 *    calls a path in all (p50, p99) and `--callers` concurrent closed-loop
 *    callers (default 16) for `--seconds` ÷ rounds ÷ 2 a run (calls/s), each
 *    stub run next to a plain one. The
 *    overhead is the stub's extra time per call over the plain connection
 *    (target ≤ 10%), with the CPU of the client (this process) and of the
 *    server.
 * 2. **Distributors under one slow server**: every call works `--work-ms`
 *    (default 2 ms), the server `slow` (1 of the 3 under `exec`) adds
 *    `--slow-ms` (default 20 ms); for each distributor in turn (after
 *    every other row ran, again: `--rounds` alternating rounds), its own
 *    client (warmed up once) runs the callers of idempotent calls for
 *    `--seconds` ÷ rounds: calls/s (and its ratio to roundRobin), p50, p99,
 *    p99.9, the share of calls the slow server answered, errors.
 *
 * Every figure is the median of the rounds. With `RAFTER_BENCH_JSON=FILE`
 * it also writes the tables there as JSON (see `bench/_report.ts`);
 * `--scenarios stub` is its only scenario. A script, not a test: it asserts
 * nothing about speed; it exits 1 when a path fails a call.
 *
 * ```sh
 * deno task bench:stub                      # about 70 s
 * deno task bench:stub --quick              # about 12 s
 * deno run -A bench/stub.ts --seconds 10 --callers 64 --slow-ms 50
 * deno task bench stub                      # through bench/main.ts
 * ```
 *
 * @module
 */

import { benchArgs, benchScenarios, usageError } from "./_args.ts";
import {
  alternate,
  CpuMeter,
  median,
  percentile,
  ratio,
  Report,
  type Row,
} from "./report.ts";
import { LocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";
import { connect, type RafterClient } from "../stub/client.ts";
import type { Distributor } from "../stub/distributors/distributor.ts";
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

  --scenarios S  scenarios to run (default: stub, the only one)
  --tables T     tables to run, comma-separated: overhead, slow (default both)
  --seconds N    measured time of each distributor row, all rounds together;
                 an overhead run (a stub's or its plain neighbour's) takes
                 half of a round's share (default 3)
  --warmup N     warm-up time before each distributor row, seconds (default 0.5)
  --callers N    concurrent closed-loop callers (default 16)
  --work-ms N    time every call works on the server, slow-server table (default 2)
  --slow-ms N    extra time on the slow server (default 20)
  --calls N      sequential calls per path in the overhead table (default 3000)
  --rounds N     alternating rounds; every figure is their median (default 3, at least 3)
  --quick        0.36 s a path, 0.1 s warm-ups, 450 overhead calls
  --help         show this text`;

const values = benchArgs(USAGE, {
  scenarios: { type: "string" },
  tables: { type: "string", default: "overhead,slow" },
  seconds: { type: "string" },
  warmup: { type: "string" },
  callers: { type: "string", default: "16" },
  "work-ms": { type: "string", default: "2" },
  "slow-ms": { type: "string", default: "20" },
  calls: { type: "string" },
  rounds: { type: "string", default: "3" },
  quick: { type: "boolean", default: false },
});
const scenarios = benchScenarios(values.scenarios, ["stub"], USAGE);
const quick = values.quick === true;
const TABLES = ["overhead", "slow"];
const tables = new Set(
  String(values.tables).split(",").map((t) => t.trim()).filter((t) => t),
);
const text = (value: string | boolean | undefined, fallback: string) =>
  typeof value === "string" ? value : fallback;
const seconds = Number(text(values.seconds, quick ? "0.36" : "3"));
const warmupSeconds = Number(text(values.warmup, quick ? "0.1" : "0.5"));
const callers = Number(values.callers);
const workMs = Number(values["work-ms"]);
const slowMs = Number(values["slow-ms"]);
const calls = Number(text(values.calls, quick ? "450" : "3000"));
const rounds = Number(values.rounds);
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
  [
    Number.isSafeInteger(rounds) && rounds >= 3 && rounds <= 100,
    "--rounds must be an integer in [3, 100]",
  ],
  [
    tables.size > 0 && [...tables].every((t) => TABLES.includes(t)),
    `--tables must name some of ${TABLES.join(", ")}`,
  ],
].filter(([ok]) => !ok).map(([, message]) => message as string);
if (bad.length > 0) usageError(bad.join("; "), USAGE);

interface Exec {
  exec(callId: string, delayMs?: number): { server: string; callId: string };
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
  ["leastLoaded({ latency: false })", () => leastLoaded({ latency: false })],
  ["leastInFlight()", () => leastInFlight()],
  ["p2cEwma()", () => p2cEwma()],
  [
    "consistentHash(callId)",
    () => consistentHash((call) => String((call.params as unknown[])[0])),
  ],
  ["sticky()", () => sticky()],
];

const report = new Report("stub.ts");
const cluster = new LocalCluster();
/** Share of one core above which the client is called saturated, %. */
const SATURATED = 90;

/** A path of the overhead table: how one call is made. */
interface Path {
  label: string;
  once(callId: string): Promise<{ server: string }>;
}

/** One round of a path: sequential latencies (ms) and concurrent calls/s. */
interface PathRound {
  times: number[];
  rate: number;
  client: number;
  server: number;
}

/**
 * One round of `path`: `perRound` sequential calls, then the callers for
 * `windowMs`; CPU of this process and the server over the round.
 */
async function pathRound(
  path: Path,
  perRound: number,
  windowMs: number,
  serverPid: number,
  round: number,
): Promise<PathRound> {
  const meter = new CpuMeter(new Map([["server", serverPid]]));
  const times: number[] = [];
  for (let i = 0; i < perRound; i++) {
    const started = performance.now();
    await path.once(`s${round}-${i}`);
    times.push(performance.now() - started);
  }
  const r = await closedLoop(path.once, windowMs);
  if (r.errors > 0) {
    throw new Error(
      `${path.label}: ${r.errors} calls failed (${r.firstError})`,
    );
  }
  const shares = meter.shares();
  return {
    times,
    rate: r.latencies.length / (r.elapsedMs / 1000),
    client: shares.get("bench") ?? NaN,
    server: shares.get("server") ?? NaN,
  };
}

/** The overhead table: plain connection vs a stub with each distributor. */
async function overheadTable(): Promise<void> {
  const client = connect(cluster.registryUrls);
  const [solo] = (await client.lookup("solo")).endpoints;
  const connection = await dial(solo.url);
  try {
    const paths: Path[] = [
      {
        label: "plain connection (RpcConnection)",
        once: (id) =>
          connection.call("exec", [id, 0]) as Promise<{ server: string }>,
      },
      ...distributors.map(([label, make]): Path => {
        const stub = client.stub<Exec>("solo", { distributor: make() });
        return {
          label: `cluster stub, ${label}`,
          once: (id) => stub.exec(id, 0),
        };
      }),
    ];
    for (const path of paths) {
      for (let i = 0; i < Math.min(300, calls); i++) await path.once(`w${i}`);
    }
    const serverPid = cluster.child("solo").pid;
    const perRound = Math.ceil(calls / rounds);
    // Every stub run has a plain neighbour: half the time each.
    const windowMs = (seconds * 1000) / rounds / 2;
    const [plainPath, ...stubPaths] = paths;
    // Each stub is measured right next to a plain run (plain first in even
    // rounds, the stub first in odd ones): its overhead in a round is
    // against that neighbour, and the table shows the median over rounds.
    const pairs = await alternate(rounds, stubPaths, async (path, round) => {
      const plain = () =>
        pathRound(plainPath, perRound, windowMs, serverPid, round);
      const stub = () => pathRound(path, perRound, windowMs, serverPid, round);
      if (round % 2 === 0) {
        const a = await plain();
        return { plain: a, stub: await stub() };
      }
      const b = await stub();
      return { plain: await plain(), stub: b };
    });
    const p50Of = (r: PathRound) =>
      percentile(r.times.toSorted((a, b) => a - b), 0.5) * 1000;
    const overhead = (a: number | null) => a === null ? NaN : (a - 1) * 100;
    const summarize = (runs: PathRound[]) => ({
      p50: median(runs.map(p50Of)),
      p99: percentile(
        runs.flatMap((r) => r.times).sort((a, b) => a - b),
        0.99,
      ) * 1000,
      rate: median(runs.map((r) => r.rate)),
      client: median(runs.map((r) => r.client)),
      server: median(runs.map((r) => r.server)),
    });
    const plainSummary = summarize(pairs.flat().map((pair) => pair.plain));
    const rows: Row[] = [{
      label: `${plainPath.label}, all its runs`,
      cells: [
        plainSummary.p50,
        plainSummary.p99,
        0,
        plainSummary.rate,
        0,
        plainSummary.client,
        plainSummary.server,
      ],
    }];
    for (const [i, path] of stubPaths.entries()) {
      const summary = summarize(pairs[i].map((pair) => pair.stub));
      rows.push({
        label: path.label,
        cells: [
          summary.p50,
          summary.p99,
          median(
            pairs[i].map((pair) =>
              overhead(ratio(p50Of(pair.stub), p50Of(pair.plain)))
            ),
          ),
          summary.rate,
          median(
            pairs[i].map((pair) =>
              overhead(ratio(pair.plain.rate, pair.stub.rate))
            ),
          ),
          summary.client,
          summary.server,
        ],
      });
    }
    const saturated = [plainSummary, ...pairs.flat().map((p) => p.stub)]
      .some((s) => s.client >= SATURATED);
    report.table({
      scenario: "stub",
      title: "Cluster stub overhead over a plain connection, each distributor",
      note:
        `exec(id, 0) on the name "solo" (one server process on 127.0.0.1), from this process: ${perRound} sequential calls a path and round, then ${callers} concurrent closed-loop callers for ${
          windowMs.toFixed(0)
        } ms; ${rounds} alternating rounds over the distributors, each stub run right next to a plain run (plain first in even rounds, the stub first in odd ones); medians over the rounds (p99: of all the sequential calls). Overhead: the stub's extra time per call over its neighbouring plain run (sequential: p50 ratio − 1; concurrent: plain calls/s ÷ stub calls/s − 1), the median of the rounds' overheads; target ≤ 10%. CPU: % of one core over the rounds (client: this process; server: "solo").`,
      columns: [
        { name: "sequential p50", unit: "µs" },
        { name: "p99", unit: "µs" },
        { name: "p50 overhead", unit: "%" },
        { name: `calls/s ${callers} concurrent`, unit: "/s" },
        { name: "concurrent overhead", unit: "%" },
        { name: "client CPU", unit: "%" },
        { name: "server CPU", unit: "%" },
      ],
      rows,
    });
    const over = rows.filter((row) =>
      (row.cells[2] as number) > 10 || (row.cells[4] as number) > 10
    );
    if (over.length > 0) {
      report.note(
        `stub: above the 10% overhead target: ${
          over.map((row) => row.label).join("; ")
        }`,
      );
    }
    if (saturated) {
      report.note(
        `stub: the client process was at ≥ ${SATURATED}% of a core with ${callers} concurrent callers in at least one run (the table shows medians): the concurrent column measures the client (the stub is client-side work, so that is what it compares)`,
      );
    }
  } finally {
    connection.close();
    client.close();
  }
}

/** A distributor's own client and stub of "exec", warmed up. */
async function slowStub(make: () => Distributor) {
  const client: RafterClient = connect(cluster.registryUrls);
  const stub = client.stub<Exec>("exec", {
    distributor: make(),
    idempotent: true,
  });
  const once = (id: string) => stub.exec(id, workMs);
  await closedLoop(once, warmupSeconds * 1000);
  return { client, once };
}

/** One distributor row of one round under the slow server. */
async function slowRound(
  once: (id: string) => Promise<{ server: string }>,
): Promise<LoadResult & { client: number; servers: number }> {
  const pids = new Map(
    ["fast-1", "fast-2", "slow"].map((name) => [name, cluster.child(name).pid]),
  );
  const meter = new CpuMeter(pids);
  const r = await closedLoop(once, (seconds * 1000) / rounds);
  const shares = meter.shares();
  const servers = [...pids.keys()].reduce(
    (sum, name) => sum + (shares.get(name) ?? NaN),
    0,
  );
  return { ...r, client: shares.get("bench") ?? NaN, servers };
}

/** The distributors under one slow server of three. */
async function slowTable(): Promise<void> {
  let results: Awaited<ReturnType<typeof slowRound>>[][];
  const stubs = [];
  try {
    for (const [, make] of distributors) stubs.push(await slowStub(make));
    results = await alternate(rounds, stubs, (stub) => slowRound(stub.once));
  } finally {
    for (const stub of stubs) stub.client.close();
  }
  const summary = results.map((runs) => ({
    rate: median(runs.map((r) => r.latencies.length / (r.elapsedMs / 1000))),
    p50: median(
      runs.map((r) => percentile(r.latencies.toSorted((a, b) => a - b), 0.5)),
    ),
    p99: median(
      runs.map((r) => percentile(r.latencies.toSorted((a, b) => a - b), 0.99)),
    ),
    p999: median(
      runs.map((r) => percentile(r.latencies.toSorted((a, b) => a - b), 0.999)),
    ),
    slow: median(
      runs.map((r) =>
        100 * (r.byServer.get("slow") ?? 0) / Math.max(1, r.latencies.length)
      ),
    ),
    errors: runs.reduce((sum, r) => sum + r.errors, 0),
    firstError: runs.find((r) => r.firstError !== undefined)?.firstError,
    client: median(runs.map((r) => r.client)),
    servers: median(runs.map((r) => r.servers)),
  }));
  report.table({
    scenario: "stub",
    title: "Distributors under one slow server of three",
    note:
      `${callers} concurrent callers of idempotent calls through a stub of "exec" (each distributor its own client, warmed up once), ${
        ((seconds * 1000) / rounds).toFixed(0)
      } ms a row and round after a ${warmupSeconds} s warm-up, ${rounds} alternating rounds (every distributor, then again), medians; every call works ${workMs} ms, the server "slow" (1 of 3) adds ${slowMs} ms. CPU: % of one core (servers: the three summed).`,
    columns: [
      { name: "calls/s", unit: "/s" },
      { name: "vs roundRobin", unit: "×" },
      { name: "p50", unit: "ms" },
      { name: "p99", unit: "ms" },
      { name: "p99.9", unit: "ms" },
      { name: "share to slow", unit: "%" },
      { name: "errors", unit: "text" },
      { name: "client CPU", unit: "%" },
      { name: "servers CPU", unit: "%" },
    ],
    rows: distributors.map(([label], i) => ({
      label,
      cells: [
        summary[i].rate,
        ratio(summary[i].rate, summary[0].rate),
        summary[i].p50,
        summary[i].p99,
        summary[i].p999,
        summary[i].slow,
        `${summary[i].errors}${
          summary[i].firstError
            ? ` (${summary[i].firstError.slice(0, 60)})`
            : ""
        }`,
        summary[i].client,
        summary[i].servers,
      ],
    })),
  });
}

let exitCode = 0;
const onSignal = () => {
  cluster.stop().finally(() => Deno.exit(130));
};
Deno.addSignalListener("SIGINT", onSignal);
Deno.addSignalListener("SIGTERM", onSignal);
try {
  if (scenarios.has("stub")) {
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
    if (tables.has("overhead")) await overheadTable();
    if (tables.has("slow")) await slowTable();
  }
} catch (error) {
  console.error("bench/stub.ts failed:", error);
  exitCode = 1;
} finally {
  await cluster.stop();
  Deno.removeSignalListener("SIGINT", onSignal);
  Deno.removeSignalListener("SIGTERM", onSignal);
}
await report.finish();
Deno.exit(exitCode);
