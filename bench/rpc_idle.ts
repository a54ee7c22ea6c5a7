/**
 * Memory per idle connection on the server (issue 19, scenario `idle`):
 * a server in its own process, N connections from this one, each after
 * one `rpc.ping` answered, then left idle; the server's resident set size
 * (VmRSS) and V8 heap, after a full GC, before and with them open.
 *
 * | row | server |
 * |---|---|
 * | bare `Deno.listen` | accepts, answers the ping line, keeps a 1 KiB read pending (the floor: Deno's own socket) |
 * | Rafter, Deno: serve() | `serve()` of `@rafter/rpc/deno`, default options (but the connection limits) |
 *
 * Each round starts both servers afresh, in turn (rotating which goes
 * first); figures are medians of the rounds. The same measurement as
 * `rpc/server/idle_memory_e2e_test.ts`, which bounds it.
 *
 * ```sh
 * deno run -A bench/rpc_idle.ts [--connections 2000] [--rounds 3] [--quick]
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { median, Report } from "./report.ts";
import { serve } from "../adapter/deno/serve.ts";

const USAGE =
  `usage: deno run -A bench/rpc_idle.ts [--connections N] [--rounds N] [--quick]

  --connections N  idle connections per server (default 2000; 200 with --quick)
  --rounds N       rounds, each starting both servers afresh (default 3)
  --quick          200 connections, 1 round (the smoke test)
  --scenarios LIST idle (the only one)
  --help           show this text`;

const flags = benchArgs(USAGE, {
  connections: { type: "string" },
  rounds: { type: "string" },
  quick: { type: "boolean", default: false },
  scenarios: { type: "string" },
  serve: { type: "string" },
});

/** One sample of a server process, in KiB. */
interface Sample {
  rssKiB: number;
  heapKiB: number;
  connections: number;
}

const PING = '{"jsonrpc":"2.0","method":"rpc.ping","id":1}\n';

/** VmRSS of /proc/self/status, in KiB. */
function rssKiB(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (match === null) throw new Error("no VmRSS in /proc/self/status");
  return Number(match[1]);
}

/**
 * A server child (`--serve bare|rafter`): prints its port, then answers
 * each stdin line with a {@link Sample} after two full GCs.
 */
async function serveChild(kind: string): Promise<void> {
  let connections = 0;
  let port: number;
  if (kind === "rafter") {
    const server = serve({
      methods: (session) => {
        connections++;
        session.signal.addEventListener("abort", () => connections--);
        return {};
      },
      // Every connection of the bench comes from 127.0.0.1.
      maxConnections: 100_000,
      maxConnectionsPerAddress: 100_000,
    });
    port = server.port;
  } else {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    port = (listener.addr as Deno.NetAddr).port;
    const pong = new TextEncoder().encode(
      '{"jsonrpc":"2.0","result":"pong","id":1}\n',
    );
    (async () => {
      for await (const conn of listener) {
        connections++;
        (async () => {
          const buffer = new Uint8Array(1024);
          try {
            for (let i = 0; i < 1_000_000; i++) {
              const n = await conn.read(buffer);
              if (n === null) break;
              await conn.write(pong);
            }
          } catch {
            // The bench closed it.
          } finally {
            connections--;
            try {
              conn.close();
            } catch { /* closed */ }
          }
        })();
      }
    })();
  }
  const encoder = new TextEncoder();
  await Deno.stdout.write(encoder.encode(`${port}\n`));
  const gc = (globalThis as { gc?: () => void }).gc;
  let text = "";
  for await (
    const chunk of Deno.stdin.readable.pipeThrough(
      new TextDecoderStream(),
    )
  ) {
    text += chunk;
    for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n")) {
      text = text.slice(at + 1);
      gc?.();
      gc?.();
      const sample: Sample = {
        rssKiB: rssKiB(),
        heapKiB: Math.round(Deno.memoryUsage().heapUsed / 1024),
        connections,
      };
      await Deno.stdout.write(encoder.encode(JSON.stringify(sample) + "\n"));
    }
  }
  Deno.exit(0);
}

/** A server child process and its line protocol. */
class ServerProcess {
  readonly #child: Deno.ChildProcess;
  readonly #lines: ReadableStreamDefaultReader<string>;
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  #text = "";

  constructor(kind: string) {
    this.#child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--v8-flags=--expose-gc",
        new URL(import.meta.url).pathname,
        "--serve",
        kind,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#lines = this.#child.stdout.pipeThrough(new TextDecoderStream())
      .getReader();
    this.#stdin = this.#child.stdin.getWriter();
  }

