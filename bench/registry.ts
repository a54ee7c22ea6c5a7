/**
 * The registry under load: starts a 3-node registry (real `deno run`
 * processes on 127.0.0.1 through `LocalCluster`, every log append
 * fsynced), waits for a leader, then measures, each at 1 and at 64
 * concurrent clients:
 *
 * 1. `registry.bind` with distinct ids (every call is a Raft write);
 * 2. `lease.keepAlive` on leases granted beforehand (the leader answers,
 *    nothing is written to the log);
 * 3. `registry.lookup`, linearizable (ReadIndex through the leader) and
 *    serializable, of a name with 10 endpoints;
 * 4. TLS beside plain (issue 16): `registry.bind` on three fresh 3-node
 *    clusters up side by side: a plain one, one with TLS on the client
 *    port and mutual TLS between members (member certificates naming
 *    `rafter://member/<id>`, a throw-away CA from `testing/certs.ts`), and
 *    one with that and `--auth` (the bench presents a `bind:bench` token),
 *    measured in rotating rounds (`--tls-rounds`): medians of binds/s, p50
 *    and p99, and ratios to plain;
 * 5. watch fan-out: the time until 1,000 (and 64) watchers of one prefix,
 *    spread over the 3 nodes, have all seen one bind;
 * 6. `registry.bind` with `grant` (a lease and a binding in one write),
 *    last, because it leaves thousands of leases the leader times every
 *    tick.
 *
 * Each load row is a closed loop (every caller sends its next call when
 * the last one answered) for a fixed time after a warm-up, printed as a
 * Markdown table: ops/s, p50, p99, p99.9 latency, count, errors, and the
 * CPU share of the bench process and of each node (from `/proc/PID/stat`)
 * over the measured window, so a saturated load generator shows. The 64
 * callers share several `RafterClient` objects (`--groups`, default 8), so
 * the load arrives over several connections, not one connection's
 * pipelining. A script, not a test: it asserts nothing about speed.
 *
 * ```sh
 * deno task bench:registry                 # 1 s warm-up + 3 s a row, about 3 min
 * deno task bench:registry --quick         # 0.2 s + 0.5 s a row, about 25 s
 * deno task bench:registry --seconds 10 --groups 16 --watches-per-conn 100
 * ```
 *
 * Stops every process it started and removes its data folder at the end,
 * on Ctrl-C (exit code 130), and when its time budget runs out (exit 1).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { LocalCluster } from "../testing/cluster.ts";
import {
  clockTicks,
  median,
  percentile,
  processCpuMs,
  selfCpuMs,
} from "./report.ts";
import { RpcError } from "../rpc/errors.ts";
import { abortableSleep } from "../internal/timing.ts";
import { connect, type RafterClient } from "../stub/client.ts";
import type { RegistryWatch } from "../stub/registry_client/watch.ts";
import {
  connect as connectDeno,
  dial as dialDeno,
} from "../adapter/deno/mod.ts";
import { makeTestPki } from "../testing/certs.ts";
import type { RegistryStatus } from "../protocol/registry.ts";

const USAGE = `usage: deno task bench:registry [options]

  --seconds N           measured time of each row (default 3, at most 600)
  --warmup N            warm-up time before each row, seconds (default 1)
  --quick               0.5 s rows after 0.2 s warm-ups (explicit --seconds
                        and --warmup still win)
  --clients LIST        concurrent clients of each row (default 1,64)
  --groups N            RafterClient objects the callers of a row share,
                        at most one per caller (default 8)
  --watchers LIST       watcher counts of the fan-out (default 1000,64)
  --watches-per-conn N  watches carried by each watching client object, i.e.
                        by each connection (default 10, at most 1000: the
                        registry's limit per connection)
  --rounds N            measured binds of each fan-out (default 5)
  --only LIST           run only these parts, in the usual order: bind,
                        keepalive, lookup-lin, lookup-ser, tls, watch, grant
  --tls-rounds N        rounds of the TLS part (plain, TLS and TLS + auth
                        clusters side by side; default 5, 1 with --quick)
  --tick-ms N           Raft tick of the nodes (default: LocalCluster's, 50)
  --election-ticks N    election timeout in ticks (default: LocalCluster's, 10)
  --help                show this text`;

function parseCommandLine() {
  try {
    return parseArgs({
      args: Deno.args,
      options: {
        seconds: { type: "string" },
        warmup: { type: "string" },
        quick: { type: "boolean", default: false },
        clients: { type: "string", default: "1,64" },
        groups: { type: "string", default: "8" },
        watchers: { type: "string", default: "1000,64" },
        "watches-per-conn": { type: "string", default: "10" },
        rounds: { type: "string", default: "5" },
        "tls-rounds": { type: "string" },
        only: { type: "string" },
        "tick-ms": { type: "string" },
        "election-ticks": { type: "string" },
        help: { type: "boolean", default: false },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${USAGE}`);
    Deno.exit(2);
  }
}

const { values } = parseCommandLine();
if (values.help) {
  console.log(USAGE);
  Deno.exit(0);
}

/**
 * A number from the command line in `(0, max]` (`[0, max]` with
 * `zero`), or exit with the usage.
 */
function positive(
  name: string,
  text: string | undefined,
  fallback: number,
  max = 1_000_000,
  zero = false,
) {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!(value > 0 || (zero && value === 0)) || !(value <= max)) {
    console.error(
      `--${name} must be a number ${
        zero ? "from 0" : "above 0"
      } to ${max}, got "${text}"\n`,
    );
    console.error(USAGE);
    Deno.exit(2);
  }
  return value;
}

function positiveList(name: string, text: string): number[] {
  return text.split(",").map((item) =>
    Math.round(positive(name, item.trim(), 1))
  );
}

const SECONDS = positive(
  "seconds",
  values.seconds,
  values.quick ? 0.5 : 3,
  600,
);
const WARMUP = positive(
  "warmup",
  values.warmup,
  values.quick ? 0.2 : 1,
  600,
  true,
);
const CLIENTS = positiveList("clients", values.clients);
const GROUPS = Math.round(positive("groups", values.groups, 8));
const WATCHERS = positiveList("watchers", values.watchers);
// A registry node takes at most 1,000 watches on one connection.
const PER_CONN = Math.round(
  positive("watches-per-conn", values["watches-per-conn"], 10, 1_000),
);
const ROUNDS = Math.round(positive("rounds", values.rounds, 5));
const TLS_ROUNDS = Math.round(
  positive("tls-rounds", values["tls-rounds"], values.quick ? 1 : 5, 100),
);
const TICK_MS = values["tick-ms"] === undefined
  ? undefined
  : positive("tick-ms", values["tick-ms"], 50);
