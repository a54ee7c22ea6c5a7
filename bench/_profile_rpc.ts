/**
 * A/B of the RPC layer of two checkouts, side by side in one run (private
 * to `bench/`; a profiling aid for issue 9, not part of the suite):
 * `--a` (default: this checkout) against `--b` (default: /work/main).
 * Each round runs every row for A, then for B (A B A B …); each figure is
 * the median of `--rounds` rounds. Servers are separate Deno processes
 * (`bench/codec_server.ts` of each checkout); clients run in this process,
 * each checkout's own `dial()` imported from its own files.
 *
 * Rows:
 * - sequential: `echo` round trips one after the other, p50/p99 µs, with
 *   the raw TCP line echo as the floor;
 * - full: `dial()` of X against the server of X, 64 in flight, calls/s;
 * - server only: a minimal pipelining line client (keeps 64 requests in
 *   flight, counts newlines, parses nothing) against X's server;
 * - client only: X's `dial()` against a minimal NDJSON server of this file;
 * - jayson 5's TCP server (`bench/jayson_server.ts`), once per round, under
 *   the blast client, and under a line client that parses each answer and
 *   keeps 64 calls in flight (as `bench/rpc.ts` drives jayson).
 *
 * ```sh
 * deno run -A bench/_profile_rpc.ts [--a DIR] [--b DIR] [--rounds 3] [--seconds 2] [--calls 5000]
 * deno run -A bench/_profile_rpc.ts --serve-minimal   # the minimal server alone
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { AB_FLAGS, AbTable, type Server, spawnServer } from "./_ab.ts";
import { acceptUntilStdinCloses } from "./_rpc_driver.ts";

const USAGE = `usage: deno run -A bench/_profile_rpc.ts [--a DIR] [--b DIR]
  [--rounds N] [--seconds S] [--calls N] [--only ROWS]`;

const flags = benchArgs(USAGE, {
  ...AB_FLAGS,
  only: { type: "string", default: "seq,full,server,client,jayson" },
  "serve-minimal": { type: "boolean", default: false },
  measure: { type: "string" },
  root: { type: "string" },
  url: { type: "string" },
});

const IN_FLIGHT = 64;
const PARAMS = { n: 1, s: "hello, world" };
const encoder = new TextEncoder();
const decoder = new TextDecoder();

if (flags["serve-minimal"]) {
  await serveMinimal();
  Deno.exit(0);
}

const ROUNDS = Number(flags.rounds);
const SECONDS = Number(flags.seconds);
const CALLS = Number(flags.calls);
const ONLY = new Set(String(flags.only).split(","));
const roots = [String(flags.a), String(flags.b)].map((r) =>
  r.endsWith("/") ? r : r + "/"
);

/** A minimal NDJSON JSON-RPC server: parse each line, answer, one write per chunk. */
async function serveMinimal(): Promise<void> {
  for await (const conn of acceptUntilStdinCloses()) {
    (async () => {
      const buffer = new Uint8Array(256 * 1024);
      let rest = "";
      try {
        for (;;) {
          const n = await conn.read(buffer);
          if (n === null) break;
          const text = rest + decoder.decode(buffer.subarray(0, n));
          const lines = text.split("\n");
          rest = lines.pop()!;
          let out = "";
          for (const line of lines) {
            if (line === "") continue;
            const request = JSON.parse(line);
            if (request.id === undefined) continue;
            out += `{"jsonrpc":"2.0","result":${
              JSON.stringify(request.params)
            },"id":${request.id}}\n`;
          }
          const bytes = encoder.encode(out);
          for (let sent = 0; sent < bytes.length;) {
            sent += await conn.write(bytes.subarray(sent));
          }
        }
      } catch {
        // The client went away.
      } finally {
        try {
          conn.close();
        } catch { /* already closed */ }
      }
    })();
  }
}

interface Caller {
  call(): Promise<unknown>;
  close(): void;
}

/** The line echo / line JSON-RPC client of the sequential floor. */
async function lineClient(url: string, line: string): Promise<Caller> {
  const { hostname, port } = new URL(url.replace("tcp://", "http://"));
  const conn = await Deno.connect({ hostname, port: Number(port) });
  conn.setNoDelay(true);
  const waiting: (() => void)[] = [];
  const bytes = encoder.encode(line + "\n");
  (async () => {
    const chunk = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await conn.read(chunk);
        if (n === null) return;
        for (let i = 0; i < n; i++) {
          if (chunk[i] === 0x0a) waiting.shift()?.();
        }
      }
    } catch { /* closed */ }
  })();
  return {
    call: () => {
      const answer = new Promise<void>((resolve) => waiting.push(resolve));
      conn.write(bytes);
      return answer;
    },
    close: () => conn.close(),
  };
}

