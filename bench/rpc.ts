/**
 * RPC side by side in one run (issue 9, scenarios `rtt` and `throughput`):
 * an `echo` of the small object `{ n: 1, s: "hello, world" }` against each
 * server, every server and every client its own process on 127.0.0.1:
 *
 * | row | server | client |
 * |---|---|---|
 * | raw TCP, Deno | `bench/echo_server.ts` (Deno.listen, bytes back) | a line client (Deno.connect) |
 * | Rafter, Deno | `serve()` of `@rafter/rpc/deno` | `dial()`, Deno's TCP dialer |
 * | raw TCP, Node | `node:net`, bytes back | a line client (`node:net`) |
 * | Rafter, Node | `serve()` of `@rafter/rpc/node` | `dial()`, `nodeTcpDialer` |
 * | Rafter's Node server, jayson's line client | Rafter, Node | the line client of jayson's kept-open row |
 * | jayson, stock client | jayson 5 TCP server (Node) | `jayson.Client.tcp()`: a connection per call |
 * | jayson, kept-open connection | jayson 5 TCP server (Node) | the line client over one connection |
 * | grpc-js unary | `@grpc/grpc-js` 1.14 server, `bench/echo.proto` | grpc-js client, one channel |
 * | Rafter over TLS, Deno | `serve({ tls })` (Deno) | `dial()`, `denoDialer({ caFile })` (`node:tls`) |
 * | Rafter over TLS, Deno, `Deno.connectTls` client | the same | `dial()` over one `Deno.connectTls` stream |
 * | Rafter over TLS, Node | `serve({ tls })` (Node) | `dial()`, `nodeDialer({ caFile })` |
 *
 * The TLS rows use a throw-away CA and certificate (`testing/certs.ts`);
 * a table of their own puts each beside the plain row of its runtime
 * (sequential p50 and 64-in-flight calls/s, as ratios TLS ÷ plain).
 *
 * Node rows run under `node` (20 or later): the scripts are bundled with
 * `deno bundle --platform node` into a temp folder first; jayson and
 * grpc-js come from npm through deno.json (`deno install` puts them in
 * `node_modules/`, then the bundle carries them). A peer that cannot be
 * installed or started is a skipped row saying why; a Rafter failure
 * exits 1.
 *
 * - `rtt`: sequential calls on one connection, p50/p99 µs, each against
 *   the raw TCP echo of the same runtime.
 * - `throughput`: 64 calls in flight on one connection (one client
 *   process), and 64 in flight on each of 4 connections (4 client
 *   processes, 256 in all), calls/s, against jayson's kept-open
 *   connection and grpc-js.
 *
 * Every figure is the median of 3 rounds run A B C … A B C …; ratios are
 * medians of the per-round ratios. The CPU of the server and of each
 * client process (% of one core, from /proc) is measured over each
 * stretch; a client near a full core is reported, since it bounds what
 * the row can show. A script, not a test: it asserts nothing about speed.
 *
 * ```sh
 * deno task bench:rpc                          # 10,000 sequential calls and 2 s floods per round
 * deno task bench:rpc --quick                  # 200 calls, 0.15 s (the smoke test)
 * deno run -A bench/rpc.ts --scenarios rtt     # one scenario
 * ```
 *
 * Flags: `--scenarios rtt,throughput` (default both), `--quick`, `--help`.
 *
 * @module
 */

import { fileURLToPath } from "node:url";
import { makeTestPki } from "../testing/certs.ts";
import { benchArgs, usageError } from "./_args.ts";
import { Child } from "./_child.ts";
import {
  alternate,
  type Cell,
  CpuMeter,
  median,
  ratio,
  Report,
  type Row,
  selectedScenarios,
} from "./report.ts";

const USAGE =
  `usage: deno run -A bench/rpc.ts [--scenarios rtt,throughput] [--quick]

  --scenarios LIST  rtt, throughput (default: both)
  --quick           200 sequential calls and 0.15 s floods per round
  --help            show this text`;