const ELECTION_TICKS = values["election-ticks"] === undefined
  ? undefined
  : Math.round(positive("election-ticks", values["election-ticks"], 10));

const PARTS = [
  "bind",
  "keepalive",
  "lookup-lin",
  "lookup-ser",
  "tls",
  "watch",
  "grant",
] as const;
const ONLY = new Set(
  values.only === undefined
    ? PARTS
    : values.only.split(",").map((part) => part.trim()),
);
for (const part of ONLY) {
  if (!(PARTS as readonly string[]).includes(part)) {
    console.error(`--only: unknown part "${part}"\n`);
    console.error(USAGE);
    Deno.exit(2);
  }
}

/** Most measured calls in one row: a row ends at this count or its time. */
const MAX_OPS_PER_ROW = 3_000_000;
/** Deadline of one registry call, retries included, ms. */
const OP_DEADLINE_MS = 5_000;
/** How long a fan-out round waits for its last watcher, ms. */
const ROUND_TIMEOUT_MS = 10_000;
/** How long the watches of a fan-out may take to open, ms. */
const WATCH_OPEN_TIMEOUT_MS = 30_000;
/** Share of one core above which the bench process is called saturated. */
const SATURATED = 0.9;
/** A URL for the bound endpoints: never dialled. */
const FAKE_URL = "tcp://127.0.0.1:9";
/** TTL of the leases the bench grants: none expires during the run. */
const LONG_TTL_MS = 600_000;

// --- stopping: Ctrl-C, SIGTERM, time budget ----------------------------------

const stop = new AbortController();
const onSignal = () => {
  console.log("\ninterrupted: stopping every process the bench started…");
  stop.abort(new Error("interrupted"));
};
Deno.addSignalListener("SIGINT", onSignal);
Deno.addSignalListener("SIGTERM", onSignal);

const loadRows = (5 + 3 * TLS_ROUNDS) * CLIENTS.length;
const budgetMs = 2 * (loadRows * (SECONDS + WARMUP) * 1000 +
      WATCHERS.length * (ROUNDS + 1) * 2_000) + 180_000;
const budget = setTimeout(() => {
  console.log(
    `\ntime budget of ${Math.round(budgetMs / 1000)} s exceeded: stopping`,
  );
  stop.abort(new Error("time budget exceeded"));
}, budgetMs);

// --- measuring -----------------------------------------------------------------

const CLOCK_TICKS = clockTicks();

/** Busy CPU time of the whole machine, ms (every process), from `/proc/stat`. */
function machineCpuMs(): number | null {
  try {
    const line = Deno.readTextFileSync("/proc/stat").split("\n")[0];
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is in user).
    const busy = ticks.slice(0, 8).reduce((a, b) => a + b, 0) - ticks[3] -
      ticks[4];
    return Number.isFinite(busy) ? (busy * 1000) / CLOCK_TICKS : null;
  } catch {
    return null;
  }
}

interface CpuSample {
  cluster: LocalCluster;
  at: number;
  bench: number;
  machine: number | null;
  nodes: Map<string, number | null>;
}

/**
 * What a stretch of time cost: CPU ms of the bench, of each node, and of
 * every other process on the machine (null where unreadable).
 */
interface CpuCost {
  wallMs: number;
  bench: number;
  nodes: Map<string, number | null>;
  others: number | null;
}

function sampleCpu(of: LocalCluster = cluster): CpuSample {
  const nodes = new Map<string, number | null>();
  for (const id of of.registry.keys()) {
    nodes.set(id, processCpuMs(of.child(id).pid));
  }
  return {
    cluster: of,
    at: performance.now(),
    bench: selfCpuMs(),
    machine: machineCpuMs(),
    nodes,
  };
}

function cpuSince(start: CpuSample): CpuCost {
  const end = sampleCpu(start.cluster);
  const nodes = new Map<string, number | null>();
  for (const [id, before] of start.nodes) {
    const after = end.nodes.get(id);
    nodes.set(
      id,
      before === null || after === null || after === undefined
        ? null
        : after - before,
    );
  }
  const bench = end.bench - start.bench;
  let others: number | null = null;
  if (start.machine !== null && end.machine !== null) {
    others = end.machine - start.machine - bench;
    for (const value of nodes.values()) {
      others = value === null || others === null ? null : others - value;
    }
    if (others !== null) others = Math.max(0, others);
  }
  return { wallMs: end.at - start.at, bench, nodes, others };
}

function ms(value: number): string {
  if (Number.isNaN(value)) return "–";
  const digits = Math.abs(value) < 10 ? 2 : 1;
  return value.toFixed(digits);
}

function count(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}

function pct(cpuMs: number | null | undefined, wallMs: number): string {
  if (cpuMs === null || cpuMs === undefined) return "n/a";
  return `${Math.round((100 * cpuMs) / wallMs)}%`;
}

/** A short name for an error, to count errors by kind. */
function errorKind(error: unknown): string {
  if (error instanceof RpcError) {
    return `${error.code} ${error.message.slice(0, 160)}`;
  }
  if (error instanceof Error) {
    return `${error.name}: ${error.message.slice(0, 160)}`;
  }
  return String(error).slice(0, 160);
}

// --- the cluster -----------------------------------------------------------------

/** Lines the nodes printed after they were up (warnings, expiries, errors). */
const nodeLog: string[] = [];
let logging = false;
const cluster = new LocalCluster({
  tickMs: TICK_MS,
  electionTicks: ELECTION_TICKS,
  onOutput: (name, line) => {
    if (logging && nodeLog.length < 10_000) nodeLog.push(`${name}: ${line}`);
  },
});
const clients: RafterClient[] = [];

/** A client of every registry node, closed at the end. */
function newClient(urls: readonly string[] = cluster.registryUrls) {
  const client = connect(urls, { deadlineMs: OP_DEADLINE_MS });
  clients.push(client);
  return client;
}

function closeClient(client: RafterClient): void {
  client.close();
  const index = clients.indexOf(client);
  if (index !== -1) clients.splice(index, 1);
}

/** The leader every node knows, or "none" when they agree on none within 5 s. */
function leaderNow(): Promise<string> {
  return cluster.waitForLeader(5_000).catch(() => "none");
}

function checkNodesRunning(of: LocalCluster = cluster): void {
  for (const id of of.registry.keys()) {
    const child = of.child(id);
    if (!child.running) {
      throw new Error(
        `registry node ${id} (pid ${child.pid}) exited; its last lines:\n${
          child.output.slice(-20).join("\n")
        }`,
      );
    }
  }
}

