/**
 * A/B of the cluster stub's per-call cost (private to `bench/`): the
 * stub code of two checkouts (`--a`, default this one; `--b`, default
 * /work/main) in one process, each distributor through both next to a
 * plain `RpcConnection`, in alternating rounds (plain, A, B in turn, the
 * order rotated each round). One registry node and one `exec` server
 * ("solo") from this checkout.
 *
 * Per distributor and side: the sequential p50 and the 16-caller calls/s,
 * and the overhead over the plain run of the same round (sequential: p50
 * ratio − 1; concurrent: plain calls/s ÷ stub calls/s − 1); medians of
 * the rounds.
 *
 * ```sh
 * deno run --config deno.dev.json -A bench/_stub_ab.ts --b /tmp/old/ --rounds 5
 * # a profile of one side only (16 callers through p2cEwma for 10 s):
 * deno run --config deno.dev.json -A --cpu-prof bench/_stub_ab.ts --profile p2cEwma
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { median, percentile, selfCpuMs } from "./report.ts";
import { LocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";

const USAGE = `usage: deno run -A bench/_stub_ab.ts [options]

  --a DIR          checkout A (default: this one)
  --b DIR          checkout B (default: /work/main/)
  --rounds N       alternating rounds (default 5)
  --seconds N      concurrent window of one run, s (default 0.5)
  --calls N        sequential calls of one run (default 500)
  --callers N      concurrent callers (default 16)
  --distributors L comma-separated names (default: all the built-in ones)
  --profile NAME   only side A, 16 callers through NAME for --seconds (no table)
  --help           show this text`;

const values = benchArgs(USAGE, {
  a: { type: "string", default: new URL("..", import.meta.url).pathname },
  b: { type: "string", default: "/work/main/" },
  rounds: { type: "string", default: "5" },
  seconds: { type: "string", default: "0.5" },
  calls: { type: "string", default: "500" },
  callers: { type: "string", default: "16" },
  distributors: { type: "string" },
  profile: { type: "string" },
});
const rounds = Number(values.rounds);
const windowMs = Number(values.seconds) * 1000;
const calls = Number(values.calls);
const callers = Number(values.callers);

type Once = (id: string) => Promise<unknown>;
// deno-lint-ignore no-explicit-any
type Any = any;

const NAMES = [
  "roundRobin",
  "random",
  "weightedRoundRobin",
  "firstAvailable",
  "leastLoaded",
  "leastInFlight",
  "p2cEwma",
  "consistentHash",
  "sticky",
];
const chosen = typeof values.distributors === "string"
  ? values.distributors.split(",")
  : typeof values.profile === "string"
  ? [values.profile]
  : NAMES;

/** A distributor of a checkout's module by name. */
function make(mod: Any, name: string): unknown {
  return name === "consistentHash"
    ? mod.consistentHash((call: Any) => String(call.params[0]))
    : mod[name]();
}

async function sequential(once: Once, tag: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    await once(`${tag}-${i}`);
    times.push(performance.now() - started);
  }
  return percentile(times.sort((a, b) => a - b), 0.5) * 1000;
}

/** Calls/s of the callers for `ms`, and this process's CPU µs per call. */
async function concurrent(
  once: Once,
  ms: number,
): Promise<[number, number]> {
  let done = 0;
  let sequence = 0;
  const cpu = selfCpuMs();
  const started = performance.now();
  const endAt = started + ms;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < endAt) {
        await once(`c${++sequence}`);
        done++;
      }
    }),
  );
  const rate = done / ((performance.now() - started) / 1000);
  return [rate, ((selfCpuMs() - cpu) * 1000) / done];
}