const SCENARIOS = ["rtt", "throughput"] as const;
const flags = benchArgs(USAGE, {
  scenarios: { type: "string" },
  quick: { type: "boolean", default: false },
});
let wanted: Set<typeof SCENARIOS[number]>;
try {
  wanted = selectedScenarios(flags.scenarios as string | undefined, SCENARIOS);
} catch (error) {
  usageError((error as Error).message, USAGE);
}
const QUICK = flags.quick === true;
const CALLS = QUICK ? 200 : 10_000;
const FLOOD_MS = QUICK ? 150 : 2_000;
const ROUNDS = 3;
const IN_FLIGHT = 64;
/** A client process at this share of a core or more is the bottleneck. */
const SATURATED_PERCENT = 90;
const START_TIMEOUT_MS = 60_000;

const ROOT = fileURLToPath(new URL("../", import.meta.url));
/** The development config: the npm peers are its imports, not deno.json's. */
const DEV_CONFIG = ["--config", `${ROOT}deno.dev.json`];
const BENCH = `${ROOT}bench/`;
const PROTO = `${BENCH}echo.proto`;

type Command = [string, string[]];

/** A server process, shared by the rows that call it. */
interface Server {
  name: string;
  /** How to start it, or why it cannot be. */
  command: Command | { skipped: string };
  child?: Child;
  url?: string;
  failed?: string;
}

/** A row: a server, the client process that calls it, and its results. */
interface Contender {
  label: string;
  runtime: "Deno" | "Node";
  server: Server;
  client(url: string): Command | { skipped: string };
  /** A Rafter row: its failure fails the bench. */
  rafter: boolean;
  clients: Child[];
  skipped?: string;
}

/** What one measurement gave: the clients' answers and the CPU shares. */
interface Sample<A> {
  answers: A[];
  serverCpu: number | null;
  clientCpu: (number | null)[];
}

const report = new Report("rpc.ts");
const children: Child[] = [];
let tmp: string | undefined;

