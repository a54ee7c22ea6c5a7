/**
 * What every benchmark script of the suite shares (private to `bench/`):
 * statistics, CPU time of processes, and the report each scenario prints
 * as Markdown tables and hands to `bench/main.ts` as JSON.
 *
 * The contract with `bench/main.ts` (`deno task bench`): a script runs the
 * scenarios named in `--scenarios a,b` (every one it knows when absent),
 * prints each table as Markdown on stdout, and, when the environment
 * variable `RAFTER_BENCH_JSON` names a file, writes there a
 * {@linkcode ReportJson} at the end. A peer that cannot be run is a row
 * with `skipped` set (the reason), never made-up numbers.
 *
 * @module
 */

import process from "node:process";

/** How a column's numbers are printed. */
export type Unit =
  | "µs"
  | "ms"
  | "s"
  | "/s"
  | "×"
  | "%"
  | "MiB"
  | "KiB"
  | "bytes"
  | "count"
  | "text";

/** A column of a table: its heading and unit. */
export interface Column {
  name: string;
  unit: Unit;
}

/** One cell: a number in the column's unit, a text, or null (not applicable). */
export type Cell = number | string | null;

/** A row: its label (the path or peer measured) and one cell per column. */
export interface Row {
  label: string;
  cells: Cell[];
  /** Why this row has no numbers (a peer that could not be installed). */
  skipped?: string;
}

/** A table of one scenario. */
export interface Table {
  /** The scenario it belongs to, e.g. `"rtt"`. */
  scenario: string;
  title: string;
  /** What was measured and how, printed under the title. */
  note?: string;
  columns: Column[];
  rows: Row[];
}

/** What a script hands to `bench/main.ts`. */
export interface ReportJson {
  script: string;
  tables: Table[];
  /** Lines worth reading after the tables (saturation warnings, findings). */
  notes: string[];
}

/** Formats one cell for Markdown. */
export function formatCell(cell: Cell, unit: Unit): string {
  if (cell === null) return "–";
  if (typeof cell === "string") return cell;
  if (!Number.isFinite(cell)) return "–";
  switch (unit) {
    case "×":
      return `${cell.toFixed(2)}×`;
    case "%":
      return `${Math.round(cell)}%`;
    case "µs":
    case "count":
    case "/s":
    case "bytes":
      return Math.round(cell).toLocaleString("en-US");
    case "ms":
    case "s":
    case "MiB":
    case "KiB":
      return cell.toFixed(Math.abs(cell) < 10 ? 2 : 1);
    case "text":
      return String(cell);
  }
}

/** A table as Markdown: `### title`, its note, the header and the rows. */
export function renderTable(table: Table): string {
  const head = table.columns.map((c) =>
    c.unit === "text" || c.unit === "count" || c.unit === "×" ||
      c.unit === "%" || c.name.includes(c.unit)
      ? c.name
      : `${c.name} ${c.unit}`
  );
  const align = table.columns.map((c) => c.unit === "text" ? ":---" : "---:");
  const lines = [
    `### ${table.title}`,
    "",
    ...(table.note ? [table.note, ""] : []),
    `| | ${head.join(" | ")} |`,
    `|:---| ${align.join(" | ")} |`,
  ];
  for (const row of table.rows) {
    const cells = row.skipped !== undefined
      ? [`skipped: ${row.skipped}`, ...table.columns.slice(1).map(() => "")]
      : row.cells.map((cell, i) => formatCell(cell, table.columns[i].unit));
    lines.push(`| ${row.label} | ${cells.join(" | ")} |`);
  }
  return lines.join("\n");
}

/**
 * The tables and notes of one script: {@linkcode Report.table} prints a
 * table at once; {@linkcode Report.finish} writes the JSON for
 * `bench/main.ts` when `RAFTER_BENCH_JSON` is set.
 */
export class Report {
  readonly #json: ReportJson;

  constructor(script: string) {
    this.#json = { script, tables: [], notes: [] };
  }

  /** Prints `table` as Markdown and keeps it. */
  table(table: Table): void {
    this.#json.tables.push(table);
    console.log(`\n${renderTable(table)}\n`);
  }

  /** Prints `line` and keeps it for the end of the report. */
  note(line: string): void {
    this.#json.notes.push(line);
    console.log(line);
  }