/** JSON-RPC over lines: one request per call, its answer parsed (in order). */
async function jsonLineClient(url: string): Promise<Caller> {
  const { hostname, port } = new URL(url.replace("tcp://", "http://"));
  const conn = await Deno.connect({ hostname, port: Number(port) });
  conn.setNoDelay(true);
  const waiting: ((answer: unknown) => void)[] = [];
  (async () => {
    const chunk = new Uint8Array(64 * 1024);
    let rest = "";
    try {
      for (;;) {
        const n = await conn.read(chunk);
        if (n === null) return;
        rest += decoder.decode(chunk.subarray(0, n), { stream: true });
        let end: number;
        while ((end = rest.indexOf("\n")) !== -1) {
          const line = rest.slice(0, end);
          rest = rest.slice(end + 1);
          waiting.shift()?.(JSON.parse(line));
        }
      }
    } catch { /* closed */ }
  })();
  let id = 0;
  return {
    call: () => {
      const answer = new Promise((resolve) => waiting.push(resolve));
      conn.write(encoder.encode(
        JSON.stringify({
          jsonrpc: "2.0",
          id: ++id,
          method: "echo",
          params: PARAMS,
        }) + "\n",
      ));
      return answer;
    },
    close: () => conn.close(),
  };
}

/** Keeps IN_FLIGHT requests outstanding for SECONDS; calls/s. */
async function blast(url: string): Promise<number> {
  const { hostname, port } = new URL(url.replace("tcp://", "http://"));
  const conn = await Deno.connect({ hostname, port: Number(port) });
  conn.setNoDelay(true);
  let id = 0;
  const requests = (count: number) => {
    let text = "";
    for (let i = 0; i < count; i++) {
      text += `{"jsonrpc":"2.0","id":${++id},"method":"echo","params":${
        JSON.stringify(PARAMS)
      }}\n`;
    }
    return encoder.encode(text);
  };
  const write = async (bytes: Uint8Array) => {
    for (let sent = 0; sent < bytes.length;) {
      sent += await conn.write(bytes.subarray(sent));
    }
  };
  const start = performance.now();
  const until = start + SECONDS * 1000;
  let done = 0;
  let sending = true;
  let outstanding = IN_FLIGHT;
  await write(requests(IN_FLIGHT));
  const chunk = new Uint8Array(256 * 1024);
  for (let turn = 0; turn < 100_000_000 && outstanding > 0; turn++) {
    const n = await conn.read(chunk);
    if (n === null) break;
    let answered = 0;
    for (let i = 0; i < n; i++) if (chunk[i] === 0x0a) answered++;
    done += answered;
    outstanding -= answered;
    if (sending && performance.now() >= until) sending = false;
    if (sending) {
      outstanding += answered;
      await write(requests(answered));
    }
  }
  const rate = done / ((performance.now() - start) / 1000);
  conn.close();
  return rate;
}

async function sequential(caller: Caller): Promise<[number, number]> {
  const times = new Float64Array(CALLS);
  for (let i = 0; i < 300; i++) await caller.call();
  for (let i = 0; i < CALLS; i++) {
    const start = performance.now();
    await caller.call();
    times[i] = performance.now() - start;
  }
  times.sort();
  return [
    times[Math.floor(CALLS * 0.5)] * 1000,
    times[Math.floor(CALLS * 0.99)] * 1000,
  ];
}

async function pipelined(caller: Caller): Promise<number> {
  for (let i = 0; i < 300; i++) await caller.call();
  const start = performance.now();
  const until = start + SECONDS * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      for (let i = 0; i < 10_000_000 && performance.now() < until; i++) {
        await caller.call();
        done++;
      }
    }),
  );
  return done / ((performance.now() - start) / 1000);
}

type Dial = (url: string) => Promise<{
  call(method: string, params: unknown): Promise<unknown>;
  close(): void;
}>;

async function rafterCaller(dial: Dial, url: string): Promise<Caller> {
  const connection = await dial(url);
  return {
    call: () => connection.call("echo", PARAMS),
    close: () => connection.close(),
  };
}

const self = new URL(import.meta.url).pathname;