// --- load rows ---------------------------------------------------------------------

/** One load scenario: what each caller does, over and over. */
interface Scenario {
  /** Its name for --only. */
  part: (typeof PARTS)[number];
  title: string;
  note: string;
  /** Runs once before the rows. */
  setup?(client: RafterClient): Promise<void>;
  /** Runs once after the rows. */
  teardown?(client: RafterClient): Promise<void>;
  /** One call by caller `caller` (its `n`-th overall in the row). */
  op(client: RafterClient, caller: number, n: number): Promise<unknown>;
}

interface Row {
  /** Errors of the warm-up (not counted in `errors`). */
  warmupErrors: Map<string, number>;
  clients: number;
  objects: number;
  opsPerSecond: number;
  sorted: Float64Array;
  errors: Map<string, number>;
  errorCount: number;
  cpu: CpuCost;
  leaderBefore: string;
  leaderAfter: string;
}

/**
 * Runs `concurrency` closed-loop callers on `objects` client objects until
 * `until` (performance.now()); records each success's latency.
 */
async function drive(
  scenario: Scenario,
  objects: RafterClient[],
  concurrency: number,
  until: number,
  latencies: number[] | null,
  errors: Map<string, number>,
  sequence: { n: number },
): Promise<number> {
  let errorCount = 0;
  const last = sequence.n + MAX_OPS_PER_ROW;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, caller) => {
      const client = objects[caller % objects.length];
      while (
        performance.now() < until && sequence.n < last && !stop.signal.aborted
      ) {
        const start = performance.now();
        try {
          await scenario.op(client, caller, sequence.n++);
          latencies?.push(performance.now() - start);
        } catch (error) {
          if (stop.signal.aborted) return;
          errorCount++;
          const kind = errorKind(error);
          errors.set(kind, (errors.get(kind) ?? 0) + 1);
          // A call that fails at once must not spin the loop.
          await abortableSleep(5, stop.signal);
        }
      }
    }),
  );
  return errorCount;
}

async function runRow(
  scenario: Scenario,
  concurrency: number,
  row: number,
  target?: Target,
): Promise<Row | null> {
  const objects = Array.from(
    { length: Math.min(GROUPS, concurrency) },
    () => target === undefined ? newClient() : targetClient(target),
  );
  const of = target?.cluster ?? cluster;
  const leader = () =>
    target === undefined ? leaderNow() : targetLeader(target);
  const sequence = { n: row * 10_000_000 };
  try {
    const leaderBefore = await leader();
    const warmupErrors = new Map<string, number>();
    await drive(
      scenario,
      objects,
      concurrency,
      performance.now() + WARMUP * 1000,
      null,
      warmupErrors,
      sequence,
    );
    const latencies: number[] = [];
    const errors = new Map<string, number>();
    const cpuStart = sampleCpu(of);
    const errorCount = await drive(
      scenario,
      objects,
      concurrency,
      performance.now() + SECONDS * 1000,
      latencies,
      errors,
      sequence,
    );
    const cpu = cpuSince(cpuStart);
    if (stop.signal.aborted) return null;
    checkNodesRunning(of);
    const sorted = Float64Array.from(latencies).sort();
    return {
      warmupErrors,
      clients: concurrency,
      objects: objects.length,
      opsPerSecond: (latencies.length * 1000) / cpu.wallMs,
      sorted,
      errors,
      errorCount,
      cpu,
      leaderBefore,
      leaderAfter: await leader(),
    };
  } finally {
    for (const client of objects) closeClient(client);
  }
}

function clientsLabel(clients: number): string {
  return clients === 1 ? "1 client" : `${clients} clients`;
}

/** Notes printed after all tables. */
const findings: string[] = [];

function printRows(scenario: Scenario, rows: Row[], leader: string): void {
  const ids = [...cluster.registry.keys()];
  console.log(`\n## ${scenario.title}\n`);
  console.log(`${scenario.note}\n`);
  const nodeHeads = ids.map((id) =>
    `${id}${id === leader ? " (leader)" : ""} CPU`
  );
  console.log(
    `| clients | client objects | ops/s | p50 ms | p99 ms | p99.9 ms | count | errors | bench CPU | ${
      nodeHeads.join(" | ")
    } | other processes CPU |`,
  );
  console.log(
    `| ---: | :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ${
      ids.map(() => "---:").join(" | ")
    } | ---: |`,
  );
  for (const row of rows) {
    const objects = row.objects === 1
      ? "1 RafterClient"
      : `${row.objects} RafterClients × ${
        Math.ceil(row.clients / row.objects)
      } callers`;
    const nodes = ids.map((id) => pct(row.cpu.nodes.get(id), row.cpu.wallMs));
    console.log(
      `| ${row.clients} | ${objects} | ${count(row.opsPerSecond)} | ${
        ms(percentile(row.sorted, 0.5))
      } | ${ms(percentile(row.sorted, 0.99))} | ${
        ms(percentile(row.sorted, 0.999))
      } | ${count(row.sorted.length)} | ${row.errorCount} | ${
        pct(row.cpu.bench, row.cpu.wallMs)
      } | ${nodes.join(" | ")} | ${pct(row.cpu.others, row.cpu.wallMs)} |`,
    );
  }
  const notes: string[] = [];
  for (const row of rows) {
    const share = row.cpu.bench / row.cpu.wallMs;
    if (share >= SATURATED) {
      notes.push(
        `${clientsLabel(row.clients)}: the bench process used ${
          Math.round(100 * share)
        }% of a core; the load generator may be the bottleneck of this row`,
      );
    }
    let total = row.cpu.bench + (row.cpu.others ?? 0);
    for (const value of row.cpu.nodes.values()) total += value ?? 0;
    const cores = navigator.hardwareConcurrency;
    if (total / row.cpu.wallMs >= SATURATED * cores) {
      notes.push(
        `${
          clientsLabel(row.clients)
        }: the bench, the nodes and other processes together used ${
          Math.round((100 * total) / row.cpu.wallMs)
        }% of the machine's ${cores} cores (${
          cores * 100
        }%): the machine is saturated`,
      );
    }
    if (row.leaderBefore !== row.leaderAfter) {
      notes.push(
        `${
          clientsLabel(row.clients)
        }: the leader changed during the row (${row.leaderBefore} → ${row.leaderAfter})`,
      );
      findings.push(
        `${scenario.title}, ${
          clientsLabel(row.clients)
        }: leader changed ${row.leaderBefore} → ${row.leaderAfter}`,
      );
    }
    for (
      const [errors, when] of [[row.errors, ""], [
        row.warmupErrors,
        " in the warm-up",
      ]] as const
    ) {
      for (const [kind, n] of errors) {
        notes.push(`${clientsLabel(row.clients)}${when}: ${n} × ${kind}`);
        findings.push(
          `${scenario.title}, ${
            clientsLabel(row.clients)
          }${when}: ${n} × ${kind}`,
        );
      }
    }
    if (row.sorted.length >= MAX_OPS_PER_ROW) {
      notes.push(
        `${clientsLabel(row.clients)}: the row stopped at ${
          count(MAX_OPS_PER_ROW)
        } calls, before its time`,
      );
    }
  }
  if (notes.length > 0) {
    console.log("");
    for (const note of notes) console.log(`- ${note}`);
  }
}

