/**
 * A server process for the memory tests of `rpc/server/`: run it as
 * `deno run -A --v8-flags=--expose-gc rpc/server/_test_util.ts`; it serves
 * `rpc.ping` on an ephemeral port of 127.0.0.1, prints the port on its
 * first line, and then answers each `rss` line on stdin with one line of
 * JSON: its resident set size and V8 heap, in KiB, after a full GC.
 *
 * @module
 */

import { serve } from "../../adapter/deno/serve.ts";

/** One measurement of the server process, in KiB. */
export interface MemorySample {
  /** VmRSS of /proc/self/status. */
  rssKiB: number;
  /** V8's used heap. */
  heapKiB: number;
  /** Connections open on the server. */
  connections: number;
}

/** VmRSS of /proc/self/status, in KiB. */
function rssKiB(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (match === null) throw new Error("no VmRSS in /proc/self/status");
  return Number(match[1]);
}

if (import.meta.main) {
  let connections = 0;
  const server = serve({
    methods: (session) => {
      connections++;
      session.signal.addEventListener("abort", () => connections--);
      return {};
    },
    // Every test connection comes from 127.0.0.1.
    maxConnections: 100_000,
    maxConnectionsPerAddress: 100_000,
  });
  const encoder = new TextEncoder();
  await Deno.stdout.write(encoder.encode(`${server.port}\n`));
  const gc = (globalThis as { gc?: () => void }).gc;
  const lines = Deno.stdin.readable.pipeThrough(new TextDecoderStream());
  let text = "";
  for await (const chunk of lines) {
    text += chunk;
    for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n")) {
      text = text.slice(at + 1);
      gc?.();
      gc?.();
      const sample: MemorySample = {
        rssKiB: rssKiB(),
        heapKiB: Math.round(Deno.memoryUsage().heapUsed / 1024),
        connections,
      };
      await Deno.stdout.write(encoder.encode(JSON.stringify(sample) + "\n"));
    }
  }
  await server.close();
}
