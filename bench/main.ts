/**
 * The benchmark suite's one entry point (`deno task bench`): runs the
 * scenarios of issue 9, each in its own script and process, prints their
 * Markdown tables as they come, and checks that every scenario produced a
 * number. Rafter is measured side by side with its peers in one run (A B A
 * B …), and every table gives the ratio, since the machine is shared and
 * noisy.
 *
 * | scenario | script | what |
 * |---|---|---|
 * | `rtt` | `rpc.ts` | sequential `echo` round trip, p50/p99: Rafter (Deno, Node), jayson, grpc-js, raw TCP |
 * | `throughput` | `rpc.ts` | 64 calls in flight on one connection, 256 over 4: calls/s |
 * | `idle` | `rpc_idle.ts` | server memory per idle connection (RSS, heap), beside a bare `Deno.listen` |
 * | `codec` | `codec.ts` | JSON vs CBOR, 1 KiB and 64 KiB params: calls/s, bytes on the wire |
 * | `stub` | `stub.ts` | a cluster stub with each distributor vs a plain connection |
 * | `writes` | `registry_etcd.ts` | bind vs etcd put, 1 and 64 clients, fsync on |
 * | `reads` | `registry_etcd.ts` | linearizable and serializable lookup vs etcd range, 64 clients |
 * | `leases` | `registry_etcd.ts` | grant, keep-alive, grant + bind + keep-alive vs etcd |
 * | `failover` | `registry_etcd.ts` | SIGKILL the leader: time to the next acknowledged write |
 * | `scale` | `scale.ts` | memory and lookup p99 from 1 to 10k endpoints, 100k names, 1,000 watchers |
 *
 * ```sh
 * deno task bench                       # every scenario, full length
 * deno task bench rtt throughput        # some of them
 * deno task bench --quick               # every scenario, short (the CI smoke test)
 * deno task bench --out bench/RESULTS.md  # also write the machine and the tables to a file
 * ```
 *
 * Exits 1 when a script failed or a scenario produced no number.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { renderTable, type ReportJson, type Table } from "./report.ts";

/** A script of the suite and the scenarios it runs. */
interface Script {
  path: string;
  scenarios: readonly string[];
}

const SCRIPTS: readonly Script[] = [
  { path: "rpc.ts", scenarios: ["rtt", "throughput"] },
  { path: "rpc_idle.ts", scenarios: ["idle"] },
  { path: "codec.ts", scenarios: ["codec"] },
  { path: "stub.ts", scenarios: ["stub"] },
  {
    path: "registry_etcd.ts",
    scenarios: ["writes", "reads", "leases", "failover"],
  },
  { path: "scale.ts", scenarios: ["scale"] },
];
const ALL = SCRIPTS.flatMap((s) => s.scenarios);

const USAGE = `usage: deno task bench [scenario…] [--quick] [--out FILE]

  scenario    any of ${ALL.join(", ")} (default: all)
  --quick     short runs: the smoke test (every scenario gives a number)
  --out FILE  also write the machine's description and every table to FILE
  --help      show this text`;

function usageError(message: string): never {
  console.error(`bench: ${message}\n\n${USAGE}`);
  Deno.exit(2);
}

let parsed;
try {
  parsed = parseArgs({
    args: Deno.args,
    options: {
      quick: { type: "boolean", default: false },
      out: { type: "string" },
      help: { type: "boolean", default: false },
    },
    allowPositionals: true,
    strict: true,
  });
} catch (error) {
  // node:util's message for an unknown flag suggests "--" (no help here).
  const message = (error as Error).message;
  const unknown = message.match(/^Unknown option '([^']+)'/);
  usageError(unknown ? `unknown option ${unknown[1]}` : message);
}
if (parsed.values.help) {
  console.log(USAGE);
  Deno.exit(0);
}
for (const name of parsed.positionals) {
  if (!ALL.includes(name)) usageError(`unknown scenario "${name}"`);
}
const wanted = new Set(
  parsed.positionals.length > 0 ? parsed.positionals : ALL,
);
const quick = parsed.values.quick;
// A bad --out fails now, not after minutes of measuring.
if (parsed.values.out !== undefined) {
  try {
    await Deno.writeTextFile(parsed.values.out, "");
  } catch (error) {
    usageError(
      `cannot write --out ${parsed.values.out}: ${(error as Error).message}`,
    );
  }
}