async function runScenario(scenario: Scenario, rowBase: number) {
  const admin = newClient();
  try {
    await scenario.setup?.(admin);
    const rows: Row[] = [];
    for (const [i, concurrency] of CLIENTS.entries()) {
      const row = await runRow(scenario, concurrency, rowBase + i);
      if (row === null) break;
      rows.push(row);
    }
    if (rows.length > 0) printRows(scenario, rows, rows[0].leaderBefore);
    if (!stop.signal.aborted) await scenario.teardown?.(admin);
  } finally {
    closeClient(admin);
  }
}

// --- TLS beside plain ------------------------------------------------------------

/**
 * A registry cluster the TLS part binds on: the plain one of the rest of
 * the bench, or one whose client port speaks TLS and whose members speak
 * mutual TLS (and, with a token, enforce auth).
 */
interface Target {
  label: string;
  cluster: LocalCluster;
  /** `tcp://` or `tls://` client URLs, in node order. */
  urls: string[];
  /** The CA the clients trust (TLS targets). */
  caFile?: string;
  /** The bench's bind token (auth targets). */
  token?: string;
  /** The bootstrap admin token, for `registry.status` (auth targets). */
  adminToken?: string;
}

/** A client of every node of `target`, through `adapter/deno` (closed at the end). */
function targetClient(target: Target): RafterClient {
  const client = connectDeno(target.urls, {
    deadlineMs: OP_DEADLINE_MS,
    ...(target.caFile === undefined ? {} : { tls: { caFile: target.caFile } }),
    ...(target.token === undefined ? {} : { token: target.token }),
  });
  clients.push(client);
  return client;
}

/** `registry.status` of node `index` of `target`, or null when it does not answer. */
async function targetStatus(
  target: Target,
  index: number,
  timeoutMs = 500,
): Promise<RegistryStatus | null> {
  try {
    const connection = await dialDeno(target.urls[index], {
      connectTimeoutMs: timeoutMs,
      ...(target.caFile === undefined
        ? {}
        : { tls: { caFile: target.caFile } }),
    });
    try {
      if (target.adminToken !== undefined) {
        await connection.call("registry.authenticate", {
          token: target.adminToken,
        }, { timeoutMs });
      }
      return await connection.call<RegistryStatus>("registry.status", [], {
        timeoutMs,
      });
    } finally {
      connection.close();
    }
  } catch {
    return null;
  }
}

/**
 * The leader every node of `target` follows (as `LocalCluster.waitForLeader`,
 * over the target's TLS and token), or "none" after `timeoutMs`.
 */
async function targetLeader(target: Target, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !stop.signal.aborted) {
    const statuses = (await Promise.all(
      target.urls.map((_, i) => targetStatus(target, i)),
    )).filter((s) => s !== null);
    const leaders = statuses.filter((s) => s.role === "leader");
    if (
      statuses.length === target.urls.length && leaders.length === 1 &&
      statuses.every((s) => s.leader === leaders[0].id)
    ) {
      return leaders[0].id;
    }
    await abortableSleep(50, stop.signal);
  }
  return "none";
}

/** Clusters the TLS part started, stopped at the end. */
const tlsClusters: LocalCluster[] = [];
let pkiDir: string | null = null;

/**
 * Starts a fresh 3-node cluster for the TLS part (with one shared
 * bootstrap admin token file): `plain`, as the rest of the bench's; `tls`,
 * TLS on the client port (the member's certificate) and mutual TLS
 * between members; `auth`, that and `--auth`, and makes the bench a
 * `bind:bench` token.
 */
async function startTlsCluster(
  pki: Awaited<ReturnType<typeof makeTestPki>>,
  mode: "plain" | "tls" | "auth",
): Promise<Target> {
  const label = { plain: "plain TCP", tls: "TLS", auth: "TLS + auth" }[mode];
  const tls = mode !== "plain";
  const auth = mode === "auth";
  // Its start-up lines are not news: only what it prints once up is kept.
  let up = false;
  const of = new LocalCluster({
    tickMs: TICK_MS,
    electionTicks: ELECTION_TICKS,
    onOutput: (name, line) => {
      if (up && logging && nodeLog.length < 10_000) {
        nodeLog.push(`${label} ${name}: ${line}`);
      }
    },
  });
  tlsClusters.push(of);
  of.planRegistry(3);
  const root = (await of.secretFile()).replace(/\/[^/]*$/, "");
  await Deno.mkdir(root, { recursive: true });
  const adminTokenFile = `${root}/admin_token`;
  await Promise.all([...of.registry.keys()].map((id) => {
    const { certFile, keyFile } = pki.certs[id];
    const tlsArgs = [
      "--tls-cert",
      certFile,
      "--tls-key",
      keyFile,
      "--peer-tls-cert",
      certFile,
      "--peer-tls-key",
      keyFile,
      "--peer-tls-ca",
      pki.caFile,
    ];
    return of.startNode(id, {
      args: [
        ...(tls ? tlsArgs : []),
        // One shared file: no member warns of a token the cluster lacks.
        "--admin-token-file",
        adminTokenFile,
        ...(auth ? ["--auth"] : []),
      ],
    });
  }));
  const target: Target = {
    label,
    cluster: of,
    urls: tls
      ? of.registryUrls.map((url) => url.replace(/^tcp:/, "tls:"))
      : of.registryUrls,
    ...(tls ? { caFile: pki.caFile } : {}),
  };
  if (auth) {
    target.adminToken = (await Deno.readTextFile(adminTokenFile)).trim();
  }
  // With auth, status answers once the leader has recorded the admin token.
  if (await targetLeader(target, 30_000) === "none") {
    throw new Error(`the ${label} cluster elected no leader within 30 s`);
  }
  if (auth) {
    const admin = targetClient({ ...target, token: target.adminToken });
    try {
      const made = await admin.registry.tokenCreate("bench", ["bind:bench"], {
        signal: stop.signal,
      });
      target.token = made.token;
    } finally {
      closeClient(admin);
    }
  }
  up = true;
  return target;
}

