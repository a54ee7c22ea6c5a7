/**
 * The cluster stub's own CPU per call (private to `bench/`): a stub of
 * checkout A and of checkout B over an in-memory connection that answers
 * at once (no socket), in alternating rounds; ns per call over a plain
 * call of that connection, 16 callers and sequential, and the heap
 * allocated per call.
 *
 * ```sh
 * deno run --config deno.dev.json -A --v8-flags=--expose-gc bench/_stub_micro.ts --b /tmp/old/
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { median } from "./report.ts";

const USAGE =
  `usage: deno run -A bench/_stub_micro.ts [--a DIR] [--b DIR] [--rounds N] [--calls N] [--distributors L]`;
const values = benchArgs(USAGE, {
  a: { type: "string", default: new URL("..", import.meta.url).pathname },
  b: { type: "string", default: "/work/main/" },
  rounds: { type: "string", default: "7" },
  calls: { type: "string", default: "200000" },
  distributors: { type: "string" },
});
const rounds = Number(values.rounds);
const calls = Number(values.calls);
// deno-lint-ignore no-explicit-any
type Any = any;
type Once = () => Promise<unknown>;

const NAMES = typeof values.distributors === "string"
  ? values.distributors.split(",")
  : [
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
const answer = { server: "solo", callId: "x" };
const fake = {
  url: "tcp://127.0.0.1:1",
  isClosed: false,
  call: (_m: string, _p: unknown, _o: unknown) => Promise.resolve(answer),
};

async function side(dir: string): Promise<Map<string, Once>> {
  const root = dir.endsWith("/") ? dir : `${dir}/`;
  const { ClusterStub } = await import(
    `file://${root}stub/call/cluster_stub.ts`
  );
  const { HealthBook } = await import(
    `file://${root}stub/cluster_map/endpoint_health.ts`
  );
  const { fixedMap } = await import(`file://${root}stub/call/_test_util.ts`);
  const { makeEndpoint } = await import(`file://${root}protocol/registry.ts`);
  const mod = await import(`file://${root}stub/distributors/mod.ts`);
  const out = new Map<string, Once>();
  for (const name of NAMES) {
    const health = new HealthBook();
    const map = fixedMap("solo", [
      makeEndpoint({ id: "solo", url: fake.url }),
    ], health);
    await map.endpoints();
    const pool = { ready: () => fake, get: () => Promise.resolve(fake) };
    const distributor = name === "consistentHash"
      ? mod.consistentHash((call: Any) => String(call.params[0]))
      : mod[name]();
    const stub = new ClusterStub("solo", { map, pool, health }, {
      distributor,
    }).proxy();
    let n = 0;
    out.set(name, () => (stub as Any).exec(`c${++n}`, 0));
  }
  return out;
}

let seq = 0;
const plain: Once = () => fake.call("exec", [`c${++seq}`, 0], undefined);

/** ns per call with 16 callers, and bytes allocated per call. */
async function measure(once: Once): Promise<[number, number, number]> {
  const perCaller = calls / 16;
  // deno-lint-ignore no-explicit-any
  (globalThis as any).gc?.();
  const heap0 = Deno.memoryUsage().heapUsed;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let i = 0; i < perCaller; i++) await once();
    }),
  );
  const t1 = performance.now();
  const heap1 = Deno.memoryUsage().heapUsed;
  const s0 = performance.now();
  for (let i = 0; i < calls / 4; i++) await once();
  const s1 = performance.now();
  return [
    ((t1 - t0) * 1e6) / calls,
    ((s1 - s0) * 1e6) / (calls / 4),
    (heap1 - heap0) / calls,
  ];
}

const a = await side(values.a as string);
const b = await side(values.b as string);
for (const once of [plain, ...a.values(), ...b.values()]) await measure(once);
const got = new Map<string, number[][][]>();
for (let round = 0; round < rounds; round++) {
  for (const name of NAMES) {
    const contenders: [number, Once][] = [[0, plain], [1, a.get(name)!], [
      2,
      b.get(name)!,
    ]];
    const row = got.get(name) ?? [[], [], []];
    got.set(name, row);
    for (let i = 0; i < 3; i++) {
      const [s, once] = contenders[(i + round) % 3];
      row[s].push(await measure(once));
    }
  }
  console.error(`round ${round + 1}/${rounds}`);
}
const m = (xs: number[][], i: number) => median(xs.map((x) => x[i]));
console.log(
  `\nA = ${values.a}, B = ${values.b}; ${rounds} rounds of ${calls} calls (16 callers) and ${
    calls / 4
  } sequential; medians; ns per call over the plain fake connection's\n`,
);
console.log(
  "| distributor | plain ns 16 | A extra ns 16 | B extra ns 16 | plain ns seq | A extra ns seq | B extra ns seq | A B/call | B B/call |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const [name, [p, x, y]] of got) {
  const d = (s: number[][], i: number) =>
    median(s.map((v, r) => v[i] - p[r][i]));
  console.log(
    `| ${name} | ${m(p, 0).toFixed(0)} | ${d(x, 0).toFixed(0)} | ${
      d(y, 0).toFixed(0)
    } | ${m(p, 1).toFixed(0)} | ${d(x, 1).toFixed(0)} | ${
      d(y, 1).toFixed(0)
    } | ${(m(x, 2) - m(p, 2)).toFixed(0)} | ${
      (m(y, 2) - m(p, 2)).toFixed(0)
    } |`,
  );
}
