/**
 * Memory of idle connections (issue #16): a `serve()` server in its own
 * process, 2,000 connections from this one, each after one `rpc.ping`; the
 * server's resident set size before, with them open, and after they close.
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import type { MemorySample } from "./_test_util.ts";
import { within } from "../../testing/time.ts";

/**
 * Connections held open: 2,000, or `RAFTER_IDLE_CONNECTIONS` (e.g. 10000 for
 * the figure docs/limits.md states; raise `ulimit -n` first if needed).
 */
const CONNECTIONS = Number(Deno.env.get("RAFTER_IDLE_CONNECTIONS") ?? 2_000);
/**
 * The budget per idle connection, in KiB of the server's RSS. Measured
 * (2 cores, Deno 2.9.6): 25-29 KiB with 2,000 connections and 17.7 KiB
 * with 10,000 (of which about 8 KiB is Deno's own socket: a bare
 * `Deno.listen` server with a pending 1 KiB read costs 10.9 KiB); 76 and
 * 70 KiB before the read buffer shrank. Generous, for a loaded machine.
 */
const BUDGET_KIB = 40;

/** The server process and its line protocol (see `_test_util.ts`). */
class ServerProcess {
  readonly #child: Deno.ChildProcess;
  readonly #lines: ReadableStreamDefaultReader<string>;
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  #text = "";

  constructor() {
    this.#child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--v8-flags=--expose-gc",
        fileURLToPath(new URL("./_test_util.ts", import.meta.url)),
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
    for (;;) {
      const at = this.#text.indexOf("\n");
      if (at !== -1) {
        const line = this.#text.slice(0, at);
        this.#text = this.#text.slice(at + 1);
        return line;
      }
      const { value, done } = await within(
        this.#lines.read(),
        30_000,
        "a line from the server process",
      );
      if (done) throw new Error("the server process ended");
      this.#text += value;
    }
  }

  async sample(): Promise<MemorySample> {
    await this.#stdin.write(new TextEncoder().encode("rss\n"));
    return JSON.parse(await this.line());
  }

  /** Samples until the server has `connections` open. */
  async settle(connections: number): Promise<MemorySample> {
    for (let i = 0; i < 200; i++) {
      const sample = await this.sample();
      if (sample.connections === connections) return sample;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`the server never had ${connections} connections open`);
  }

  async stop(): Promise<void> {
    await this.#stdin.close();
    await this.#lines.cancel();
    await within(this.#child.status, 10_000, "the server process to exit");
  }
}

/** Opens `n` connections to `port`, each answered one ping. */
async function openIdle(port: number, n: number): Promise<Deno.TcpConn[]> {
  const ping = new TextEncoder().encode(
    '{"jsonrpc":"2.0","method":"rpc.ping","id":1}\n',
  );
  const conns: Deno.TcpConn[] = [];
  for (let i = 0; i < n; i += 100) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(100, n - i) }, async () => {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port });
        conns.push(conn);
        await conn.write(ping);
        const answer = new Uint8Array(256);
        const count = await conn.read(answer);
        assert.match(
          new TextDecoder().decode(answer.subarray(0, count ?? 0)),
          /"result":"pong"/,
        );
        return conn;
      }),
    );
    assert.equal(batch.length, Math.min(100, n - i));
  }
  return conns;
}

Deno.test(`${CONNECTIONS} idle connections cost the server under ${BUDGET_KIB} KiB each, and closing them returns it for reuse`, async () => {
  const server = new ServerProcess();
  const conns: Deno.TcpConn[] = [];
  try {
    const port = Number(await server.line());
    const before = await server.settle(0);
    const rounds: { open: MemorySample; after: MemorySample }[] = [];
    for (let round = 0; round < 2; round++) {
      conns.push(...await openIdle(port, CONNECTIONS));
      const open = await server.settle(CONNECTIONS);
      for (const conn of conns.splice(0)) conn.close();
      const after = await server.settle(0);
      rounds.push({ open, after });
    }
    const perConnection = (rounds[0].open.rssKiB - before.rssKiB) /
      CONNECTIONS;
    const report = JSON.stringify({ before, rounds, perConnection });
    console.log(`idle connections: ${report}`);
    assert.ok(
      perConnection < BUDGET_KIB,
      `${perConnection.toFixed(1)} KiB per idle connection: ${report}`,
    );
    // The second round reuses what the first freed: a leak would grow by
    // as much again.
    const grown = rounds[1].after.rssKiB - rounds[0].after.rssKiB;
    assert.ok(
      grown < 0.75 * (rounds[0].open.rssKiB - before.rssKiB),
      `the second round grew RSS by ${grown} KiB: ${report}`,
    );
    assert.ok(
      rounds[1].after.heapKiB - before.heapKiB < 2_048,
      `the heap kept ${
        rounds[1].after.heapKiB - before.heapKiB
      } KiB: ${report}`,
    );
  } finally {
    for (const conn of conns) conn.close();
    await server.stop();
  }
});