const tlsScenario: Scenario = {
  part: "tls",
  title: "registry.bind over TLS beside plain TCP",
  note: "",
  op: (client, _caller, n) =>
    client.bind("bench/tls", { id: `t${n}`, url: FAKE_URL }, {
      signal: stop.signal,
    }),
};

/**
 * The TLS part: the plain cluster, a TLS one and a TLS + auth one, up side
 * by side; each round binds on each of them (in a rotating order) at every
 * client count; prints medians over the rounds and ratios to plain.
 */
async function tlsPart(rowBase: number): Promise<void> {
  pkiDir = await Deno.makeTempDir({ prefix: "rafter-bench-registry-tls-" });
  const pki = await makeTestPki(pkiDir, { members: ["n1", "n2", "n3"] });
  const targets: Target[] = [
    await startTlsCluster(pki, "plain"),
    await startTlsCluster(pki, "tls"),
    await startTlsCluster(pki, "auth"),
  ];
  /** rows[target][client count index][round] */
  const rows = targets.map(() => CLIENTS.map((): Row[] => []));
  let row = rowBase;
  for (let round = 0; round < TLS_ROUNDS && !stop.signal.aborted; round++) {
    for (let k = 0; k < targets.length; k++) {
      const t = (round + k) % targets.length;
      for (const [i, concurrency] of CLIENTS.entries()) {
        const result = await runRow(
          tlsScenario,
          concurrency,
          row++,
          targets[t],
        );
        if (result === null) return;
        rows[t][i].push(result);
      }
    }
  }
  printTlsTable(targets, rows);
}

function printTlsTable(targets: Target[], rows: Row[][][]): void {
  const p50 = (r: Row) => percentile(r.sorted, 0.5);
  const p99 = (r: Row) => percentile(r.sorted, 0.99);
  const rate = (r: Row) => r.opsPerSecond;
  const share = (cpuMs: number | null | undefined, r: Row) =>
    cpuMs === null || cpuMs === undefined ? NaN : cpuMs / r.cpu.wallMs;
  const leaderCpu = (r: Row) => share(r.cpu.nodes.get(r.leaderBefore), r);
  const ratio = (t: number, i: number, f: (r: Row) => number) =>
    median(rows[t][i].map((r, round) => f(r) / f(rows[0][i][round])));
  const col = (t: number, i: number, f: (r: Row) => number) =>
    median(rows[t][i].map(f));
  const x = (value: number) => Number.isNaN(value) ? "–" : value.toFixed(2);
  const percent = (value: number) =>
    Number.isNaN(value) ? "n/a" : `${Math.round(100 * value)}%`;
  console.log(`\n## ${tlsScenario.title}\n`);
  console.log(
    `registry.bind of distinct ids under "bench/tls" (each a Raft write) on three fresh 3-node clusters up side by side (started for this part, so none carries the state of the rows above; the cluster of the other parts idles meanwhile): a plain one; one with TLS on the client port (--tls-cert/--tls-key, the member's certificate) and mutual TLS between members (--peer-tls-cert/--peer-tls-key/--peer-tls-ca, certificates naming rafter://member/<id>, a throw-away P-256 CA from testing/certs.ts); and the same with --auth, the bench presenting a bind:bench token (one registry.authenticate per connection, a permission check per call). Clients: connect(urls, { tls: { caFile }, token }) of adapter/deno (plain: connect(urls) of adapter/deno). ${TLS_ROUNDS} round(s); each round runs every cluster in turn (rotating which goes first), ${WARMUP} s warm-up + ${SECONDS} s a row; figures are medians over the rounds, ratios the median of the per-round ratios to the plain row of the same round (above 1 is slower for p50/p99, below 1 is fewer binds/s). CPU: the bench process and the leader, as a share of one core over the row.\n`,
  );
  console.log(
    `| link | clients | binds/s | binds/s ÷ plain | p50 ms | p50 ÷ plain | p99 ms | p99 ÷ plain | bench CPU | leader CPU | errors |`,
  );
  console.log(
    `| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |`,
  );
  for (const [i, clientCount] of CLIENTS.entries()) {
    for (const [t, target] of targets.entries()) {
      if (rows[t][i].length === 0) continue;
      const errors = rows[t][i].reduce((sum, r) => sum + r.errorCount, 0);
      console.log(
        `| ${target.label} | ${clientCount} | ${count(col(t, i, rate))} | ${
          t === 0 ? "1" : x(ratio(t, i, rate))
        } | ${ms(col(t, i, p50))} | ${t === 0 ? "1" : x(ratio(t, i, p50))} | ${
          ms(col(t, i, p99))
        } | ${t === 0 ? "1" : x(ratio(t, i, p99))} | ${
          percent(col(t, i, (r) => share(r.cpu.bench, r)))
        } | ${percent(col(t, i, leaderCpu))} | ${errors} |`,
      );
    }
  }
  console.log("");
  for (const [t, target] of targets.entries()) {
    const perRound = CLIENTS.map((c, i) =>
      `${c}: ${rows[t][i].map((r) => count(r.opsPerSecond)).join("/")}`
    );
    const pids = [...target.cluster.registry.keys()].map((id) =>
      `${id} ${target.cluster.child(id).pid}`
    );
    console.log(
      `- ${target.label} (pids ${
        pids.join(", ")
      }): binds/s per round, by clients, ${perRound.join("; ")}`,
    );
    for (const [i, c] of CLIENTS.entries()) {
      for (const r of rows[t][i]) {
        if (r.leaderBefore !== r.leaderAfter) {
          findings.push(
            `${tlsScenario.title}, ${target.label}, ${
              clientsLabel(c)
            }: leader changed ${r.leaderBefore} → ${r.leaderAfter}`,
          );
        }
        for (const [kind, n] of [...r.errors, ...r.warmupErrors]) {
          findings.push(
            `${tlsScenario.title}, ${target.label}, ${
              clientsLabel(c)
            }: ${n} × ${kind}`,
          );
        }
      }
    }
  }
}

// --- watch fan-out -------------------------------------------------------------------

const FANOUT_PREFIX = "fanout/";
const FANOUT_NAME = "fanout/svc";

interface Round {
  sendToAck: number;
  fromAck: Float64Array;
  fromSend: Float64Array;
  /** Last watcher of each node, from send (NaN: none seen there). */
  lastByNode: Map<string, number>;
  missed: number;
  notifications: number;
  cpu: CpuCost;
}

