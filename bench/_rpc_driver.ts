/**
 * The peer processes of `bench/rpc.ts` (private to `bench/`): what each
 * server and client script shares, written on `node:` built-ins so the
 * same code runs under Deno and, bundled with `deno bundle --platform
 * node`, under Node.
 *
 * A server prints `listening on tcp://HOST:PORT` and runs until its stdin
 * closes. A client connects, warms up, prints `ready`, then answers one
 * command per stdin line with one JSON line on stdout:
 *
 * - `seq N`: N calls one after the other (after a few untimed ones) →
 *   `{"p50": µs, "p99": µs, "calls": N}`;
 * - `flood K MS`: K calls kept in flight for MS ms →
 *   `{"calls": n, "seconds": s}`;
 * - a failed call → `{"error": "message"}`.
 *
 * It exits when stdin closes.
 *
 * @module
 */

import process from "node:process";
import { createInterface } from "node:readline";

/** True under Deno, false under Node. */
export const isDeno: boolean =
  typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";

/** One echo call of the params object every path sends; `i` numbers it. */
export type Call = (i: number) => Promise<void>;

/** The params object every path echoes (30 bytes of JSON). */
export const PARAMS = { n: 1, s: "hello, world" } as const;

/** Throws unless `value` is an echo of {@linkcode PARAMS}. */
export function checkEcho(value: unknown): void {
  const echo = value as { n?: unknown; s?: unknown } | null;
  if (echo?.n !== PARAMS.n || echo?.s !== PARAMS.s) {
    throw new Error(`bad echo: ${JSON.stringify(value)}`);
  }
}

/**
 * One call through a Node-style callback API: `start` makes it and calls
 * `done`; resolves once the answer is checked by {@linkcode checkEcho}.
 */
export function echoThroughCallback(
  start: (done: (error: unknown, answer?: unknown) => void) => void,
): Promise<void> {
  return new Promise((resolve, reject) =>
    start((error, answer) => {
      if (error) return reject(error);
      try {
        checkEcho(answer);
        resolve();
      } catch (bad) {
        reject(bad);
      }
    })
  );
}

/** The command-line arguments after the script (both runtimes). */
export function scriptArgs(): string[] {
  return isDeno
    ? (globalThis as unknown as { Deno: { args: string[] } }).Deno.args
    : process.argv.slice(2);
}

/** `tcp://host:port` → its parts. */
export function hostPort(url: string): { host: string; port: number } {
  const match = /^tcp:\/\/([^:/]+):(\d+)$/.exec(url);
  if (match === null) throw new Error(`not a tcp://host:port URL: ${url}`);
  return { host: match[1], port: Number(match[2]) };
}

/** Calls `onEnd` once stdin is closed (the bench went away). */
function onStdinEnd(onEnd: () => void): void {
  process.stdin.on("end", onEnd);
  process.stdin.on("close", onEnd);
  process.stdin.resume();
}

/** A server script's life: prints where it listens, closes at stdin's end. */
export function serveUntilStdinCloses(
  url: string,
  close: () => unknown,
): void {
  console.log(`listening on ${url}`);
  onStdinEnd(async () => {
    try {
      await close();
    } finally {
      process.exit(0);
    }
  });
}

/**
 * The connections of a Deno server script's TCP listener on 127.0.0.1 (a
 * free port), Nagle off, with {@link serveUntilStdinCloses}'s life: it
 * prints where it listens and exits when stdin ends.
 */
export async function* acceptUntilStdinCloses(): AsyncGenerator<Deno.TcpConn> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  serveUntilStdinCloses(
    `tcp://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    () => listener.close(),
  );
  for await (const conn of listener) {
    conn.setNoDelay(true);
    yield conn;
  }
}

const WARM_UP_CALLS = 200;
const MAX_CALLS = 10_000_000;

async function sequential(call: Call, calls: number) {
  for (let i = 0; i < Math.min(50, calls); i++) await call(i);
  const times = new Float64Array(calls);
  for (let i = 0; i < calls; i++) {
    const start = performance.now();
    await call(i);
    times[i] = performance.now() - start;
  }
  times.sort();
  const at = (p: number) =>
    times[Math.min(calls - 1, Math.ceil(p * calls) - 1)] * 1000;
  return { p50: at(0.5), p99: at(0.99), calls };
}

async function flood(call: Call, inFlight: number, ms: number) {
  const start = performance.now();
  const until = start + ms;
  let done = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < MAX_CALLS && performance.now() < until) {
        await call(next++);
        done++;
      }
    }),
  );
  return { calls: done, seconds: (performance.now() - start) / 1000 };
}

/**
 * A client script's life: `open()` connects and gives the call; after
 * {@link WARM_UP_CALLS} untimed calls it prints `ready` and runs the
 * commands of stdin (see the module doc) one after the other.
 */
export async function driveCalls(
  open: () => Promise<{ call: Call; close(): void }>,
): Promise<void> {
  const { call, close } = await open();
  for (let i = 0; i < WARM_UP_CALLS; i++) await call(i);
  console.log("ready");
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [command, a, b] = line.trim().split(/\s+/);
    let answer: unknown;
    try {
      if (command === "seq") answer = await sequential(call, Number(a));
      else if (command === "flood") {
        answer = await flood(call, Number(a), Number(b));
      } else throw new Error(`unknown command "${line}"`);
    } catch (error) {
      answer = { error: String((error as Error)?.message ?? error) };
    }
    console.log(JSON.stringify(answer));
  }
  close();
  process.exit(0);
}
