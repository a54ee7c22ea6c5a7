/**
 * Rafter's registry side by side with etcd in one run (issue 9, scenarios
 * 5–8). Both are 3-member clusters of real processes on 127.0.0.1 with
 * every log append fsynced, data in the temporary folder (one file
 * system), and equal Raft timing: heartbeat / tick 100 ms, election
 * timeout 1,000 ms (Rafter registry's defaults, `registry/main.ts`:
 * `--tick-ms 100 --election-ticks 10`; etcd's `--heartbeat-interval 100
 * --election-timeout 1000`). etcd is Debian's `etcd-server` (installed by
 * the bench when missing and it runs as root or with passwordless sudo;
 * otherwise its rows are skipped, saying how to install it), driven
 * through its native gRPC API (the `etcd3` npm client) and through its
 * JSON gateway (`POST /v3/kv/put` etc. with `fetch`); the faster of the two
 * is the peer Rafter's ratio is taken against.
 *
 * - `writes`: `registry.bind` (a new endpoint id each call) vs etcd put (a
 *   new key each call), 1 and 64 concurrent callers: ops/s, p50/p99.
 * - `reads`: linearizable and serializable `registry.lookup` of a name with
 *   10 endpoints vs etcd range of a prefix with 10 keys, 64 callers.
 * - `leases`: lease grant; keep-alive of a lease granted beforehand; and
 *   grant + bind + keep-alive (Rafter: a bind with `grant`, then a
 *   keep-alive; etcd: lease grant, put with the lease, keep-alive), 64
 *   callers. etcd's gRPC keep-alive is one request and its answer on the
 *   caller's LeaseKeepAlive stream (how etcd clients renew).
 * - `failover`: SIGKILL the leader, then time until the first acknowledged
 *   write through a survivor (a write is started every 10 ms; the killed
 *   member is restarted between trials).
 *
 * Every load is closed-loop callers (each sends its next call when the last
 * one answered) in load-generator processes (`bench/_registry_load.ts`):
 * 1 caller in one process, 64 callers spread over `--loaders` processes
 * (8 client objects in all), so the bench measures the servers and not one
 * client's core. Each figure is the median of 3 rounds run A B C A B C A B
 * C (Rafter, etcd gRPC, etcd gateway), with the CPU % (of one core) of the
 * client processes and of the 3 server processes over the measured window.
 *
 * ```sh
 * deno run -A bench/registry_etcd.ts                       # full: 2 s a row, 5 fail-over trials
 * deno run -A bench/registry_etcd.ts --quick               # smoke test, under 45 s
 * deno run -A bench/registry_etcd.ts --scenarios writes,failover --loaders 3
 * ```
 *
 * A first run that installs etcd spends up to 3 minutes more in `apt-get`
 * (about 10 s here); the `--quick` budget (45 s on an idle machine) is for
 * the runs after it.
 *
 * Stops every process it started and removes the data folders at the end,
 * on errors and on Ctrl-C. Exits non-zero when Rafter fails; an etcd that
 * cannot be run only skips its rows.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { Etcd3 } from "etcd3";
import { benchArgs, usageError } from "./_args.ts";
import { EtcdCluster, findEtcd } from "../testing/etcd.ts";
import {
  LEASE_TTL_MS,
  type LoadCommand,
  type LoadOp,
  type LoadResult,
  LOOKUP_NAME,
  LOOKUP_PREFIX,
  type System,
} from "./_registry_load.ts";
import {
  alternate,
  type Cell,
  type Column,
  CpuMeter,
  median,
  percentile,
  ratio,
  Report,
  type Row,
  selectedScenarios,
} from "./report.ts";
import { LocalCluster } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";
import { connect, type RafterClient } from "../stub/client.ts";

const USAGE =
  `usage: deno run -A bench/registry_etcd.ts [--scenarios LIST] [--quick] [--loaders N]
  [--callers LIST] [--rounds N] [--b DIR] [--profile-dir DIR]

  --scenarios LIST   any of writes, reads, leases, failover (default: all)
  --quick            0.2 s rows, 1 fail-over trial each (the smoke test)
  --loaders N        load-generator processes for the 64-caller rows (default 2)
  --callers LIST     rows of the writes table: 1, 64 or both (default 1,64)
  --rounds N         rounds of each load row (default 3, at most 15)
  --b DIR            also run a second Rafter cluster from the checkout DIR
                     (e.g. a copy of an older commit), alternated with this
                     one and etcd in every row: an A/B in one run
  --profile-dir DIR  run this checkout's registry nodes under --cpu-prof,
                     one folder per node in DIR (written when they stop)
  --help             show this text`;

const SCENARIOS = ["writes", "reads", "leases", "failover"] as const;
const flags = benchArgs(USAGE, {
  scenarios: { type: "string" },
  quick: { type: "boolean", default: false },
  loaders: { type: "string", default: "2" },
  callers: { type: "string", default: "1,64" },
  rounds: { type: "string", default: "3" },
  b: { type: "string" },
  "profile-dir": { type: "string" },
});
let wanted: Set<(typeof SCENARIOS)[number]>;
try {
  wanted = selectedScenarios(flags.scenarios as string | undefined, SCENARIOS);
} catch (error) {
  usageError((error as Error).message, USAGE);
}
const LOADERS = Number(flags.loaders);
if (!Number.isInteger(LOADERS) || LOADERS < 1 || LOADERS > 8) {
  usageError(`--loaders must be 1 to 8, got "${flags.loaders}"`, USAGE);
}
const QUICK = flags.quick === true;
const ROUNDS = Number(flags.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 15) {
  usageError(`--rounds must be 1 to 15, got "${flags.rounds}"`, USAGE);
}
const WRITE_CALLERS = String(flags.callers).split(",").map(Number);
if (
  WRITE_CALLERS.length === 0 ||
  WRITE_CALLERS.some((n) => n !== 1 && n !== 64)
) {
  usageError(`--callers takes 1, 64 or 1,64, got "${flags.callers}"`, USAGE);
}
const B_DIR = flags.b as string | undefined;
const PROFILE_DIR = flags["profile-dir"] as string | undefined;
const WARMUP_MS = QUICK ? 100 : 500;
const MEASURE_MS = QUICK ? 200 : 2_000;
const TRIALS = QUICK ? 1 : 5;
const MANY = 64;
/** Client objects (RafterClient / Etcd3) the 64 callers share. */
const OBJECTS = 8;
const TICK_MS = 100;
const ELECTION_TICKS = 10;
const FAKE_URL = "tcp://127.0.0.1:9";
/** A fail-over trial gives up after this long without an acknowledged write, ms. */
const FAILOVER_TIMEOUT_MS = 15_000;
/** A fail-over probe starts a write this often, ms. */
const PROBE_EVERY_MS = 10;
const PROBE_MAX_IN_FLIGHT = 300;