/**
 * Opens `watchers` watches of one prefix over `ceil(watchers / PER_CONN)`
 * client objects (one watch connection each, to n1, n2, n3 in turn), then
 * binds once per round and times when each watcher sees the bind.
 */
async function fanOut(watchers: number) {
  const ids = [...cluster.registry.keys()];
  const urls = cluster.registryUrls;
  const connections = Math.ceil(watchers / PER_CONN);
  const seenAt = new Float64Array(watchers).fill(NaN);
  const nodeOf: string[] = [];
  const watches: RegistryWatch[] = [];
  const watchClients: RafterClient[] = [];
  let target = "";
  let notifications = 0;
  let seen = 0;
  let allSeen: (() => void) | null = null;
  const writer = newClient();
  try {
    for (let c = 0; c < connections; c++) {
      const node = c % ids.length;
      const client = newClient([urls[node]]);
      watchClients.push(client);
      const first = c * PER_CONN;
      for (let w = first; w < Math.min(watchers, first + PER_CONN); w++) {
        nodeOf[w] = ids[node];
        watches.push(client.watch(FANOUT_PREFIX, {}, (update) => {
          notifications++;
          if (update.kind !== "events" || !Number.isNaN(seenAt[w])) return;
          if (update.events.some((event) => event.endpoint.id === target)) {
            seenAt[w] = performance.now();
            if (++seen === watchers) allSeen?.();
          }
        }));
      }
    }
    const openBy = performance.now() + WATCH_OPEN_TIMEOUT_MS;
    const openStart = performance.now();
    while (watches.some((watch) => watch.next === null)) {
      if (performance.now() > openBy || stop.signal.aborted) {
        throw new Error(
          `only ${
            watches.filter((w) => w.next !== null).length
          } of ${watchers} watches opened within ${WATCH_OPEN_TIMEOUT_MS} ms`,
        );
      }
      await abortableSleep(10, stop.signal);
    }
    const openMs = performance.now() - openStart;
    const perNode = await Promise.all(
      ids.map(async (id) => (await cluster.status(id, 2_000))?.watchers ?? -1),
    );
    const rounds: Round[] = [];
    // Round 0 warms up the path and is not counted.
    for (let round = 0; round <= ROUNDS && !stop.signal.aborted; round++) {
      // A random pause, so binds do not fall at one phase of the tick.
      await abortableSleep(100 + Math.random() * 200, stop.signal);
      seenAt.fill(NaN);
      seen = 0;
      notifications = 0;
      target = `w${watchers}-r${round}`;
      const everyone = new Promise<void>((resolve) => allSeen = resolve);
      const cpuStart = sampleCpu();
      const sent = performance.now();
      try {
        await writer.bind(FANOUT_NAME, { id: target, url: FAKE_URL }, {
          signal: stop.signal,
        });
      } catch (error) {
        if (stop.signal.aborted) break;
        findings.push(
          `watch fan-out, ${watchers} watchers, round ${round}: the bind failed: ${
            errorKind(error)
          }`,
        );
        continue;
      }
      const acked = performance.now();
      const timeout = new AbortController();
      await Promise.race([
        everyone,
        abortableSleep(
          ROUND_TIMEOUT_MS,
          AbortSignal.any([stop.signal, timeout.signal]),
        ),
      ]);
      timeout.abort();
      allSeen = null;
      const cpu = cpuSince(cpuStart);
      if (round === 0) continue;
      const fromAck: number[] = [];
      const fromSend: number[] = [];
      const lastByNode = new Map<string, number>();
      for (let w = 0; w < watchers; w++) {
        const at = seenAt[w];
        if (Number.isNaN(at)) continue;
        fromAck.push(at - acked);
        fromSend.push(at - sent);
        lastByNode.set(
          nodeOf[w],
          Math.max(lastByNode.get(nodeOf[w]) ?? -Infinity, at - sent),
        );
      }
      rounds.push({
        sendToAck: acked - sent,
        fromAck: Float64Array.from(fromAck).sort(),
        fromSend: Float64Array.from(fromSend).sort(),
        lastByNode,
        missed: watchers - seen,
        notifications,
        cpu,
      });
      if (seen < watchers) {
        const missing = [...seenAt.keys()].filter((w) =>
          Number.isNaN(seenAt[w])
        );
        const byNode = new Map<string, number>();
        for (const w of missing) {
          byNode.set(nodeOf[w], (byNode.get(nodeOf[w]) ?? 0) + 1);
        }
        findings.push(
          `watch fan-out, ${watchers} watchers, round ${round}: ${
            watchers - seen
          } watcher(s) did not see the bind within ${ROUND_TIMEOUT_MS} ms (${
            [...byNode].map(([id, n]) => `${n} on ${id}`).join(", ")
          })`,
        );
      }
    }
    return { connections, perNode, openMs, rounds };
  } finally {
    for (const client of watchClients) closeClient(client);
    closeClient(writer);
  }
}

