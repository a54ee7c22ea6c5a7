/**
 * RPC side by side in one run (issue 9, scenarios 1 and 2, Deno only so
 * far): an `echo` of a small params object against three servers, each a
 * separate Deno process on 127.0.0.1:
 *
 * 1. raw TCP: a line echoed by a plain TCP server (the floor);
 * 2. Rafter: `serve()` with `echo`, called through `dial()` (`RpcConnection`);
 * 3. Rafter's server again, called with the same minimal line client as
 *    jayson's (so the row measures the server, not Rafter's client);
 * 4. jayson 5 (npm): its TCP server, called over one kept-open connection
 *    with newline-delimited JSON-RPC (jayson's stock client opens a
 *    connection per call; not measured yet).
 *
 * Sequential: `--calls` round trips one after the other, p50 and p99 in µs.
 * Pipelined: 64 calls in flight on one connection for `--seconds`, calls/s.
 * Each figure is the median of 3 rounds run A B C A B C A B C; ratios are
 * to raw TCP (sequential) and to jayson (pipelined). The client is this
 * process for every path, so at 64 in flight its CPU is part of every
 * figure alike. A script, not a test: it asserts nothing about speed.
 *
 * ```sh
 * deno task bench:rpc            # 5,000 sequential calls, 2 s pipelined, per round
 * deno task bench:rpc --quick    # 500 calls, 0.3 s
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { LocalCluster } from "../examples/demo/local_cluster.ts";
import { dial } from "../rpc/dial.ts";
import type { RpcConnection } from "../rpc/connection.ts";

const USAGE = `usage: deno task bench:rpc [--quick]

  --quick   500 sequential calls and 0.3 s pipelined per round
  --help    show this text`;

const flags = benchArgs(USAGE, { quick: { type: "boolean", default: false } });
const CALLS = flags.quick ? 500 : 5_000;
const SECONDS = flags.quick ? 0.3 : 2;
const ROUNDS = 3;
const IN_FLIGHT = 64;
const PARAMS = { n: 1, s: "hello, world" };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One connection that sends lines and gets one line back per line, in order. */
class LineClient {
  readonly #conn: Deno.TcpConn;
  #buffer = "";
  readonly #waiting: ((line: string) => void)[] = [];

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
    this.#read();
  }

  static async open(url: string): Promise<LineClient> {
    const { hostname, port } = new URL(url.replace("tcp://", "http://"));
    const conn = await Deno.connect({ hostname, port: Number(port) });
    conn.setNoDelay(true);
    return new LineClient(conn);
  }

  async #read(): Promise<void> {
    const chunk = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await this.#conn.read(chunk);
        if (n === null) return;
        this.#buffer += decoder.decode(chunk.subarray(0, n), { stream: true });
        let end: number;
        while ((end = this.#buffer.indexOf("\n")) !== -1) {
          const line = this.#buffer.slice(0, end);
          this.#buffer = this.#buffer.slice(end + 1);
          this.#waiting.shift()?.(line);
        }
      }
    } catch {
      // Closed.
    }
  }

  /** Sends `line` (without its newline); resolves with the answer line. */
  call(line: string): Promise<string> {
    const answer = new Promise<string>((resolve) =>
      this.#waiting.push(resolve)
    );
    this.#conn.write(encoder.encode(line + "\n"));
    return answer;
  }

  close(): void {
    this.#conn.close();
  }
}

interface Path {
  name: string;
  call(i: number): Promise<void>;
  close(): void;
}

function rawPath(client: LineClient): Path {
  return {
    name: "raw TCP line echo",
    call: async (i) => {
      const line = JSON.stringify({ id: i, params: PARAMS });
      if (await client.call(line) !== line) throw new Error("bad echo");
    },
    close: () => client.close(),
  };
}