/** The machine and runtimes, as Markdown lines. */
async function describeMachine(): Promise<string[]> {
  const read = (path: string) => {
    try {
      return Deno.readTextFileSync(path);
    } catch {
      return "";
    }
  };
  const version = async (command: string, args: string[]) => {
    try {
      const out = await new Deno.Command(command, {
        args,
        stdout: "piped",
        stderr: "null",
      }).output();
      return out.success
        ? new TextDecoder().decode(out.stdout).split("\n")[0].trim()
        : "not installed";
    } catch {
      return "not installed";
    }
  };
  const model = read("/proc/cpuinfo").match(/^model name\s*:\s*(.+)$/m)?.[1] ??
    "unknown";
  const memKiB = Number(
    read("/proc/meminfo").match(/^MemTotal:\s+(\d+)/m)?.[1],
  );
  return [
    `- Date: ${new Date().toISOString()}`,
    `- CPU: ${navigator.hardwareConcurrency} cores, ${model}`,
    `- Memory: ${
      Number.isFinite(memKiB) ? (memKiB / 1024 / 1024).toFixed(1) : "?"
    } GiB`,
    `- Kernel: ${Deno.osRelease()}`,
    `- Deno ${Deno.version.deno} (V8 ${Deno.version.v8}, TypeScript ${Deno.version.typescript})`,
    `- Node ${await version("node", ["--version"])}`,
    `- etcd: ${await version("etcd", ["--version"])}`,
    `- Mode: ${
      quick ? "--quick (smoke test: short runs, noisy figures)" : "full"
    }`,
  ];
}

const here = new URL(".", import.meta.url).pathname;
const tables: Table[] = [];
const notes: string[] = [];
const failures: string[] = [];
const started = performance.now();

for (const script of SCRIPTS) {
  const scenarios = script.scenarios.filter((s) => wanted.has(s));
  if (scenarios.length === 0) continue;
  console.log(`\n## ${scenarios.join(", ")} (bench/${script.path})\n`);
  const jsonPath = await Deno.makeTempFile({ prefix: "rafter-bench-" });
  try {
    const args = [
      "run",
      // The benchmarks' npm packages (etcd3, jayson, grpc-js) are in the
      // development config, not in deno.json.
      "--config",
      `${here}../deno.dev.json`,
      "-A",
      `${here}${script.path}`,
      "--scenarios",
      scenarios.join(","),
    ];
    if (quick) args.push("--quick");
    const status = await new Deno.Command(Deno.execPath(), {
      args,
      env: { RAFTER_BENCH_JSON: jsonPath },
      stdin: "null",
      stdout: "inherit",
      stderr: "inherit",
    }).spawn().status;
    if (!status.success) {
      failures.push(`bench/${script.path} exited with code ${status.code}`);
    }
    const text = await Deno.readTextFile(jsonPath);
    if (text.length > 0) {
      const report = JSON.parse(text) as ReportJson;
      tables.push(...report.tables);
      notes.push(...report.notes);
    }
  } finally {
    await Deno.remove(jsonPath).catch(() => {});
  }
  for (const scenario of scenarios) {
    const numbers = tables.filter((t) => t.scenario === scenario).flatMap((t) =>
      t.rows.filter((r) => r.skipped === undefined).flatMap((r) =>
        r.cells.filter((c) => typeof c === "number" && Number.isFinite(c))
      )
    );
    if (numbers.length === 0) {
      failures.push(`scenario ${scenario} produced no number`);
    }
  }
}

const seconds = (performance.now() - started) / 1000;
console.log(`\nsuite finished in ${seconds.toFixed(0)} s`);
if (parsed.values.out) {
  const body = [
    "## Machine",
    "",
    ...await describeMachine(),
    "",
    ...ALL.filter((s) => wanted.has(s)).flatMap((scenario) => [
      `## ${scenario}`,
      "",
      ...tables.filter((t) => t.scenario === scenario).flatMap((t) => [
        renderTable(t),
        "",
      ]),
    ]),
    ...(notes.length > 0
      ? ["## Notes", "", ...notes.map((n) => `- ${n}`), ""]
      : []),
  ];
  await Deno.writeTextFile(parsed.values.out, body.join("\n"));
  console.log(`wrote ${parsed.values.out}`);
}
if (failures.length > 0) {
  for (const failure of failures) console.error(`bench: ${failure}`);
  Deno.exit(1);
}