if (flags.measure !== undefined) {
  // One measurement in a fresh process, so that one checkout's code does
  // not warm up or slow down the other's: prints its figures as JSON.
  const url = String(flags.url);
  const { dial } = await import(`${flags.root}rpc/transport/dial.ts`) as {
    dial: Dial;
  };
  let out: number[];
  if (flags.measure === "seq") {
    const caller = await rafterCaller(dial, url);
    out = await sequential(caller);
    caller.close();
  } else if (flags.measure === "raw") {
    const caller = await lineClient(
      url,
      JSON.stringify({ id: 1, params: PARAMS }),
    );
    out = await sequential(caller);
    caller.close();
  } else if (flags.measure === "blast") {
    out = [await blast(url)];
  } else if (flags.measure === "linepipe") {
    out = [await pipelined(await jsonLineClient(url))];
  } else {
    const caller = await rafterCaller(dial, url);
    out = [await pipelined(caller)];
    caller.close();
  }
  console.log(JSON.stringify(out));
  Deno.exit(0);
}

async function measure(
  kind: string,
  root: string,
  url: string,
): Promise<number[]> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      self,
      "--measure",
      kind,
      "--root",
      root,
      "--url",
      url,
      "--seconds",
      String(SECONDS),
      "--calls",
      String(CALLS),
    ],
    stderr: "inherit",
  }).output();
  const text = new TextDecoder().decode(output.stdout).trim().split("\n").at(
    -1,
  )!;
  return JSON.parse(text);
}

const stops: Server[] = [];
try {
  const raw = await spawnServer(Deno.execPath(), [
    "run",
    "-A",
    `${roots[0]}bench/echo_server.ts`,
  ]);
  stops.push(raw);
  const minimal = await spawnServer(Deno.execPath(), [
    "run",
    "-A",
    self,
    "--serve-minimal",
  ]);
  stops.push(minimal);
  const jayson = await spawnServer(Deno.execPath(), [
    "run",
    "--config",
    `${roots[0]}deno.dev.json`,
    "-A",
    `${roots[0]}bench/jayson_server.ts`,
  ]);
  stops.push(jayson);
  const sides = [];
  for (const root of roots) {
    const server = await spawnServer(Deno.execPath(), [
      "run",
      "-A",
      `${root}bench/codec_server.ts`,
    ]);
    stops.push(server);
    sides.push({ root, server });
  }
  const table = new AbTable();
  const add = (row: string, side: number, value: number) =>
    table.add(row, side, value);
  for (let round = 0; round < ROUNDS; round++) {
    if (ONLY.has("seq")) {
      const [p50] = await measure("raw", roots[0], raw.url);
      add("raw TCP sequential p50 µs", 0, p50);
      add("raw TCP sequential p50 µs", 1, p50);
    }
    for (const [side, { root, server }] of sides.entries()) {
      if (ONLY.has("seq")) {
        const [p50, p99] = await measure("seq", root, server.url);
        add("sequential p50 µs", side, p50);
        add("sequential p99 µs", side, p99);
      }
      if (ONLY.has("full")) {
        const [rate] = await measure("pipe", root, server.url);
        add("full, 64 in flight, calls/s", side, rate);
      }
      if (ONLY.has("server")) {
        const [rate] = await measure("blast", root, server.url);
        add("server only (blast client), calls/s", side, rate);
      }
      if (ONLY.has("client")) {
        const [rate] = await measure("pipe", root, minimal.url);
        add("client only (minimal server), calls/s", side, rate);
      }
    }
    if (ONLY.has("jayson")) {
      const [blasted] = await measure("blast", roots[0], jayson.url);
      add("jayson server (blast client), calls/s", 0, blasted);
      add("jayson server (blast client), calls/s", 1, blasted);
      const [lined] = await measure("linepipe", roots[0], jayson.url);
      add("jayson server (JSON line client, 64 in flight), calls/s", 0, lined);
      add("jayson server (JSON line client, 64 in flight), calls/s", 1, lined);
    }
  }
  if (ONLY.has("server")) {
    const [rate] = await measure("blast", roots[0], raw.url);
    add("raw TCP echo (blast client), calls/s", 0, rate);
    add("raw TCP echo (blast client), calls/s", 1, rate);
  }
  table.print(
    `A = ${roots[0]}, B = ${
      roots[1]
    }; medians of ${ROUNDS} rounds, A and B alternating; Deno ${Deno.version.deno}`,
  );
} finally {
  for (const server of stops) await server.stop().catch(() => {});
}