  /** Writes the JSON to `RAFTER_BENCH_JSON`, if that names a file. */
  async finish(): Promise<void> {
    const path = Deno.env.get("RAFTER_BENCH_JSON");
    if (path) await Deno.writeTextFile(path, JSON.stringify(this.#json));
  }
}

/**
 * The scenarios `--scenarios a,b` selects out of `known` (all when the
 * flag is absent); an unknown name is an error naming the known ones.
 */
export function selectedScenarios<T extends string>(
  flag: string | undefined,
  known: readonly T[],
): Set<T> {
  if (flag === undefined || flag === "") return new Set(known);
  const wanted = flag.split(",").map((s) => s.trim()).filter(Boolean);
  for (const name of wanted) {
    if (!known.includes(name as T)) {
      throw new Error(
        `unknown scenario "${name}": this script runs ${known.join(", ")}`,
      );
    }
  }
  return new Set(wanted as T[]);
}

// --- statistics ------------------------------------------------------------

/** The `p` quantile (0..1) of ascending `sorted`, nearest rank; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil(p * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))];
}

/** The median of `values`, NaNs left out; NaN when none is left. */
export function median(values: readonly number[]): number {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? sorted[middle]
    : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** `a / b`, or null when either is missing or `b` is 0. */
export function ratio(a: number | null, b: number | null): number | null {
  if (a === null || b === null || !Number.isFinite(a) || !Number.isFinite(b)) {
    return null;
  }
  return b === 0 ? null : a / b;
}

/**
 * Runs `measure` on every contender, round after round (A B C A B C …), so
 * a slow phase of a noisy machine falls on all alike; returns each
 * contender's results, one per round.
 */
export async function alternate<C, R>(
  rounds: number,
  contenders: readonly C[],
  measure: (contender: C, round: number) => Promise<R>,
): Promise<R[][]> {
  const results = contenders.map(() => [] as R[]);
  for (let round = 0; round < rounds; round++) {
    for (const [i, contender] of contenders.entries()) {
      results[i].push(await measure(contender, round));
    }
  }
  return results;
}

// --- CPU time ----------------------------------------------------------------

let clockTicksPerSecond: number | undefined;

/** Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`, else 100). */
export function clockTicks(): number {
  if (clockTicksPerSecond !== undefined) return clockTicksPerSecond;
  try {
    const out = new Deno.Command("getconf", { args: ["CLK_TCK"] }).outputSync();
    const value = Number(new TextDecoder().decode(out.stdout).trim());
    clockTicksPerSecond = value > 0 ? value : 100;
  } catch {
    clockTicksPerSecond = 100;
  }
  return clockTicksPerSecond;
}

/** CPU time of this process, ms (every thread, user + system). */
export function selfCpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

/**
 * CPU time of process `pid`, ms (user + system, every thread), from
 * `/proc/PID/stat`; null where unreadable (not Linux, or it exited).
 */
export function processCpuMs(pid: number): number | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // Fields after the command name, which may hold spaces: state is field 3.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[14 - 3]) + Number(fields[15 - 3]);
    return Number.isFinite(ticks) ? (ticks * 1000) / clockTicks() : null;
  } catch {
    return null;
  }
}

/** Resident memory of process `pid`, MiB (VmRSS of `/proc/PID/status`); null where unreadable. */
export function processRssMiB(pid: number): number | null {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const kib = Number(status.match(/^VmRSS:\s+(\d+)\s+kB/m)?.[1]);
    return Number.isFinite(kib) ? kib / 1024 : null;
  } catch {
    return null;
  }
}

/**
 * CPU time of a set of processes over a stretch of wall time: start it,
 * run the load, then {@linkcode CpuMeter.shares} gives each process's CPU
 * as a share of one core over that stretch (100 = one core busy).
 */
export class CpuMeter {
  readonly #pids: ReadonlyMap<string, number>;
  readonly #start: Map<string, number | null>;
  readonly #at: number;
  readonly #self: number;

  /** `pids`: name → PID of the processes to watch; this process is `"bench"`. */
  constructor(pids: ReadonlyMap<string, number>) {
    this.#pids = pids;
    this.#start = new Map(
      [...pids].map(([name, pid]) => [name, processCpuMs(pid)]),
    );
    this.#at = performance.now();
    this.#self = selfCpuMs();
  }

  /** Each process's CPU share since the start, % of one core; null where unreadable. */
  shares(): Map<string, number | null> {
    const wallMs = performance.now() - this.#at;
    const out = new Map<string, number | null>();
    out.set("bench", (100 * (selfCpuMs() - this.#self)) / wallMs);
    for (const [name, pid] of this.#pids) {
      const before = this.#start.get(name);
      const after = processCpuMs(pid);
      out.set(
        name,
        before === null || before === undefined || after === null
          ? null
          : (100 * (after - before)) / wallMs,
      );
    }
    return out;
  }
}
