/**
 * A whole chaos run, from the host side (as root): makes a chaos network
 * (`netns.ts`), runs `_run.ts` inside its client namespace (a registry
 * cluster in the node namespaces, the nemesis, the recorded workload),
 * removes the network, then checks the history (`checker/`) and measures
 * the run (`report.ts`). Everything the run leaves is in its `out` folder:
 * `history.json`, `faults.json`, `run.log` (the nodes' and nemesis's
 * lines) and `report.md`.
 *
 * @module
 */

import { type ChaosNetwork, createChaosNetwork } from "./netns.ts";
import { FAULT_KINDS, type FaultKind, type FaultRecord } from "./nemesis.ts";
import type { RunRequest, RunSummary } from "./_run.ts";
import type { History } from "./history.ts";
import { formatFigures, type RunFigures, runFigures } from "./report.ts";
import { checkHistory, type CheckReport, formatReport } from "./checker/mod.ts";

const RUNNER = new URL("./_run.ts", import.meta.url).pathname;

/** What a chaos run does. */
export interface ChaosOptions {
  /** Registry nodes. @default 3 */
  size?: number;
  /** How long faults are injected, s. @default 60 */
  seconds?: number;
  /** PRNG seed of the workload and the nemesis. @default drawn from the clock */
  seed?: number;
  /** Fault kinds. @default every kind */
  kinds?: readonly FaultKind[];
  /** Quiet time between faults, ms. @default [1000, 4000] */
  intervalMs?: [number, number];
  /** How long a fault holds, ms. @default [1000, 4000] */
  holdMs?: [number, number];
  /** Concurrent clients. @default 6 */
  clients?: number;
  /** Names. @default 5 */
  keys?: number;
  /** Folder for the run's files. @default a fresh temporary folder */
  out?: string;
  /** Echo the run's log lines to stderr as they come. @default false */
  verbose?: boolean;
}

/** What a chaos run found. */
export interface ChaosResult {
  request: RunRequest;
  summary: RunSummary;
  history: History;
  faults: FaultRecord[];
  figures: RunFigures;
  check: CheckReport;
  /** The run's folder. */
  out: string;
  /** Wall time of the whole run, ms. */
  wallMs: number;
}

/**
 * Runs one chaos run and checks it.
 *
 * @throws {Error} when the run itself broke (the network could not be
 * made, the runner failed or hung): the message quotes the end of its log.
 */
export async function runChaos(
  options: ChaosOptions = {},
): Promise<ChaosResult> {
  const started = performance.now();
  const size = options.size ?? 3;
  const out = options.out ??
    await Deno.makeTempDir({ prefix: "rafter-chaos-" });
  await Deno.mkdir(out, { recursive: true });
  const request: RunRequest = {
    size,
    seconds: options.seconds ?? 60,
    seed: options.seed ?? Date.now() % 2 ** 31,
    kinds: [...(options.kinds ?? FAULT_KINDS)],
    intervalMs: options.intervalMs ?? [1_000, 4_000],
    holdMs: options.holdMs ?? [1_000, 4_000],
    clients: options.clients ?? 6,
    keys: options.keys ?? 5,
    out,
  };
  const nodes = Array.from({ length: size }, (_, i) => `n${i + 1}`);
  const network = await createChaosNetwork({ nodes });
  let summary: RunSummary;
  try {
    summary = await runInside(network, request, options.verbose ?? false);
  } finally {
    await network.destroy();
  }
  const history = JSON.parse(
    await Deno.readTextFile(`${out}/history.json`),
  ) as History;
  const faults = JSON.parse(
    await Deno.readTextFile(`${out}/faults.json`),
  ) as FaultRecord[];
  const check = checkHistory(history);
  const figures = runFigures(history, faults);
  const result: ChaosResult = {
    request,
    summary,
    history,
    faults,
    figures,
    check,
    out,
    wallMs: performance.now() - started,
  };
  await Deno.writeTextFile(`${out}/report.md`, formatRun(result));
  return result;
}

/** The run as Markdown: what ran, the figures, the checker's verdict. */
export function formatRun(result: ChaosResult): string {
  const { request } = result;
  return [
    `## ${request.size} nodes, ${request.seconds} s of faults, seed ${request.seed}`,
    "",
    `Kinds: ${request.kinds.join(", ")}; ${result.faults.length} fault${
      result.faults.length === 1 ? "" : "s"
    }; ${request.clients} clients on ${request.keys} names; wall time ${
      (result.wallMs / 1000).toFixed(0)
    } s.`,
    result.summary.nemesisError === undefined
      ? ""
      : `\nThe nemesis could not heal: ${result.summary.nemesisError}\n`,
    formatFigures(result.figures),
    "",
    "### Checker",
    "",
    "```",
    formatReport(result.check),
    "```",
    "",
  ].join("\n");
}

/** Runs `_run.ts` in the client namespace, logging to `<out>/run.log`. */
async function runInside(
  network: ChaosNetwork,
  request: RunRequest,
  verbose: boolean,
): Promise<RunSummary> {
  const child = network.clientCommand(RUNNER, [JSON.stringify(request)], {
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const logFile = await Deno.open(`${request.out}/run.log`, {
    write: true,
    create: true,
    truncate: true,
  });
  const encoder = new TextEncoder();
  const tail: string[] = [];
  const logging = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({
      async write(chunk) {
        await logFile.write(encoder.encode(chunk));
        if (verbose) await Deno.stderr.write(encoder.encode(chunk));
        tail.push(...chunk.split("\n"));
        tail.splice(0, Math.max(0, tail.length - 40));
      },
    }),
  );
  const stdout = new Response(child.stdout).text();
  // Ceiling: the faults, the settling (the nemesis waits up to 60 s for a
  // healthy cluster, the workload 30 s) and start-up, with room to spare.
  const ceilingMs = request.seconds * 1_000 + 240_000;
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  }, ceilingMs);
  const [status, text] = await Promise.all([child.status, stdout, logging])
    .then(
      ([s, t]) => [s, t] as const,
    );
  clearTimeout(timer);
  logFile.close();
  const last = text.trim().split("\n").at(-1) ?? "";
  if (!status.success || !last.startsWith("{")) {
    throw new Error(
      `the chaos runner failed (exit ${status.code}${
        status.signal ? `, ${status.signal}` : ""
      }); the end of ${request.out}/run.log:\n${tail.join("\n")}`,
    );
  }
  return JSON.parse(last) as RunSummary;
}