function jsonRpcLinePath(name: string, client: LineClient): Path {
  return {
    name,
    call: async (i) => {
      const answer = JSON.parse(
        await client.call(
          JSON.stringify({
            jsonrpc: "2.0",
            id: i,
            method: "echo",
            params: PARAMS,
          }),
        ),
      );
      if (answer.id !== i || answer.result?.s !== PARAMS.s) {
        throw new Error(`bad answer ${JSON.stringify(answer)}`);
      }
    },
    close: () => client.close(),
  };
}

function rafterPath(connection: RpcConnection): Path {
  return {
    name: "Rafter serve() + dial()",
    call: async () => {
      const result = await connection.call<typeof PARAMS>("echo", PARAMS);
      if (result.s !== PARAMS.s) throw new Error("bad answer");
    },
    close: () => connection.close(),
  };
}

async function sequential(path: Path): Promise<{ p50: number; p99: number }> {
  const times = new Float64Array(CALLS);
  for (let i = 0; i < 200; i++) await path.call(i); // warm-up
  for (let i = 0; i < CALLS; i++) {
    const start = performance.now();
    await path.call(i);
    times[i] = performance.now() - start;
  }
  times.sort();
  return {
    p50: times[Math.floor(CALLS * 0.5)] * 1000,
    p99: times[Math.floor(CALLS * 0.99)] * 1000,
  };
}

async function pipelined(path: Path): Promise<number> {
  const until = performance.now() + SECONDS * 1000;
  let done = 0;
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      for (let i = 0; i < 10_000_000 && performance.now() < until; i++) {
        await path.call(next++);
        done++;
      }
    }),
  );
  return done / ((performance.now() - start) / 1000);
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const cluster = new LocalCluster();
const paths: Path[] = [];
try {
  const urlOf = async (name: string, script: string) => {
    const child = await cluster.spawn(name, script, [], /listening on/);
    return child.output.find((l) => /listening on/.test(l))!.match(
      /tcp:\/\/[^\s]+/,
    )![0];
  };
  const rawUrl = await urlOf("raw", "bench/echo_server.ts");
  const rafterUrl = await urlOf("rafter", "bench/codec_server.ts");
  const jaysonUrl = await urlOf("jayson", "bench/jayson_server.ts");
  paths.push(rawPath(await LineClient.open(rawUrl)));
  paths.push(rafterPath(await dial(rafterUrl)));
  paths.push(
    jsonRpcLinePath(
      "Rafter's server, the same line client as jayson's",
      await LineClient.open(rafterUrl),
    ),
  );
  paths.push(
    jsonRpcLinePath(
      "jayson 5 TCP server, kept-open connection",
      await LineClient.open(jaysonUrl),
    ),
  );

  const seq = paths.map(() => ({ p50: [] as number[], p99: [] as number[] }));
  const pipe = paths.map(() => [] as number[]);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, path] of paths.entries()) {
      const r = await sequential(path);
      seq[i].p50.push(r.p50);
      seq[i].p99.push(r.p99);
    }
    for (const [i, path] of paths.entries()) {
      pipe[i].push(await pipelined(path));
    }
  }
  const rawP50 = median(seq[0].p50);
  const jaysonRate = median(pipe[3]);
  console.log(
    `\nRPC echo of ${
      JSON.stringify(PARAMS)
    }, Deno ${Deno.version.deno} client and servers (separate processes) on 127.0.0.1; medians of ${ROUNDS} rounds run in turn.\n`,
  );
  console.log(
    `| path | sequential p50 µs | p99 µs | p50 vs raw TCP | ${IN_FLIGHT} in flight, calls/s | vs jayson |`,
  );
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const [i, path] of paths.entries()) {
    const p50 = median(seq[i].p50);
    const rate = median(pipe[i]);
    console.log(
      `| ${path.name} | ${p50.toFixed(0)} | ${
        median(seq[i].p99).toFixed(0)
      } | ${(p50 / rawP50).toFixed(2)}× | ${rate.toFixed(0)} | ${
        (rate / jaysonRate).toFixed(2)
      }× |`,
    );
  }
} finally {
  for (const path of paths) path.close();
  await cluster.stop();
}