function printFanOut(
  results: {
    watchers: number;
    connections: number;
    perNode: number[];
    openMs: number;
    rounds: Round[];
  }[],
  leader: string,
): void {
  const ids = [...cluster.registry.keys()];
  const named = (id: string) => id === leader ? `${id} (leader)` : id;
  console.log(`\n## Watch fan-out: one bind, every watcher sees it\n`);
  console.log(
    `Watchers of the prefix "${FANOUT_PREFIX}" opened with RafterClient.watch (the client's WatchClient): ${PER_CONN} watches per RafterClient object, each object with its own watch connection to one node (${
      ids.join(", ")
    } in turn). Each round, one more client binds a new id under "${FANOUT_NAME}" through the leader (${leader}); a watcher has seen it when its callback runs in the bench process, so the times include the bench decoding every notification (its CPU is in the table). ${ROUNDS} rounds after one warm-up round, 100-300 ms apart (random, so the binds fall at any phase of the Raft tick); every time column is the median over the rounds. "from ack" can be negative: a watcher may hear of the write before its writer does. CPU: summed over the rounds, from the send to the last watcher.\n`,
  );
  console.log(
    `| watchers | connections (watchers ${
      ids.join("/")
    }) | send → ack ms | from ack p50 | from ack p99 | from ack max (last) | from send p50 | from send p99 | from send max (last) | ${
      ids.map((id) => `last on ${named(id)}`).join(" | ")
    } | missed | bench CPU ms | ${
      ids.map((id) => `${id} CPU ms`).join(" | ")
    } | other processes CPU ms |`,
  );
  console.log(
    `| ---: | :--- | ${
      Array.from({ length: 10 + 2 * ids.length }, () => "---:").join(" | ")
    } |`,
  );
  for (const result of results) {
    const col = (f: (r: Round) => number) => ms(median(result.rounds.map(f)));
    const sum = (f: (r: Round) => number | null | undefined) => {
      let total = 0;
      for (const round of result.rounds) {
        const value = f(round);
        if (value === null || value === undefined) return "n/a";
        total += value;
      }
      return ms(total);
    };
    console.log(
      `| ${result.watchers} | ${result.connections} (${
        result.perNode.join("/")
      }) | ${col((r) => r.sendToAck)} | ${
        col((r) => percentile(r.fromAck, 0.5))
      } | ${col((r) => percentile(r.fromAck, 0.99))} | ${
        col((r) => percentile(r.fromAck, 1))
      } | ${col((r) => percentile(r.fromSend, 0.5))} | ${
        col((r) => percentile(r.fromSend, 0.99))
      } | ${col((r) => percentile(r.fromSend, 1))} | ${
        ids.map((id) => col((r) => r.lastByNode.get(id) ?? NaN)).join(" | ")
      } | ${result.rounds.reduce((total, r) => total + r.missed, 0)} | ${
        sum((r) => r.cpu.bench)
      } | ${ids.map((id) => sum((r) => r.cpu.nodes.get(id))).join(" | ")} | ${
        sum((r) => r.cpu.others)
      } |`,
    );
  }
  console.log("");
  for (const result of results) {
    const rounds = result.rounds.map((r) =>
      `${ms(percentile(r.fromSend, 1))} (${
        ids.map((id) => ms(r.lastByNode.get(id) ?? NaN)).join("/")
      })`
    );
    console.log(
      `- ${result.watchers} watchers: watches open in ${
        ms(result.openMs)
      } ms; last watcher from send, per round (last on ${ids.join("/")}): ${
        rounds.join(", ")
      } ms; ${
        result.rounds.map((r) => r.notifications).join("/")
      } notifications received; bench CPU share of each round ${
        result.rounds.map((r) => pct(r.cpu.bench, r.cpu.wallMs)).join(", ")
      }`,
    );
    const busiest = Math.max(
      ...result.rounds.map((r) => r.cpu.bench / r.cpu.wallMs),
    );
    if (busiest >= SATURATED) {
      console.log(
        `- ${result.watchers} watchers: the bench process used ${
          Math.round(100 * busiest)
        }% of a core in a round: the watchers' side (this process) may be what the last watcher waits for`,
      );
    }
  }
  console.log(
    `- node CPU comes from /proc/PID/stat in ${
      1000 / CLOCK_TICKS
    } ms clock ticks: coarse over windows this short`,
  );
}

// --- the machine -----------------------------------------------------------------

function cpuModel(): string {
  try {
    const info = Deno.readTextFileSync("/proc/cpuinfo");
    return /^model name\s*:\s*(.*)$/m.exec(info)?.[1]?.trim() ?? "unknown CPU";
  } catch {
    return "unknown CPU";
  }
}

/** Median time of a small write + fdatasync in `dir`, ms (what each log append costs). */
async function fsyncProbe(dir: string): Promise<string> {
  const path = `${dir}/fsync-probe`;
  const file = await Deno.open(path, { write: true, create: true });
  try {
    const bytes = new Uint8Array(256).fill(120);
    const times: number[] = [];
    for (let i = 0; i < 100; i++) {
      const start = performance.now();
      await file.write(bytes);
      await file.syncData();
      times.push(performance.now() - start);
    }
    times.sort((a, b) => a - b);
    return `p50 ${ms(percentile(times, 0.5))} ms, p99 ${
      ms(percentile(times, 0.99))
    } ms`;
  } finally {
    file.close();
    await Deno.remove(path).catch(() => {});
  }
}

function header(fsync: string, leader: string, dataDir: string): void {
  const memory = Deno.systemMemoryInfo();
  const gib = (bytes: number) => (bytes / 2 ** 30).toFixed(1);
  const load = Deno.loadavg().map((v) => v.toFixed(2)).join(" ");
  const ids = [...cluster.registry.keys()];
  const pids = ids.map((id) => `${id} ${cluster.child(id).pid}`).join(", ");
  const objects = Math.min(GROUPS, Math.max(...CLIENTS));
  console.log(`# Rafter registry benchmark\n`);
  console.log(`- date: ${new Date().toISOString()}`);
  console.log(
    `- machine: ${navigator.hardwareConcurrency} cores (${cpuModel()}), ${
      gib(memory.total)
    } GiB memory (${
      gib(memory.available)
    } GiB available), load average ${load}; ${Deno.build.target}, kernel ${Deno.osRelease()}`,
  );
  console.log(
    `- Deno ${Deno.version.deno} (V8 ${Deno.version.v8}, TypeScript ${Deno.version.typescript}); bench pid ${Deno.pid}`,
  );
  console.log(
    `- registry: ${ids.length} nodes, real \`deno run\` processes on 127.0.0.1 (pids ${pids}), fsync on every log append (write + fdatasync in the data folder's file system: ${fsync}); tick ${
      TICK_MS ?? 50
    } ms, election timeout ${
      ELECTION_TICKS ?? 10
    } ticks; leader ${leader} at the start; data in ${dataDir} (removed at the end)`,
  );
  console.log(
    `- rows: ${WARMUP} s warm-up, then ${SECONDS} s measured${
      values.quick ? " (--quick)" : ""
    }; closed loop (each caller sends its next call when its last one answered, ${OP_DEADLINE_MS} ms deadline a call); latency of successful calls, as the caller sees it (client retries included)`,
  );
  console.log(
    `- clients: 1 client = 1 caller on 1 RafterClient; ${
      Math.max(...CLIENTS)
    } clients = ${
      Math.max(...CLIENTS)
    } callers over ${objects} RafterClient objects (${
      Math.ceil(Math.max(...CLIENTS) / objects)
    } callers each, pipelined on that object's connections: so ${objects} connections to each node it talks to, not one); writes and lease calls go to the leader, reads round-robin over all nodes (the client's default)`,
  );
  console.log(
    `- CPU columns: CPU time over the measured window ÷ its wall time (100% = one core; the bench process counts all its threads); machine total ${
      navigator.hardwareConcurrency * 100
    }%. "other processes": the machine's busy time (/proc/stat) minus the bench's and the nodes': whatever else runs here, i.e. the noise`,
  );
}

// --- the run ---------------------------------------------------------------------------

const LOOKUP_NAME = "bench/lookup";
const LOOKUP_ENDPOINTS = 10;
const keepAliveLeases: string[] = [];
let lookupBound = false;