const cluster = new LocalCluster();
const clients: Any[] = [];
let plain: RpcConnection | null = null;
try {
  await cluster.startRegistry(1);
  await cluster.waitForLeader();
  await cluster.spawn("solo", "tests/_exec_server.ts", [
    "--registry",
    cluster.registryUrls.join(","),
    "--id",
    "solo",
    "--name",
    "solo",
    "--ttl-ms",
    "10000",
  ], /ready on/);
  const sides = typeof values.profile === "string"
    ? [values.a as string]
    : [values.a as string, values.b as string];
  const paths = new Map<string, Once[]>();
  for (const dir of sides) {
    const root = dir.endsWith("/") ? dir : `${dir}/`;
    const { connect } = await import(`file://${root}stub/client.ts`);
    const mod = await import(`file://${root}stub/distributors/mod.ts`);
    const client = connect(cluster.registryUrls);
    clients.push(client);
    for (const name of chosen) {
      const stub = client.stub("solo", { distributor: make(mod, name) });
      const once: Once = (id) => stub.exec(id, 0);
      if (!paths.has(name)) paths.set(name, []);
      paths.get(name)!.push(once);
    }
  }
  const [solo] = (await clients[0].lookup("solo")).endpoints;
  plain = await dial(solo.url);
  const connection = plain;
  const plainOnce: Once = (id) => connection.call("exec", [id, 0]);
  // Warm-up: every path.
  for (const once of [plainOnce, ...[...paths.values()].flat()]) {
    for (let i = 0; i < 500; i++) await once(`w${i}`);
    await concurrent(once, 200);
  }
  if (typeof values.profile === "string") {
    const [rate] = await concurrent(paths.get(values.profile)![0], windowMs);
    console.log(`${values.profile}: ${rate.toFixed(0)} calls/s`);
  } else {
    // name → side (0 plain, 1 A, 2 B) → per round [p50, rate, p50 over, rate over]
    const figures = new Map<string, number[][][]>();
    for (let round = 0; round < rounds; round++) {
      for (const [name, [a, b]] of paths) {
        const contenders: [number, Once][] = [[0, plainOnce], [1, a], [2, b]];
        const order = contenders.map((_, i) =>
          contenders[(i + round) % contenders.length]
        );
        const got: { p50: number; rate: number; cpu: number }[] = [];
        for (const [side, once] of order) {
          const p50 = await sequential(once, `r${round}${side}`);
          const [rate, cpu] = await concurrent(once, windowMs);
          got[side] = { p50, rate, cpu };
        }
        if (!figures.has(name)) figures.set(name, [[], [], []]);
        for (const side of [0, 1, 2]) {
          figures.get(name)![side].push([
            got[side].p50,
            got[side].rate,
            (got[side].p50 / got[0].p50 - 1) * 100,
            (got[0].rate / got[side].rate - 1) * 100,
            got[side].cpu,
            got[side].cpu - got[0].cpu,
          ]);
        }
      }
      console.error(`round ${round + 1}/${rounds} done`);
    }
    const m = (rows: number[][], i: number) => median(rows.map((r) => r[i]));
    console.log(
      `\nA = ${values.a}, B = ${values.b}; ${rounds} rounds, ${calls} sequential calls and ${callers} callers for ${windowMs} ms a run; medians\n`,
    );
    console.log(
      "| distributor | plain p50 µs | A p50 µs | B p50 µs | A seq over | B seq over | plain calls/s | A calls/s | B calls/s | A conc over | B conc over | plain CPU µs/call | A extra CPU µs | B extra CPU µs |",
    );
    console.log(
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    );
    for (const [name, [p, a, b]] of figures) {
      console.log(
        `| ${name} | ${m(p, 0).toFixed(0)} | ${m(a, 0).toFixed(0)} | ${
          m(b, 0).toFixed(0)
        } | ${m(a, 2).toFixed(1)}% | ${m(b, 2).toFixed(1)}% | ${
          m(p, 1).toFixed(0)
        } | ${m(a, 1).toFixed(0)} | ${m(b, 1).toFixed(0)} | ${
          m(a, 3).toFixed(1)
        }% | ${m(b, 3).toFixed(1)}% | ${m(p, 4).toFixed(2)} | ${
          m(a, 5).toFixed(2)
        } | ${m(b, 5).toFixed(2)} |`,
      );
    }
  }
} finally {
  plain?.close();
  for (const client of clients) client.close();
  await cluster.stop();
}