const report = new Report("registry_etcd.ts");
const root = new URL("../", import.meta.url).pathname;

// --- stopping ---------------------------------------------------------------------

const stop = new AbortController();
const onSignal = () => stop.abort(new Error("interrupted"));
Deno.addSignalListener("SIGINT", onSignal);
Deno.addSignalListener("SIGTERM", onSignal);
function checkStop(): void {
  if (stop.signal.aborted) throw stop.signal.reason;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// --- load-generator processes -------------------------------------------------------

/** A `bench/_registry_load.ts` child: one command line in, one result line out. */
class Loader {
  readonly process: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #waiting: ((line: string) => void)[] = [];
  readonly #ready: Promise<void>;
  #stderr = "";
  exited: Promise<void>;

  constructor() {
    this.process = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--config",
        `${root}deno.dev.json`,
        "-A",
        `${root}bench/_registry_load.ts`,
      ],
      cwd: root,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#writer = this.process.stdin.getWriter();
    let readyResolve!: () => void;
    this.#ready = new Promise((r) => readyResolve = r);
    this.#waiting.push(() => readyResolve());
    const lines = async () => {
      let rest = "";
      for await (
        const text of this.process.stdout.pipeThrough(new TextDecoderStream())
      ) {
        const parts = (rest + text).split("\n");
        rest = parts.pop()!;
        for (const line of parts) this.#waiting.shift()?.(line);
      }
    };
    const errors = async () => {
      for await (
        const text of this.process.stderr.pipeThrough(new TextDecoderStream())
      ) {
        this.#stderr = (this.#stderr + text).slice(-4000);
      }
    };
    this.exited = Promise.all([this.process.status, lines(), errors()]).then(
      () => {
        for (const waiting of this.#waiting.splice(0)) waiting("");
      },
    );
  }

  get pid(): number {
    return this.process.pid;
  }

  async ready(timeoutMs = 30_000): Promise<void> {
    const timer = sleep(timeoutMs).then(() => {
      throw new Error(`load generator not ready within ${timeoutMs} ms`);
    });
    await Promise.race([this.#ready, timer]);
  }

  async send(command: LoadCommand): Promise<LoadResult> {
    const answer = new Promise<string>((r) => this.#waiting.push(r));
    await this.#writer.write(
      new TextEncoder().encode(`${JSON.stringify(command)}\n`),
    );
    const line = await answer;
    if (line === "") {
      throw new Error(`load generator exited; its stderr:\n${this.#stderr}`);
    }
    return JSON.parse(line) as LoadResult;
  }

  async close(): Promise<void> {
    await this.#writer.close().catch(() => {});
    const timer = setTimeout(() => {
      try {
        this.process.kill("SIGKILL");
      } catch { /* gone */ }
    }, 3_000);
    await this.exited;
    clearTimeout(timer);
  }
}

// --- the clusters ------------------------------------------------------------------------

/**
 * With `--profile-dir`: each registry node runs as `deno run --cpu-prof`
 * (through `sh`, which execs deno, so the PID and signals stay deno's).
 */
function profiled(name: string): string[] {
  return [
    "sh",
    "-c",
    `e="$1"; shift 2; exec "$e" run --cpu-prof --cpu-prof-dir="${PROFILE_DIR}/${name}" "$@"`,
    "sh",
  ];
}

/** Each node's `--metrics-listen` port (for the fdatasync histogram). */
const METRICS_PORTS = new Map<string, number>(
  freePorts(3).map((port, i) => [`n${i + 1}`, port] as const),
);

const rafter = new LocalCluster({
  engine: "raft", // the Raft registry against etcd, whatever RAFTER_TEST_ENGINE says
  tickMs: TICK_MS,
  electionTicks: ELECTION_TICKS,
  childEnv: (name) => {
    const port = METRICS_PORTS.get(name);
    return port === undefined
      ? undefined
      : { RAFTER_METRICS_LISTEN: `127.0.0.1:${port}` };
  },
  ...(PROFILE_DIR === undefined ? {} : { wrapperOf: profiled }),
});
/** With `--b`: the same cluster from the checkout B_DIR (its own code). */
let rafterB = null as LocalCluster | null;
let etcd = null as EtcdCluster | null;
let etcdSkipped = "";
const loaders: Loader[] = [];
const clients: RafterClient[] = [];

function rafterPids(cluster = rafter): Map<string, number> {
  return new Map(
    [...cluster.registry.keys()].filter((id) => cluster.child(id).running)
      .map((id) => [id, cluster.child(id).pid]),
  );
}

function etcdPids(): Map<string, number> {
  const pids = new Map<string, number>();
  for (const name of etcd?.names ?? []) {
    const pid = etcd!.pid(name);
    if (pid !== null) pids.set(name, pid);
  }
  return pids;
}

async function etcdLeaderUrl(): Promise<string> {
  return etcd!.clientUrl(await etcd!.waitForLeader(10_000));
}

// --- one measured row ----------------------------------------------------------------------

/** One round of one contender. */
interface Sample {
  opsPerSecond: number;
  p50: number;
  p99: number;
  clientCpu: number | null;
  serverCpu: number | null;
  errors: number;
  errorKinds: Record<string, number>;
}

let sequence = 0;

/**
 * Runs `callers` closed-loop callers of `op` against `system` (warm-up,
 * then the measured window) over the load generators.
 */
async function measure(
  side: Side,
  op: LoadOp,
  callers: number,
): Promise<Sample> {
  checkStop();
  const system: System = side === "rafterB" ? "rafter" : side;
  const cluster = side === "rafterB" ? rafterB! : rafter;
  const used = callers === 1 ? loaders.slice(0, 1) : loaders;
  const etcdLeader = system === "rafter" ? "" : await etcdLeaderUrl();
  const base = {
    system,
    op,
    objects: callers === 1 ? 1 : Math.max(1, Math.round(OBJECTS / used.length)),
    rafterUrls: cluster.registryUrls,
    etcdUrls: etcd?.clientUrls ?? [],
    etcdLeader,
  };
  const share = (i: number) =>
    Math.floor(callers / used.length) + (i < callers % used.length ? 1 : 0);
  const command = (i: number, measure: boolean): LoadCommand => ({
    ...base,
    cmd: "run",
    callers: share(i),
    ms: measure ? MEASURE_MS : WARMUP_MS,
    measure,
    seq: (++sequence) * 10_000_000,
  });
  await Promise.all(used.map((loader, i) => loader.send(command(i, false))));
  const servers = system === "rafter" ? rafterPids(cluster) : etcdPids();
  const meter = new CpuMeter(
    new Map([
      ...[...servers].map(([name, pid]) => [`server ${name}`, pid] as const),
      ...used.map((l, i) => [`client ${i}`, l.pid] as const),
    ]),
  );
  const results = await Promise.all(
    used.map((loader, i) => loader.send(command(i, true))),
  );
  const shares = meter.shares();
  if (op === "grant" || op === "keepalive" || op === "grant-bind-keepalive") {
    await Promise.all(
      used.map((loader, i) =>
        loader.send({ ...command(i, false), cmd: "cleanup" })
      ),
    );
  }
  let clientCpu: number | null = 0;
  let serverCpu: number | null = 0;
  for (const [name, value] of shares) {
    if (name.startsWith("server ")) {
      serverCpu = value === null || serverCpu === null
        ? null
        : serverCpu + value;
    } else {
      clientCpu = value === null || clientCpu === null
        ? null
        : clientCpu + value;
    }
  }
  const latencies = Float64Array.from(results.flatMap((r) => r.latencies))
    .sort();
  const errorKinds: Record<string, number> = {};
  for (const result of results) {
    for (const [kind, n] of Object.entries(result.errors)) {
      errorKinds[kind] = (errorKinds[kind] ?? 0) + n;
    }
  }
  return {
    opsPerSecond: results.reduce(
      (sum, r) => sum + (1000 * r.count) / r.wallMs,
      0,
    ),
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    clientCpu,
    serverCpu,
    errors: Object.values(errorKinds).reduce((a, b) => a + b, 0),
    errorKinds,
  };
}

/** Who a load row measures: this checkout, the `--b` one, or etcd. */
type Side = System | "rafterB";

/** A contender of a table row group. */
interface Contender {
  system: System;
  label: string;
}

/** A contender of the load tables (the `--b` cluster too). */
interface LoadContender {
  system: Side;
  label: string;
}

const CONTENDERS: readonly Contender[] = [
  { system: "rafter", label: "Rafter" },
  { system: "grpc", label: "etcd gRPC" },
  { system: "gateway", label: "etcd gateway" },
];

const LOAD_COLUMNS: Column[] = [
  { name: "callers", unit: "count" },
  { name: "ops/s", unit: "/s" },
  { name: "p50 ms", unit: "ms" },
  { name: "p99 ms", unit: "ms" },
  { name: "Rafter ÷ this, ops/s", unit: "×" },
  { name: "Rafter ÷ this, p50", unit: "×" },
  { name: "Rafter ÷ this, p99", unit: "×" },
  { name: "client CPU", unit: "%" },
  { name: "server CPU", unit: "%" },
  { name: "errors", unit: "count" },
];

const LOAD_NOTE_TAIL =
  `Median of ${ROUNDS} rounds run Rafter, etcd gRPC, etcd gateway in turn (${WARMUP_MS} ms warm-up + ${MEASURE_MS} ms measured each). Ratios: Rafter's figure ÷ this row's (ops/s: above 1 is Rafter faster; p50/p99: below 1 is Rafter faster); on Rafter's row, against the faster etcd API (by ops/s). CPU: % of one core over the measured window, client = the load-generator processes (+ this one), server = the 3 cluster processes summed (machine: ${navigator.hardwareConcurrency} cores = ${
    navigator.hardwareConcurrency * 100
  }%).`;

/** Measures `op` of each contender for `callers`, alternating, and returns the rows. */
async function loadRows(
  what: Record<System, string>,
  op: LoadOp,
  callers: number,
): Promise<Row[]> {
  const contenders: LoadContender[] = rafterB === null ? [...CONTENDERS] : [
    CONTENDERS[0],
    { system: "rafterB", label: "Rafter B" },
    ...CONTENDERS.slice(1),
  ];
  const running = contenders.filter((c) =>
    c.system === "rafter" || c.system === "rafterB" || etcd !== null
  );
  const results = await alternate(
    ROUNDS,
    running,
    (contender) => measure(contender.system, op, callers),
  );
  const summary = new Map<Side, Sample>();
  const whatOf = (side: Side) => what[side === "rafterB" ? "rafter" : side];
  for (const [i, contender] of running.entries()) {
    const samples = results[i];
    const errorKinds: Record<string, number> = {};
    for (const s of samples) {
      for (const [kind, n] of Object.entries(s.errorKinds)) {
        errorKinds[kind] = (errorKinds[kind] ?? 0) + n;
      }
    }
    for (const [kind, n] of Object.entries(errorKinds)) {
      report.note(
        `${
          whatOf(contender.system)
        } (${contender.label}), ${callers} callers: ${n} × ${kind}`,
      );
    }
    const pick = (f: (s: Sample) => number | null) =>
      median(samples.map((s) => f(s) ?? NaN));
    summary.set(contender.system, {
      opsPerSecond: pick((s) => s.opsPerSecond),
      p50: pick((s) => s.p50),
      p99: pick((s) => s.p99),
      clientCpu: pick((s) => s.clientCpu),
      serverCpu: pick((s) => s.serverCpu),
      errors: samples.reduce((sum, s) => sum + s.errors, 0),
      errorKinds,
    });
    const s = summary.get(contender.system)!;
    if (
      contender.system !== "grpc" && contender.system !== "gateway" &&
      !(s.opsPerSecond > 0)
    ) {
      throw new Error(
        `Rafter: ${what.rafter} with ${callers} callers acknowledged no call: ${
          JSON.stringify(errorKinds)
        }`,
      );
    }
    const machine = (s.clientCpu ?? 0) + (s.serverCpu ?? 0);
    if (machine >= 90 * navigator.hardwareConcurrency) {
      report.note(
        `${
          whatOf(contender.system)
        } (${contender.label}), ${callers} callers: clients and servers together used ${
          Math.round(machine)
        }% of the machine's ${
          navigator.hardwareConcurrency * 100
        }%: the machine, not one side, is the limit of this row`,
      );
    }
    if (
      (summary.get(contender.system)!.clientCpu ?? 0) >=
        90 * (callers === 1 ? 1 : LOADERS)
    ) {
      report.note(
        `${
          whatOf(contender.system)
        } (${contender.label}), ${callers} callers: the load generators were near 100% of a core each; raise --loaders`,
      );
    }
  }
  const mine = summary.get("rafter")!;
  const peers = (["grpc", "gateway"] as const).filter((s) => summary.has(s));
  const best = peers.length === 0
    ? null
    : peers.reduce((a, b) =>
      summary.get(a)!.opsPerSecond >= summary.get(b)!.opsPerSecond ? a : b
    );
  const other = summary.get("rafterB");
  if (other !== undefined) {
    report.note(
      `${what.rafter}, ${callers} callers, this checkout ÷ Rafter B (${B_DIR}): ops/s ${
        (mine.opsPerSecond / other.opsPerSecond).toFixed(3)
      }×, p50 ${(mine.p50 / other.p50).toFixed(3)}×, p99 ${
        (mine.p99 / other.p99).toFixed(3)
      }×`,
    );
  }
  const rows: Row[] = [];
  for (const contender of contenders) {
    const label = `${whatOf(contender.system)} (${contender.label})`;
    const sample = summary.get(contender.system);
    if (sample === undefined) {
      rows.push({ label, cells: [], skipped: etcdSkipped });
      continue;
    }
    const ours = contender.system === "rafter" ||
      contender.system === "rafterB";
    const own = ours ? sample : mine;
    const against = ours ? (best === null ? null : summary.get(best)!) : sample;
    const cells: Cell[] = [
      callers,
      sample.opsPerSecond,
      sample.p50,
      sample.p99,
      ratio(own.opsPerSecond, against?.opsPerSecond ?? null),
      ratio(own.p50, against?.p50 ?? null),
      ratio(own.p99, against?.p99 ?? null),
      sample.clientCpu,
      sample.serverCpu,
      sample.errors,
    ];
    rows.push({
      label: ours && best !== null
        ? `${label} vs ${best === "grpc" ? "etcd gRPC" : "etcd gateway"}`
        : label,
      cells,
    });
  }
  return rows;
}

// --- scenarios -----------------------------------------------------------------------------

async function writes(): Promise<void> {
  const what = { rafter: "bind", grpc: "put", gateway: "put" };
  const rows: Row[] = [];
  for (const callers of WRITE_CALLERS) {
    rows.push(...await loadRows(what, "write", callers === 1 ? 1 : MANY));
  }
  await noteFsyncs();
  report.table({
    scenario: "writes",
    title: "Registry writes: bind vs etcd put, 1 and 64 callers, fsync on",
    note:
      `Each call writes something new: Rafter binds a new endpoint id under "bench/bind"; etcd puts a new key "bench/put/N" (a value of the same size). Writes go to the leader (Rafter's client finds it; etcd's clients are pointed at it). ${LOAD_NOTE_TAIL}`,
    columns: LOAD_COLUMNS,
    rows,
  });
}

/**
 * One histogram summed over the members: the cumulative count at each
 * bucket bound (`le`), from the text exposition of each URL's `/metrics`.
 */
async function fsyncHistogram(
  urls: string[],
  name: string,
): Promise<Map<number, number> | null> {
  const sum = new Map<number, number>();
  const pattern = new RegExp(
    `^${name}_bucket\\{[^}]*le="([^"]+)"[^}]*\\} (\\S+)$`,
  );
  for (const url of urls) {
    let text: string;
    try {
      const answer = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      text = await answer.text();
    } catch {
      return null;
    }
    for (const line of text.split("\n")) {
      const match = pattern.exec(line);
      if (match === null) continue;
      const le = match[1] === "+Inf" ? Infinity : Number(match[1]);
      sum.set(le, (sum.get(le) ?? 0) + Number(match[2]));
    }
  }
  return sum.size === 0 ? null : sum;
}

/** The bucket bound under which `q` of the observations fall, ms. */
function bucketQuantile(histogram: Map<number, number>, q: number): number {
  const bounds = [...histogram.keys()].sort((a, b) => a - b);
  const total = histogram.get(Infinity) ?? histogram.get(bounds.at(-1)!)!;
  for (const le of bounds) {
    if (histogram.get(le)! >= q * total) return le * 1000;
  }
  return Infinity;
}

/**
 * Notes each side's WAL fdatasync times over the run so far (the 3 members
 * summed), from their own histograms: what a write's latency waits for,
 * outside either program.
 */
async function noteFsyncs(): Promise<void> {
  const sides: [string, Map<number, number> | null][] = [
    [
      "Rafter (rafter_wal_fsync_seconds)",
      await fsyncHistogram(
        [...METRICS_PORTS.values()].map((port) =>
          `http://127.0.0.1:${port}/metrics`
        ),
        "rafter_wal_fsync_seconds",
      ),
    ],
  ];
  if (etcd !== null) {
    sides.push([
      "etcd (etcd_disk_wal_fsync_duration_seconds)",
      await fsyncHistogram(
        etcd.clientUrls.map((url) => `${url}/metrics`),
        "etcd_disk_wal_fsync_duration_seconds",
      ),
    ]);
  }
  const parts = sides.map(([label, histogram]) =>
    histogram === null
      ? `${label}: not available`
      : `${label}: ${histogram.get(Infinity)} fsyncs, p50 ≤ ${
        bucketQuantile(histogram, 0.5)
      } ms, p99 ≤ ${bucketQuantile(histogram, 0.99)} ms, p99.9 ≤ ${
        bucketQuantile(histogram, 0.999)
      } ms`
  );
  report.note(
    `WAL fdatasync times over the writes rows, 3 members summed, as bucket bounds of each side's own histogram: ${
      parts.join("; ")
    }`,
  );
}

async function seedReads(): Promise<void> {
  const admin = connect(rafter.registryUrls, { watch: false });
  clients.push(admin);
  for (let i = 0; i < 10; i++) {
    await admin.bind(LOOKUP_NAME, {
      id: `e${i}`,
      url: `tcp://127.0.0.1:${20_000 + i}`,
    });
  }
  if (etcd === null) return;
  const leader = await etcdLeaderUrl();
  for (let i = 0; i < 10; i++) {
    const response = await fetch(`${leader}/v3/kv/put`, {
      method: "POST",
      body: JSON.stringify({
        key: btoa(`${LOOKUP_PREFIX}e${i}`),
        value: btoa(
          JSON.stringify({ id: `e${i}`, url: `tcp://127.0.0.1:${20_000 + i}` }),
        ),
      }),
    });
    if (!response.ok) {
      throw new Error(`etcd seed put: ${await response.text()}`);
    }
    await response.body?.cancel();
  }
}

async function reads(): Promise<void> {
  await seedReads();
  const rows = [
    ...await loadRows(
      {
        rafter: "linearizable lookup",
        grpc: "linearizable range",
        gateway: "linearizable range",
      },
      "read-lin",
      MANY,
    ),
    ...await loadRows(
      {
        rafter: "serializable lookup",
        grpc: "serializable range",
        gateway: "serializable range",
      },
      "read-ser",
      MANY,
    ),
  ];
  report.table({
    scenario: "reads",
    title: "Registry reads: lookup vs etcd range, 64 callers",
    note:
      `Rafter: lookup of "${LOOKUP_NAME}" (10 endpoints); etcd: range of the prefix "${LOOKUP_PREFIX}" (10 keys of the same size). Linearizable: a ReadIndex round through the leader before each answer (both); serializable: the member asked answers from its own state. Reads are spread over all 3 members (Rafter's client round-robins; etcd3 shuffles hosts per call; the gateway rows take members in turn). ${LOAD_NOTE_TAIL}`,
    columns: LOAD_COLUMNS,
    rows,
  });
}

async function leases(): Promise<void> {
  const rows = [
    ...await loadRows(
      { rafter: "grant", grpc: "grant", gateway: "grant" },
      "grant",
      MANY,
    ),
    ...await loadRows(
      { rafter: "keep-alive", grpc: "keep-alive", gateway: "keep-alive" },
      "keepalive",
      MANY,
    ),
    ...await loadRows(
      {
        rafter: "bind with grant + keep-alive",
        grpc: "grant + put with lease + keep-alive",
        gateway: "grant + put with lease + keep-alive",
      },
      "grant-bind-keepalive",
      MANY,
    ),
  ];
  report.table({
    scenario: "leases",
    title: "Leases: grant, keep-alive, grant + bind + keep-alive, 64 callers",
    note: `Leases of ${
      LEASE_TTL_MS / 1000
    } s TTL (none expires in a round; each round's leases are revoked after it, outside the measured window). Keep-alive: each caller renews its own lease, granted in the warm-up (etcd gRPC: one request and its answer on the caller's LeaseKeepAlive stream; gateway: POST /v3/lease/keepalive). Grant + bind + keep-alive is one op: Rafter binds a new endpoint with \`grant\` (lease and binding in one write) then renews the lease; etcd grants, puts a key with the lease, then renews (3 calls, 2 writes). ${LOAD_NOTE_TAIL}`,
    columns: LOAD_COLUMNS,
    rows,
  });
}

// --- fail-over --------------------------------------------------------------------------------

/**
 * Starts `attempt()` every PROBE_EVERY_MS until one succeeds; resolves with
 * the time of the first acknowledgement (performance.now()), or NaN after
 * FAILOVER_TIMEOUT_MS.
 */
async function firstAck(
  attempt: (k: number) => Promise<unknown>,
): Promise<number> {
  let acked = NaN;
  let inFlight = 0;
  const deadline = performance.now() + FAILOVER_TIMEOUT_MS;
  for (let k = 0; Number.isNaN(acked) && performance.now() < deadline; k++) {
    checkStop();
    if (inFlight < PROBE_MAX_IN_FLIGHT) {
      inFlight++;
      attempt(k).then(() => {
        if (Number.isNaN(acked)) acked = performance.now();
      }, () => {}).finally(() => inFlight--);
    }
    await sleep(PROBE_EVERY_MS);
  }
  // Attempts still in flight settle on their own (their client is closed
  // after the trial); they are not waited for.
  return acked;
}

interface Trial {
  /** Kill → first acknowledged write, ms, per API. */
  times: Partial<Record<System, number>>;
  /** Kill → a survivor reports that it leads, ms (NaN: none in time). */
  elected: number;
}

/**
 * Polls `leads()` every PROBE_EVERY_MS until it is true; the time it first
 * was (performance.now()), or NaN after FAILOVER_TIMEOUT_MS.
 */
async function firstLeader(leads: () => Promise<boolean>): Promise<number> {
  const deadline = performance.now() + FAILOVER_TIMEOUT_MS;
  while (performance.now() < deadline) {
    checkStop();
    if (await leads()) return performance.now();
    await sleep(PROBE_EVERY_MS);
  }
  return NaN;
}

async function rafterTrial(trial: number): Promise<Trial> {
  const leader = await rafter.waitForLeader(20_000);
  const survivors = [...rafter.registry.keys()].filter((id) => id !== leader);
  const writer = connect(survivors.map((id) => rafter.registry.get(id)!), {
    watch: false,
    deadlineMs: 3_000,
  });
  clients.push(writer);
  // A warm connection to each survivor, as a running client has.
  await writer.bind("bench/failover", { id: `warm${trial}`, url: FAKE_URL });
  await sleep(Math.random() * TICK_MS);
  const killed = performance.now();
  await rafter.kill(leader, "SIGKILL");
  const [acked, elected] = await Promise.all([
    firstAck((k) =>
      writer.bind("bench/failover", { id: `f${trial}-${k}`, url: FAKE_URL })
    ),
    firstLeader(async () =>
      (await Promise.all(survivors.map((id) => rafter.status(id, 200)))).some(
        (status) => status?.role === "leader",
      )
    ),
  ]);
  writer.close();
  await rafter.startNode(leader);
  await rafter.waitForLeader(20_000);
  return { times: { rafter: acked - killed }, elected: elected - killed };
}

async function etcdTrial(trial: number): Promise<Trial> {
  const cluster = etcd!;
  const leader = await cluster.waitForLeader(20_000);
  const survivorNames = cluster.names.filter((n) => n !== leader);
  const survivors = survivorNames.map((n) => cluster.clientUrl(n));
  const grpc = new Etcd3({ hosts: survivors });
  try {
    const put = (key: string) =>
      grpc.kv.put({ key: Buffer.from(key), value: Buffer.from("x") });
    const gatewayPut = (url: string, key: string) =>
      fetch(`${url}/v3/kv/put`, {
        method: "POST",
        body: JSON.stringify({ key: btoa(key), value: btoa("x") }),
        signal: AbortSignal.timeout(3_000),
      }).then(async (r) => {
        const text = await r.text();
        if (!r.ok || text.includes('"error"')) throw new Error(text);
      });
    await put(`bench/failover/warm${trial}`);
    await Promise.all(
      survivors.map((url) => gatewayPut(url, `bench/failover/warm${trial}`)),
    );
    await sleep(Math.random() * TICK_MS);
    const killed = performance.now();
    await cluster.kill(leader);
    const [viaGrpc, viaGateway, elected] = await Promise.all([
      firstAck((k) => put(`bench/failover/g${trial}-${k}`)),
      firstAck((k) =>
        gatewayPut(
          survivors[k % survivors.length],
          `bench/failover/h${trial}-${k}`,
        )
      ),
      firstLeader(async () =>
        (await Promise.all(survivorNames.map((n) => cluster.status(n, 200))))
          .some((status) => status !== null && status.leader === status.id)
      ),
    ]);
    await cluster.restart(leader);
    await cluster.waitForLeader(20_000);
    return {
      times: { grpc: viaGrpc - killed, gateway: viaGateway - killed },
      elected: elected - killed,
    };
  } finally {
    grpc.close();
  }
}

async function failover(): Promise<void> {
  const trials: Trial[] = [];
  const runners = [rafterTrial, ...(etcd === null ? [] : [etcdTrial])];
  for (let t = 0; t < TRIALS; t++) {
    for (const runner of runners) {
      trials.push(await runner(t));
      await sleep(300);
    }
  }
  const times = (system: System) =>
    trials.map((t) => t.times[system]).filter((v): v is number =>
      v !== undefined
    );
  const ofSystem = (system: System) =>
    trials.filter((t) => t.times[system] !== undefined);
  const elected = (system: System) =>
    median(ofSystem(system).map((t) => t.elected));
  const afterElection = (system: System) =>
    median(ofSystem(system).map((t) => t.times[system]! - t.elected));
  const timedOut = (system: System) =>
    times(system).filter((v) => Number.isNaN(v)).length;
  if (times("rafter").every((v) => Number.isNaN(v))) {
    throw new Error(
      `Rafter: no write was acknowledged within ${FAILOVER_TIMEOUT_MS} ms of the leader's SIGKILL in any trial`,
    );
  }
  const mine = median(times("rafter"));
  const peers = (["grpc", "gateway"] as const).filter((s) =>
    times(s).length > 0
  );
  const best = peers.length === 0
    ? null
    : peers.reduce((a, b) => median(times(a)) <= median(times(b)) ? a : b);
  const rows: Row[] = CONTENDERS.map((contender) => {
    const values = times(contender.system);
    if (values.length === 0) {
      return { label: contender.label, cells: [], skipped: etcdSkipped };
    }
    const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) =>
      a - b
    );
    const against = contender.system === "rafter"
      ? (best === null ? NaN : median(times(best)))
      : median(values);
    return {
      label: contender.system === "rafter" && best !== null
        ? `Rafter vs ${best === "grpc" ? "etcd gRPC" : "etcd gateway"}`
        : contender.label,
      cells: [
        values.length,
        median(values),
        finite[0] ?? NaN,
        finite[finite.length - 1] ?? NaN,
        elected(contender.system),
        afterElection(contender.system),
        ratio(mine, against),
        timedOut(contender.system),
      ],
    };
  });
  report.table({
    scenario: "failover",
    title: "Fail-over: SIGKILL the leader, time to the next acknowledged write",
    note:
      `${TRIALS} trial(s) each, Rafter and etcd in turn; each trial kills the leader at a random phase of the heartbeat, then starts a write through the survivors every ${PROBE_EVERY_MS} ms (Rafter: a RafterClient of the 2 survivors; etcd: an etcd3 client of the 2 survivors and, at the same time, the gateway of each survivor in turn) and times the first acknowledgement after the kill; "leader elected": median time from the kill until a survivor reports that it leads (registry.status / maintenance status polled every ${PROBE_EVERY_MS} ms), "elected → ack": median of the rest, per trial (negative when the acknowledgement came before the next status poll saw the new leader); the killed member is restarted and a leader agreed on before the next trial. Equal Raft timing: heartbeat ${TICK_MS} ms, election timeout ${
        TICK_MS * ELECTION_TICKS
      } ms (both randomize it up to twice that). Ratio: Rafter's median ÷ this row's (below 1 is Rafter faster); on Rafter's row, against the faster etcd API.`,
    columns: [
      { name: "trials", unit: "count" },
      { name: "median ms", unit: "ms" },
      { name: "min ms", unit: "ms" },
      { name: "max ms", unit: "ms" },
      { name: "leader elected ms", unit: "ms" },
      { name: "elected → ack ms", unit: "ms" },
      { name: "Rafter ÷ this", unit: "×" },
      { name: "timed out", unit: "count" },
    ],
    rows,
  });
}

// --- the run ------------------------------------------------------------------------------------

let exitCode = 0;
const started = performance.now();
try {
  const binary = await findEtcd((line) => console.log(line));
  const etcdStart = (async () => {
    if ("skipped" in binary) {
      etcdSkipped = binary.skipped;
      report.note(`etcd rows skipped: ${binary.skipped}`);
      return;
    }
    const cluster = new EtcdCluster(binary.path, {
      heartbeatMs: TICK_MS,
      electionMs: TICK_MS * ELECTION_TICKS,
    });
    try {
      await cluster.start(3);
      etcd = cluster;
    } catch (error) {
      await cluster.stop();
      etcdSkipped = `etcd ${binary.version} did not start a cluster: ${
        (error as Error).message.split("\n")[0]
      }`;
      report.note(etcdSkipped);
    }
  })();
  for (let i = 0; i < LOADERS; i++) loaders.push(new Loader());
  if (B_DIR !== undefined) {
    const url = new URL(
      "testing/cluster.ts",
      `file://${Deno.realPathSync(B_DIR)}/`,
    );
    const { LocalCluster: Other } = await import(url.href);
    rafterB = new Other({
      tickMs: TICK_MS,
      electionTicks: ELECTION_TICKS,
    }) as LocalCluster;
  }
  await Promise.all([
    rafter.startRegistry(3).then(() => rafter.waitForLeader(20_000)),
    rafterB?.startRegistry(3).then(() => rafterB!.waitForLeader(20_000)),
    etcdStart,
    ...loaders.map((l) => l.ready()),
  ]);
  console.log(
    `clusters up in ${
      ((performance.now() - started) / 1000).toFixed(1)
    } s: Rafter ${rafter.registryUrls.join(", ")}; etcd ${
      "version" in binary ? binary.version : "skipped"
    } ${etcd?.clientUrls.join(", ") ?? ""}`,
  );
  report.note(
    `registry_etcd.ts: Rafter registry (3 deno nodes) vs etcd ${
      etcd === null ? "(skipped)" : (binary as { version: string }).version
    } (3 members), both fsync on, tick/heartbeat ${TICK_MS} ms, election timeout ${
      TICK_MS * ELECTION_TICKS
    } ms, data of both in the temp folder (one file system; 64 callers over ${LOADERS} load-generator process(es)${
      QUICK ? "; --quick: short rows, noisy figures" : ""
    })`,
  );
  const steps = { writes, reads, leases, failover };
  for (const scenario of SCENARIOS) {
    if (!wanted.has(scenario)) continue;
    const at = performance.now();
    await steps[scenario]();
    console.log(
      `(${scenario}: ${((performance.now() - at) / 1000).toFixed(1)} s)`,
    );
  }
  await report.finish();
} catch (error) {
  console.error("bench failed:", error);
  exitCode = stop.signal.aborted ? 130 : 1;
} finally {
  for (const client of clients) client.close();
  await Promise.all(loaders.map((l) => l.close()));
  // A profiled node writes its profile on the way out: give it time.
  await Promise.all([
    rafter.stop(PROFILE_DIR === undefined ? undefined : 30_000),
    rafterB?.stop(),
    etcd?.stop(),
  ]);
  Deno.removeSignalListener("SIGINT", onSignal);
  Deno.removeSignalListener("SIGTERM", onSignal);
  console.log(
    `registry_etcd.ts finished in ${
      ((performance.now() - started) / 1000).toFixed(0)
    } s`,
  );
}
Deno.exit(exitCode);