async function run(
  command: string,
  args: string[],
): Promise<{ ok: boolean; text: string }> {
  try {
    const out = await new Deno.Command(command, {
      args,
      cwd: ROOT,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const decode = (b: Uint8Array) => new TextDecoder().decode(b);
    return { ok: out.success, text: decode(out.stdout) + decode(out.stderr) };
  } catch (error) {
    return { ok: false, text: String((error as Error).message) };
  }
}

/** The last line of a tool's output that says something, for a reason. */
const gist = (text: string) =>
  text.trim().split("\n").filter((l) => /\S/.test(l)).slice(-3).join(" / ")
    // deno-lint-ignore no-control-regex
    .replace(/\x1b\[[0-9;]*m/g, "").slice(0, 300);

async function cleanup(): Promise<void> {
  await Promise.all(children.map((child) => child.stop()));
  if (tmp !== undefined) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
}

const onInterrupt = async () => {
  await cleanup();
  Deno.exit(130);
};
Deno.addSignalListener("SIGINT", onInterrupt);

/** A script bundled for Node: the .mjs file, or why there is none. */
type Bundle = string | { skipped: string };

/** The scripts the Node rows run, bundled. */
interface Bundles {
  rpcServer: Bundle;
  rpcClient: Bundle;
  jaysonServer: Bundle;
  jaysonClient: Bundle;
  grpcServer: Bundle;
  grpcClient: Bundle;
}

/**
 * Checks for Node 20+, installs the npm peers (`deno install`) and bundles
 * the Node scripts into a temp folder.
 *
 * @throws {Error} when Rafter's own scripts do not bundle.
 */
async function prepareNode(): Promise<Bundles> {
  const node = await run("node", ["--version"]);
  // Without a node on PATH, Deno may run itself for "node": not a Node.
  const version = /^v(\d+)\.\S*/.exec(node.text.trim());
  if (!node.ok || version === null || Number(version[1]) < 20) {
    const skipped = {
      skipped: node.ok && version !== null
        ? `node ${version[0]} is too old: install Node 20 or later`
        : "node not found on PATH: install Node 20 or later",
    };
    return {
      rpcServer: skipped,
      rpcClient: skipped,
      jaysonServer: skipped,
      jaysonClient: skipped,
      grpcServer: skipped,
      grpcClient: skipped,
    };
  }
  // The npm peers: deno.dev.json's imports, installed into node_modules/.
  const install = await run(Deno.execPath(), ["install", ...DEV_CONFIG]);
  const npmSkip = install.ok ? undefined : {
    skipped: `\`deno install\` failed (${
      gist(install.text)
    }): check the npm registry is reachable, then rerun`,
  };
  tmp = await Deno.makeTempDir({ prefix: "rafter-bench-rpc-" });
  const bundle = async (
    script: string,
    peer?: string,
  ): Promise<Bundle> => {
    if (peer !== undefined && npmSkip !== undefined) return npmSkip;
    const out = `${tmp}/${script}.mjs`;
    const result = await run(Deno.execPath(), [
      "bundle",
      ...DEV_CONFIG,
      "--quiet",
      "--platform",
      "node",
      "--format",
      "esm",
      "-o",
      out,
      `${BENCH}${script}.ts`,
    ]);
    if (result.ok) return out;
    const reason = `deno bundle bench/${script}.ts failed: ${
      gist(result.text)
    }`;
    if (peer === undefined) throw new Error(reason);
    return { skipped: `${reason}; is ${peer} installed (deno install)?` };
  };
  const [
    rpcServer,
    rpcClient,
    jaysonServer,
    jaysonClient,
    grpcServer,
    grpcClient,
  ] = await Promise.all([
    bundle("rpc_server"),
    bundle("rpc_client"),
    bundle("jayson_server", "jayson"),
    bundle("jayson_client", "jayson"),
    bundle("grpc_server", "@grpc/grpc-js"),
    bundle("grpc_client", "@grpc/grpc-js"),
  ]);
  return {
    rpcServer,
    rpcClient,
    jaysonServer,
    jaysonClient,
    grpcServer,
    grpcClient,
  };
}

const nodeCommand = (
  bundle: Bundle,
  ...args: string[]
): Command | { skipped: string } =>
  typeof bundle === "string" ? ["node", [bundle, ...args]] : bundle;
const denoCommand = (script: string, ...args: string[]): Command => [
  Deno.execPath(),
  ["run", "-A", `${BENCH}${script}`, ...args],
];

/** Starts `server` once; false (with `failed` set) when it cannot run. */
async function started(server: Server): Promise<boolean> {
  if (server.url !== undefined) return true;
  if (server.failed !== undefined) return false;
  if (!Array.isArray(server.command)) {
    server.failed = server.command.skipped;
    return false;
  }
  const child = new Child(server.name, ...server.command, ROOT);
  children.push(child);
  server.child = child;
  try {
    const line = await child.nextLine(START_TIMEOUT_MS);
    const url = /listening on (t(?:cp|ls):\/\/\S+)/.exec(line)?.[1];
    if (url === undefined) throw new Error(`${server.name} printed "${line}"`);
    server.url = url;
    return true;
  } catch (error) {
    server.failed = (error as Error).message;
    return false;
  }
}

/** `contender`'s first `n` client processes, each connected and warm. */
async function clientsOf(contender: Contender, n: number): Promise<Child[]> {
  if (!await started(contender.server)) {
    throw new Error(
      `server ${contender.server.name}: ${contender.server.failed}`,
    );
  }
  const command = contender.client(contender.server.url!);
  if (!Array.isArray(command)) throw new Error(command.skipped);
  const fresh: Child[] = [];
  for (let i = contender.clients.length; i < n; i++) {
    const child = new Child(
      `${contender.label} client ${i + 1}`,
      ...command,
      ROOT,
    );
    children.push(child);
    fresh.push(child);
    contender.clients.push(child);
  }
  for (const child of fresh) {
    const line = await child.nextLine(START_TIMEOUT_MS);
    if (line !== "ready") throw new Error(`${child.name} printed "${line}"`);
  }
  return contender.clients.slice(0, n);
}

/**
 * Sends `command` to the first `n` clients of `contender` at once and
 * gathers their answers, with the CPU of the server and the clients over
 * that stretch; null for a skipped peer (a Rafter failure throws).
 */
async function measure<A>(
  contender: Contender,
  n: number,
  command: string,
  timeoutMs: number,
): Promise<Sample<A> | null> {
  if (contender.skipped !== undefined) return null;
  try {
    const clients = await clientsOf(contender, n);
    const meter = new CpuMeter(
      new Map([
        ["server", contender.server.child!.pid],
        ...clients.map((c, i) => [`client ${i}`, c.pid] as [string, number]),
      ]),
    );
    await Promise.all(clients.map((c) => c.send(command)));
    const lines = await Promise.all(clients.map((c) => c.nextLine(timeoutMs)));
    const shares = meter.shares();
    const answers = lines.map((line) => JSON.parse(line));
    const failed = answers.find((a) => typeof a.error === "string");
    if (failed !== undefined) throw new Error(`a call failed: ${failed.error}`);
    return {
      answers,
      serverCpu: shares.get("server") ?? null,
      clientCpu: clients.map((_, i) => shares.get(`client ${i}`) ?? null),
    };
  } catch (error) {
    const message = (error as Error).message;
    if (contender.rafter) throw new Error(`${contender.label}: ${message}`);
    contender.skipped = message.replace(/\s*\n\s*/g, " / ").slice(0, 400);
    return null;
  }
}

/** The median of the defined values; null when none. */
const med = (values: (number | null | undefined)[]): number | null => {
  const numbers = values.filter((v): v is number =>
    typeof v === "number" && Number.isFinite(v)
  );
  return numbers.length === 0 ? null : median(numbers);
};

/** The median over rounds of `of(row round) / of(baseline round)`. */
function pairedRatio<S>(
  rows: (S | null)[],
  baseline: (S | null)[] | undefined,
  of: (sample: S) => number,
): number | null {
  if (baseline === undefined) return null;
  return med(rows.map((s, r) => {
    const b = baseline[r];
    return s === null || b === null ? null : ratio(of(s), of(b));
  }));
}

const skippedRow = (c: Contender): Row | null =>
  c.skipped === undefined
    ? null
    : { label: c.label, cells: [], skipped: c.skipped };

async function main(): Promise<void> {
  const node = await prepareNode();
  const pkiDir = await Deno.makeTempDir({ prefix: "rafter-bench-tls-" });
  const pki = await makeTestPki(pkiDir, { others: ["server"] });
  const certArgs = [pki.certs.server.certFile, pki.certs.server.keyFile];
  const server = (name: string, command: Server["command"]): Server => ({
    name,
    command,
  });
  const denoRaw = server("raw TCP echo (Deno)", denoCommand("echo_server.ts"));
  const denoRafter = server(
    "Rafter serve() (Deno)",
    denoCommand("rpc_server.ts", "rafter"),
  );
  const nodeRaw = server(
    "raw TCP echo (Node)",
    nodeCommand(node.rpcServer, "raw"),
  );
  const nodeRafter = server(
    "Rafter serve() (Node)",
    nodeCommand(node.rpcServer, "rafter"),
  );
  const denoTls = server(
    "Rafter serve({ tls }) (Deno)",
    denoCommand("rpc_server.ts", "rafter-tls", ...certArgs),
  );
  const nodeTls = server(
    "Rafter serve({ tls }) (Node)",
    nodeCommand(node.rpcServer, "rafter-tls", ...certArgs),
  );
  const jayson = server(
    "jayson 5 TCP server (Node)",
    nodeCommand(node.jaysonServer),
  );
  const grpc = server(
    "grpc-js server (Node)",
    nodeCommand(node.grpcServer, PROTO),
  );
  const contender = (
    label: string,
    runtime: Contender["runtime"],
    s: Server,
    client: Contender["client"],
    rafter = false,
  ): Contender => ({ label, runtime, server: s, client, rafter, clients: [] });
  const rawDeno = contender(
    "raw TCP echo, Deno",
    "Deno",
    denoRaw,
    (url) => denoCommand("rpc_client.ts", "raw", url),
  );
  const rafterDeno = contender(
    "Rafter, Deno: serve() + dial()",
    "Deno",
    denoRafter,
    (url) => denoCommand("rpc_client.ts", "rafter", url),
    true,
  );
  const rawNode = contender(
    "raw TCP echo, Node",
    "Node",
    nodeRaw,
    (url) => nodeCommand(node.rpcClient, "raw", url),
  );
  const rafterNode = contender(
    "Rafter, Node: serve() + dial()",
    "Node",
    nodeRafter,
    (url) => nodeCommand(node.rpcClient, "rafter", url),
    true,
  );
  const rafterNodeLine = contender(
    "Rafter's Node server, jayson's line client",
    "Node",
    nodeRafter,
    (url) => nodeCommand(node.rpcClient, "line", url),
    true,
  );
  const jaysonStock = contender(
    "jayson 5, stock client (a connection per call)",
    "Node",
    jayson,
    (url) => nodeCommand(node.jaysonClient, url),
  );
  const jaysonKept = contender(
    "jayson 5, kept-open connection (line client)",
    "Node",
    jayson,
    (url) => nodeCommand(node.rpcClient, "line", url),
  );
  const grpcUnary = contender(
    "grpc-js 1.14 unary",
    "Node",
    grpc,
    (url) => nodeCommand(node.grpcClient, PROTO, url),
  );
  const tlsDeno = contender(
    "Rafter over TLS, Deno: serve({ tls }) + dial() (node:tls)",
    "Deno",
    denoTls,
    (url) => denoCommand("rpc_client.ts", "rafter", url, pki.caFile),
    true,
  );
  const tlsDenoConnectTls = contender(
    "Rafter over TLS, Deno: dial() over Deno.connectTls",
    "Deno",
    denoTls,
    (url) => denoCommand("rpc_client.ts", "rafter-connecttls", url, pki.caFile),
    true,
  );
  const tlsNode = contender(
    "Rafter over TLS, Node: serve({ tls }) + dial()",
    "Node",
    nodeTls,
    (url) => nodeCommand(node.rpcClient, "rafter", url, pki.caFile),
    true,
  );
  // A missing node makes the Node rows skipped, Rafter's too: that is the
  // machine, not Rafter.
  for (const c of [rawNode, rafterNode, rafterNodeLine, tlsNode]) {
    const command = c.server.command;
    if (!Array.isArray(command)) c.skipped = command.skipped;
  }
  const all = [
    rawDeno,
    rafterDeno,
    rawNode,
    rafterNode,
    rafterNodeLine,
    jaysonStock,
    jaysonKept,
    grpcUnary,
    tlsDeno,
    tlsDenoConnectTls,
    tlsNode,
  ];
  /** Each TLS row and the plain row of its runtime. */
  const tlsPairs: [Contender, Contender][] = [
    [tlsDeno, rafterDeno],
    [tlsDenoConnectTls, rafterDeno],
    [tlsNode, rafterNode],
  ];
  /** p50 (rtt) and calls/s on one connection (throughput), per round. */
  const tlsFigures = new Map<Contender, { p50?: Cell[]; rate?: Cell[] }>();
  const version = /^v\d\S*/.exec((await run("node", ["--version"])).text);
  const runtimes = `Deno ${Deno.version.deno}, Node ${
    version?.[0] ?? "(none)"
  }`;

  if (wanted.has("rtt")) {
    type Seq = { p50: number; p99: number };
    const samples = await alternate(
      ROUNDS,
      all,
      (c) => measure<Seq>(c, 1, `seq ${CALLS}`, START_TIMEOUT_MS + CALLS * 20),
    );
    const of = (c: Contender) => samples[all.indexOf(c)];
    for (const c of all) {
      tlsFigures.set(c, {
        ...tlsFigures.get(c),
        p50: of(c).map((x) => x?.answers[0].p50 ?? null),
      });
    }
    const rows: Row[] = all.map((c) => {
      const s = of(c);
      const raw = c.runtime === "Deno" ? of(rawDeno) : of(rawNode);
      return skippedRow(c) ?? {
        label: c.label,
        cells: [
          med(s.map((x) => x?.answers[0].p50)),
          med(s.map((x) => x?.answers[0].p99)),
          pairedRatio(s, raw, (x) => x.answers[0].p50),
          pairedRatio(s, raw, (x) => x.answers[0].p99),
          med(s.map((x) => x?.serverCpu)),
          med(s.map((x) => x?.clientCpu[0])),
        ],
      };
    });
    report.table({
      scenario: "rtt",
      title: "RPC round trip: sequential echo on one connection",
      note: `${
        CALLS.toLocaleString("en-US")
      } calls one after the other per round (after 50 untimed), each client and server its own process on 127.0.0.1 (${runtimes}); medians of ${ROUNDS} alternating rounds, ratios to the raw TCP echo of the same runtime (median of the per-round ratios). jayson's stock client opens a new TCP connection per call (jayson 5 \`ClientTcp._request\` calls \`net.connect\` per request and ends it after the answer).`,
      columns: [
        { name: "p50", unit: "µs" },
        { name: "p99", unit: "µs" },
        { name: "p50 vs raw TCP", unit: "×" },
        { name: "p99 vs raw TCP", unit: "×" },
        { name: "server CPU", unit: "%" },
        { name: "client CPU", unit: "%" },
      ],
      rows,
    });
    for (const c of [rafterDeno, rafterNode]) {
      const cell = rows[all.indexOf(c)].cells[2];
      if (typeof cell === "number") {
        report.note(
          `rtt target (sequential ≤ 1.5× raw TCP of the same runtime): ${c.label} p50 ${
            cell.toFixed(2)
          }× raw TCP under ${c.runtime}: ${cell <= 1.5 ? "met" : "not met"}`,
        );
      }
    }
  }

  if (wanted.has("throughput")) {
    const configs = [
      {
        connections: 1,
        title: `${IN_FLIGHT} calls in flight on one connection`,
      },
      {
        connections: 4,
        title: `${
          4 * IN_FLIGHT
        } calls in flight over 4 connections (${IN_FLIGHT} each)`,
      },
    ];
    for (const config of configs) {
      type Flood = { calls: number; seconds: number };
      const samples = await alternate(
        ROUNDS,
        all,
        (c) =>
          measure<Flood>(
            c,
            config.connections,
            `flood ${IN_FLIGHT} ${FLOOD_MS}`,
            START_TIMEOUT_MS + FLOOD_MS,
          ),
      );
      const rate = (s: Sample<Flood>) =>
        s.answers.reduce((sum, a) => sum + a.calls / a.seconds, 0);
      const busiest = (s: Sample<Flood>) =>
        Math.max(...s.clientCpu.map((x) => x ?? NaN));
      const total = (s: Sample<Flood>) =>
        s.clientCpu.reduce<number>((sum, x) => sum + (x ?? NaN), 0);
      const of = (c: Contender) => samples[all.indexOf(c)];
      if (config.connections === 1) {
        for (const c of all) {
          tlsFigures.set(c, {
            ...tlsFigures.get(c),
            rate: of(c).map((x) => x && rate(x)),
          });
        }
      }
      const rows: Row[] = all.map((c) => {
        const s = of(c);
        const cells: Cell[] = [
          med(s.map((x) => x && rate(x))),
          pairedRatio(s, of(jaysonKept), rate),
          pairedRatio(s, of(grpcUnary), rate),
          med(s.map((x) => x?.serverCpu)),
          med(s.map((x) => x && busiest(x))),
        ];
        if (config.connections > 1) {
          cells.push(med(s.map((x) => x && total(x))));
        }
        // CPU per call: % of a core × 10 s ÷ calls/s = ms per 1,000 calls.
        cells.push(
          med(s.map((x) => x && ((x.serverCpu ?? NaN) * 10_000) / rate(x))),
          med(s.map((x) => x && (total(x) * 10_000) / rate(x))),
        );
        return skippedRow(c) ?? { label: c.label, cells };
      });
      report.table({
        scenario: "throughput",
        title: `RPC throughput: ${config.title}`,
        note: `${
          config.connections === 1
            ? "One client process"
            : `${config.connections} client processes, one connection each,`
        } keeping ${IN_FLIGHT} echo calls in flight for ${
          FLOOD_MS / 1000
        } s per round (${runtimes}); medians of ${ROUNDS} alternating rounds; ratios to jayson over a kept-open connection and to grpc-js (medians of the per-round ratios). jayson's stock client opens a connection per call, so its ${IN_FLIGHT} in flight are ${IN_FLIGHT} connections per client process. CPU: % of one core over the stretch (the machine has ${navigator.hardwareConcurrency} cores), and CPU time per 1,000 calls (which a busy machine changes less than calls/s).`,
        columns: [
          { name: "calls/s", unit: "/s" },
          { name: "vs jayson", unit: "×" },
          { name: "vs grpc-js", unit: "×" },
          { name: "server CPU", unit: "%" },
          { name: "busiest client CPU", unit: "%" },
          ...(config.connections > 1
            ? [{ name: "clients' CPU, total", unit: "%" as const }]
            : []),
          { name: "server CPU ms per 1k calls", unit: "ms" },
          { name: "clients' CPU ms per 1k calls", unit: "ms" },
        ],
        rows,
      });
      for (const [i, c] of all.entries()) {
        const cpu = rows[i].cells[4];
        if (typeof cpu === "number" && cpu >= SATURATED_PERCENT) {
          report.note(
            `throughput, ${config.title}: a client process of "${c.label}" ran at ${
              Math.round(cpu)
            }% of a core, so that row is bounded by its load generator as much as by its server`,
          );
        }
      }
      if (config.connections === 1) {
        for (const c of [rafterDeno, rafterNode, rafterNodeLine]) {
          const [vsJayson, vsGrpc] = rows[all.indexOf(c)].cells.slice(1, 3);
          if (typeof vsJayson !== "number") continue;
          report.note(
            `throughput target (one connection ≥ 2× jayson and ≥ grpc-js): ${c.label} ${
              vsJayson.toFixed(2)
            }× jayson (${vsJayson >= 2 ? "met" : "not met"}), ${
              typeof vsGrpc === "number"
                ? `${vsGrpc.toFixed(2)}× grpc-js (${
                  vsGrpc >= 1 ? "met" : "not met"
                })`
                : "grpc-js skipped"
            }`,
          );
        }
      }
    }
  }
  tlsTable(tlsPairs, tlsFigures, runtimes);
  await Deno.remove(pkiDir, { recursive: true });
}

/** The TLS rows beside the plain ones: p50 and calls/s, as TLS ÷ plain. */
function tlsTable(
  pairs: [Contender, Contender][],
  figures: Map<Contender, { p50?: Cell[]; rate?: Cell[] }>,
  runtimes: string,
): void {
  const paired = (tls: Cell[] | undefined, plain: Cell[] | undefined) =>
    tls === undefined || plain === undefined ? null : med(tls.map((t, r) => {
      const p = plain[r];
      return typeof t === "number" && typeof p === "number"
        ? ratio(t, p)
        : null;
    }));
  const numbers = (cells: Cell[] | undefined) =>
    med((cells ?? []).map((c) => typeof c === "number" ? c : null));
  const rows: Row[] = pairs.map(([tls, plain]) => {
    const t = figures.get(tls) ?? {};
    const p = figures.get(plain) ?? {};
    return skippedRow(tls) ?? {
      label: tls.label,
      cells: [
        numbers(t.p50),
        numbers(p.p50),
        paired(t.p50, p.p50),
        numbers(t.rate),
        numbers(p.rate),
        paired(t.rate, p.rate),
      ],
    };
  });
  if (rows.every((row) => row.cells.every((cell) => cell === null))) return;
  report.table({
    scenario: "rtt",
    title: "RPC over TLS beside plain TCP",
    note:
      `Each TLS row against the plain Rafter row of its runtime (${runtimes}), from the rounds above: sequential p50 and calls/s with ${IN_FLIGHT} in flight on one connection; ratios TLS ÷ plain (median of the per-round ratios: above 1 is slower for p50, below 1 is fewer calls for calls/s). TLS 1.3, a P-256 certificate from a throw-away CA.`,
    columns: [
      { name: "TLS p50", unit: "µs" },
      { name: "plain p50", unit: "µs" },
      { name: "p50 TLS ÷ plain", unit: "×" },
      { name: "TLS calls/s", unit: "/s" },
      { name: "plain calls/s", unit: "/s" },
      { name: "calls/s TLS ÷ plain", unit: "×" },
    ],
    rows,
  });
}

let failure: unknown;
try {
  await main();
} catch (error) {
  failure = error;
} finally {
  Deno.removeSignalListener("SIGINT", onInterrupt);
  await cleanup();
}
await report.finish();
if (failure !== undefined) {
  console.error(`bench/rpc.ts: ${(failure as Error)?.message ?? failure}`);
  Deno.exit(1);
}