  async line(): Promise<string> {
    for (let i = 0; i < 10_000; i++) {
      const at = this.#text.indexOf("\n");
      if (at !== -1) {
        const line = this.#text.slice(0, at);
        this.#text = this.#text.slice(at + 1);
        return line;
      }
      const { value, done } = await this.#lines.read();
      if (done) throw new Error("the server process ended");
      this.#text += value;
    }
    throw new Error("the server process printed no line");
  }

  /** Samples until the server has `connections` open (at most 10 s). */
  async settle(connections: number): Promise<Sample> {
    for (let i = 0; i < 200; i++) {
      await this.#stdin.write(new TextEncoder().encode("rss\n"));
      const sample: Sample = JSON.parse(await this.line());
      if (sample.connections === connections) return sample;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`the server never had ${connections} connections open`);
  }

  async stop(): Promise<void> {
    await this.#stdin.close().catch(() => {});
    await this.#lines.cancel().catch(() => {});
    await this.#child.status;
  }
}

/** Opens `n` connections to `port`, each answered one ping. */
async function openIdle(port: number, n: number): Promise<Deno.TcpConn[]> {
  const ping = new TextEncoder().encode(PING);
  const conns: Deno.TcpConn[] = [];
  for (let i = 0; i < n; i += 100) {
    await Promise.all(
      Array.from({ length: Math.min(100, n - i) }, async () => {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port });
        conns.push(conn);
        await conn.write(ping);
        const answer = new Uint8Array(256);
        const count = await conn.read(answer);
        const text = new TextDecoder().decode(answer.subarray(0, count ?? 0));
        if (!text.includes('"pong"')) throw new Error(`no pong: ${text}`);
      }),
    );
  }
  return conns;
}

/** One server's figures in one round, per connection in KiB. */
interface Figures {
  before: Sample;
  open: Sample;
}

async function measure(kind: string, n: number): Promise<Figures> {
  const server = new ServerProcess(kind);
  const conns: Deno.TcpConn[] = [];
  try {
    const port = Number(await server.line());
    const before = await server.settle(0);
    conns.push(...await openIdle(port, n));
    const open = await server.settle(n);
    return { before, open };
  } finally {
    for (const conn of conns) conn.close();
    await server.stop();
  }
}

async function main(): Promise<void> {
  const quick = flags.quick === true;
  const n = Number(flags.connections ?? (quick ? 200 : 2_000));
  const rounds = Number(flags.rounds ?? (quick ? 1 : 3));
  const kinds = [
    { kind: "bare", label: "bare Deno.listen, a 1 KiB read pending (floor)" },
    { kind: "rafter", label: "Rafter, Deno: serve()" },
  ];
  const figures = new Map<string, Figures[]>(kinds.map((k) => [k.kind, []]));
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? kinds : [...kinds].reverse();
    for (const { kind } of order) {
      figures.get(kind)!.push(await measure(kind, n));
    }
  }
  const perConnection = (f: Figures, key: "rssKiB" | "heapKiB") =>
    (f.open[key] - f.before[key]) / n;
  const bareRss = median(
    figures.get("bare")!.map((f) => perConnection(f, "rssKiB")),
  );
  const report = new Report("rpc_idle.ts");
  report.table({
    scenario: "idle",
    title: "Memory per idle connection on the server",
    note: `${
      n.toLocaleString("en")
    } connections from this process to a server process on 127.0.0.1 (Deno ${Deno.version.deno}), each left idle after one rpc.ping answered; the server's VmRSS and V8 heap after two full GCs, with none and with all open; per connection: the difference ÷ ${n}. Medians of ${rounds} round(s), each starting both servers afresh (alternating which goes first). The bare row is the floor: Deno's own socket and a pending 1 KiB read.`,
    columns: [
      { name: "RSS before MiB", unit: "MiB" },
      { name: "RSS open MiB", unit: "MiB" },
      { name: "RSS KiB per connection", unit: "KiB" },
      { name: "heap KiB per connection", unit: "KiB" },
      { name: "RSS over the floor, KiB per connection", unit: "KiB" },
    ],
    rows: kinds.map(({ kind, label }) => {
      const all = figures.get(kind)!;
      const rss = median(all.map((f) => perConnection(f, "rssKiB")));
      return {
        label,
        cells: [
          median(all.map((f) => f.before.rssKiB / 1024)),
          median(all.map((f) => f.open.rssKiB / 1024)),
          rss,
          median(all.map((f) => perConnection(f, "heapKiB"))),
          kind === "bare" ? null : rss - bareRss,
        ],
      };
    }),
  });
  await report.finish();
}

if (flags.serve !== undefined) await serveChild(String(flags.serve));
else await main();