/** Binds the endpoints the lookups read, once. */
async function bindLookupEndpoints(client: RafterClient): Promise<void> {
  if (lookupBound) return;
  for (let i = 0; i < LOOKUP_ENDPOINTS; i++) {
    await client.bind(LOOKUP_NAME, {
      id: `e${i}`,
      url: `tcp://127.0.0.1:${20_000 + i}`,
      attrs: { version: "1.0" },
      zone: `z${i % 3}`,
    }, { signal: stop.signal });
  }
  lookupBound = true;
}

const loadScenarios: Scenario[] = [
  {
    part: "bind",
    title: "registry.bind (distinct ids: every call is a Raft write)",
    note:
      `Each call binds a new id under "bench/bind" (permanent bindings, left in place).`,
    op: (client, _caller, n) =>
      client.bind("bench/bind", { id: `b${n}`, url: FAKE_URL }, {
        signal: stop.signal,
      }),
  },
  {
    part: "keepalive",
    title: "lease.keepAlive (leases granted beforehand)",
    note:
      `Each caller renews its own lease (${LONG_TTL_MS} ms TTL, granted before the rows, revoked after them); the leader answers from memory, nothing is written to the log.`,
    async setup(client) {
      for (let i = 0; i < Math.max(...CLIENTS); i++) {
        const lease = await client.registry.grantLease(LONG_TTL_MS, {
          signal: stop.signal,
        });
        keepAliveLeases.push(lease.id);
      }
    },
    async teardown(client) {
      await Promise.all(
        keepAliveLeases.map((id) => client.registry.revokeLease(id)),
      );
    },
    op: (client, caller) =>
      client.registry.keepAlive(keepAliveLeases[caller], undefined, {
        signal: stop.signal,
      }),
  },
  {
    part: "lookup-lin",
    title: "registry.lookup, linearizable",
    note:
      `Lookups of "${LOOKUP_NAME}" (${LOOKUP_ENDPOINTS} endpoints), consistency "linearizable": a ReadIndex round through the leader before each answer; the client spreads them over all nodes.`,
    setup: bindLookupEndpoints,
    op: (client) =>
      client.lookup(LOOKUP_NAME, {
        consistency: "linearizable",
        signal: stop.signal,
      }),
  },
  {
    part: "lookup-ser",
    title: "registry.lookup, serializable",
    note:
      `The same lookups with consistency "serializable": each node answers from its own state at once.`,
    setup: bindLookupEndpoints,
    op: (client) =>
      client.lookup(LOOKUP_NAME, {
        consistency: "serializable",
        signal: stop.signal,
      }),
  },
];

const grantScenario: Scenario = {
  part: "grant",
  title: "registry.bind with grant (lease + binding in one write)",
  note:
    `Each call grants a new lease (${LONG_TTL_MS} ms TTL, so none expires during the run) and binds a new id under "bench/grant" with it, in one log entry. Run last: the leases stay, and the leader times every one of them each tick.`,
  op: (client, _caller, n) =>
    client.bind("bench/grant", { id: `g${n}`, url: FAKE_URL }, {
      grant: { ttlMs: LONG_TTL_MS },
      signal: stop.signal,
    }),
};

let exitCode = 0;
try {
  await cluster.startRegistry(3);
  const leader = await cluster.waitForLeader(20_000);
  logging = true;
  const fsync = await fsyncProbe(await cluster.dataDirOf("n1"));
  const runCpu = sampleCpu();
  header(fsync, leader, (await cluster.secretFile()).replace(/\/[^/]*$/, ""));
  let rowBase = 0;
  for (const scenario of loadScenarios.filter((s) => ONLY.has(s.part))) {
    if (stop.signal.aborted) break;
    await runScenario(scenario, rowBase);
    rowBase += CLIENTS.length;
  }
  if (!stop.signal.aborted && ONLY.has("tls")) {
    await tlsPart(rowBase);
    rowBase += 3 * TLS_ROUNDS * CLIENTS.length;
  }
  if (!stop.signal.aborted && ONLY.has("watch")) {
    const fanLeader = await leaderNow();
    const results = [];
    for (const watchers of WATCHERS) {
      if (stop.signal.aborted) break;
      results.push({ watchers, ...await fanOut(watchers) });
    }
    printFanOut(results, fanLeader);
  }
  if (!stop.signal.aborted && ONLY.has("grant")) {
    await runScenario(grantScenario, rowBase);
  }
  if (!stop.signal.aborted) {
    const total = cpuSince(runCpu);
    const leases = (await cluster.status(await leaderNow(), 2_000))?.leases;
    console.log(`\n## Whole run\n`);
    const seconds = (v: number | null | undefined) =>
      v === null || v === undefined ? "n/a" : `${(v / 1000).toFixed(1)} s`;
    console.log(
      `- wall ${seconds(total.wallMs)}; CPU: bench ${seconds(total.bench)}, ${
        [...total.nodes].map(([id, v]) => `${id} ${seconds(v)}`).join(", ")
      }, other processes ${seconds(total.others)}; load average at the end ${
        Deno.loadavg().map((v) => v.toFixed(2)).join(" ")
      }; leader at the end ${await leaderNow()}; ${
        leases ?? "?"
      } leases left in the registry`,
    );
    if (findings.length === 0) {
      console.log(
        "- no errors, no leader change, every watcher saw every bind",
      );
    } else {
      for (const finding of findings) console.log(`- ${finding}`);
    }
    const logLines = nodeLog.filter((line) =>
      !/listening on|auth is on|recorded the bootstrap admin token/.test(line)
    );
    if (logLines.length > 0) {
      console.log(
        `- the nodes printed ${logLines.length} line(s) during the run; the first ones:`,
      );
      for (const line of logLines.slice(0, 10)) {
        console.log(`  - \`${line.slice(0, 300)}\``);
      }
    }
  }
} catch (error) {
  if (!stop.signal.aborted) {
    console.error("bench failed:", error);
    exitCode = 1;
  }
} finally {
  for (const client of [...clients]) client.close();
  await Promise.all([cluster, ...tlsClusters].map((c) => c.stop()));
  if (pkiDir !== null) {
    await Deno.remove(pkiDir, { recursive: true }).catch(() => {});
  }
  clearTimeout(budget);
  Deno.removeSignalListener("SIGINT", onSignal);
  Deno.removeSignalListener("SIGTERM", onSignal);
}
if (stop.signal.aborted) {
  const reason = stop.signal.reason;
  exitCode = reason instanceof Error && reason.message === "interrupted"
    ? 130
    : 1;
}
Deno.exit(exitCode);
