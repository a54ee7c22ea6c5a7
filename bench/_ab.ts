/**
 * What the A/B profiling scripts share (private to `bench/`): servers
 * started as child processes, and the table of medians, A against B.
 *
 * @module
 */

import type { Flag } from "./_args.ts";
import { median } from "./report.ts";

/**
 * The flags both scripts take: `--a` and `--b` (the checkouts, default
 * this one and /work/main), `--rounds`, `--seconds` (pipelined, per
 * measurement), `--calls` (sequential, per measurement).
 */
export const AB_FLAGS: Record<string, Flag> = {
  a: { type: "string", default: new URL("..", import.meta.url).pathname },
  b: { type: "string", default: "/work/main/" },
  rounds: { type: "string", default: "3" },
  seconds: { type: "string", default: "2" },
  calls: { type: "string", default: "5000" },
};

/** A server child process that printed `listening on tcp://…`. */
export interface Server {
  /** Its `tcp://host:port` URL. */
  url: string;
  /** Closes its stdin (it exits on EOF) and waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * Starts `command args…` and resolves once it prints `listening on
 * tcp://…` (its later output is drained).
 *
 * @throws {Error} when it exits first, with what it printed.
 */
export async function spawnServer(
  command: string,
  args: string[],
): Promise<Server> {
  const child = new Deno.Command(command, {
    args,
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  for (let i = 0; i < 1000; i++) {
    const { done, value } = await lines.read();
    if (done) throw new Error(`${command} ${args.join(" ")} ended: ${seen}`);
    seen += value;
    const match = /listening on (tcp:\/\/\S+)/.exec(seen);
    if (match) {
      (async () => {
        while (!(await lines.read()).done) { /* drain */ }
      })();
      return {
        url: match[1],
        stop: async () => {
          await child.stdin.close();
          await child.status;
        },
      };
    }
  }
  throw new Error(`${command} ${args.join(" ")} printed no listening line`);
}

/** Figures by row for side A (0) and side B (1), printed as medians. */
export class AbTable {
  readonly #rows = new Map<string, number[][]>();

  /** Adds one figure of `row` for `side` (0: A, 1: B). */
  add(row: string, side: number, value: number): void {
    if (!this.#rows.has(row)) this.#rows.set(row, [[], []]);
    this.#rows.get(row)![side].push(value);
  }

  /** Adds one figure of `row` to both sides (a reference row). */
  both(row: string, value: number): void {
    this.add(row, 0, value);
    this.add(row, 1, value);
  }

  /** Prints `title` and the Markdown table: row, A, B, A / B. */
  print(title: string): void {
    console.log(`\n${title}\n`);
    console.log("| row | A | B | A / B |");
    console.log("|---|---:|---:|---:|");
    for (const [row, [a, b]] of this.#rows) {
      const ma = median(a);
      const mb = median(b);
      console.log(
        `| ${row} | ${ma.toFixed(0)} | ${mb.toFixed(0)} | ${
          (ma / mb).toFixed(2)
        } |`,
      );
    }
  }
}
