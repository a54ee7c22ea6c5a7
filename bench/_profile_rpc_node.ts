/**
 * The Node half of `bench/_profile_rpc.ts` (private to `bench/`; a
 * profiling aid for issue 9): Rafter's Node adapter (`serve()` and `dial()`
 * over `node:net`) of two checkouts, `--a` (default: this one) and `--b`
 * (default: /work/main), run under Node itself, side by side with a raw
 * `node:net` echo. Each checkout's entry is bundled with `deno bundle
 * --platform node`; servers and clients are separate Node processes, each
 * measurement a fresh client process, rounds alternating A B A B.
 *
 * ```sh
 * deno run -A bench/_profile_rpc_node.ts [--a DIR] [--b DIR] [--rounds 3] [--seconds 2] [--calls 5000]
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { AB_FLAGS, AbTable, type Server, spawnServer } from "./_ab.ts";

const USAGE = `usage: deno run -A bench/_profile_rpc_node.ts [--a DIR] [--b DIR]
  [--rounds N] [--seconds S] [--calls N] [--node-flags FLAGS]`;

const flags = benchArgs(USAGE, {
  ...AB_FLAGS,
  "node-flags": { type: "string", default: "" },
});
const ROUNDS = Number(flags.rounds);
const roots = [String(flags.a), String(flags.b)].map((r) =>
  r.endsWith("/") ? r : r + "/"
);
const nodeFlags = String(flags["node-flags"]).split(" ").filter((f) => f);

/** The Node program: a server, a raw echo, or one client measurement. */
const program = (root: string) => `
import { dial, serve, nodeTcpDialer } from ${
  JSON.stringify(`${root}adapter/node/mod.ts`)
};
import net from "node:net";
const [mode, url, seconds, calls] = process.argv.slice(2);
const PARAMS = { n: 1, s: "hello, world" };
const stdinEnds = () => {
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
};
function hostPort(url: string) {
  const u = new URL(url.replace("tcp://", "http://"));
  return { host: u.hostname, port: Number(u.port) };
}
async function sequential(call: () => Promise<unknown>): Promise<number[]> {
  const n = Number(calls);
  const times = new Float64Array(n);
  for (let i = 0; i < 300; i++) await call();
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await call();
    times[i] = performance.now() - start;
  }
  times.sort();
  return [times[Math.floor(n * 0.5)] * 1000, times[Math.floor(n * 0.99)] * 1000];
}
async function pipelined(call: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 300; i++) await call();
  const start = performance.now();
  const until = start + Number(seconds) * 1000;
  let done = 0;
  await Promise.all(Array.from({ length: 64 }, async () => {
    for (let i = 0; i < 10_000_000 && performance.now() < until; i++) {
      await call();
      done++;
    }
  }));
  return done / ((performance.now() - start) / 1000);
}
if (mode === "server") {
  const server = await serve({ methods: { echo: (v: unknown) => v } });
  console.log("listening on " + server.url);
  stdinEnds();
} else if (mode === "rawserver") {
  const server = net.createServer({ noDelay: true }, (socket) => {
    socket.on("error", () => {});
    socket.pipe(socket);
  });
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as net.AddressInfo;
    console.log("listening on tcp://127.0.0.1:" + port);
  });
  stdinEnds();
} else if (mode === "rawseq") {
  const socket = net.connect({ ...hostPort(url), noDelay: true });
  await new Promise((resolve) => socket.once("connect", resolve));
  const waiting: (() => void)[] = [];
  socket.on("data", (chunk: Buffer) => {
    for (let i = 0; i < chunk.length; i++) {
      if (chunk[i] === 10) waiting.shift()?.();
    }
  });
  const line = JSON.stringify({ id: 1, params: PARAMS }) + "\\n";
  const call = () => {
    const answer = new Promise<void>((resolve) => waiting.push(resolve));
    socket.write(line);
    return answer;
  };
  console.log(JSON.stringify(await sequential(call)));
  socket.destroy();
} else {
  const connection = await dial(url, { dialer: nodeTcpDialer });
  const call = () => connection.call("echo", PARAMS);
  const out = mode === "seq" ? await sequential(call) : [await pipelined(call)];
  console.log(JSON.stringify(out));
  connection.close();
}
`;

const work = await Deno.makeTempDir({ prefix: "rafter-node-bench-" });
const bundles: string[] = [];
for (const [i, root] of roots.entries()) {
  const entry = `${work}/entry_${i}.ts`;
  await Deno.writeTextFile(entry, program(root));
  const out = `${work}/entry_${i}.mjs`;
  const { code, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "node",
      "--format",
      "esm",
      "--config",
      `${root}deno.json`,
      "-o",
      out,
      entry,
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (code !== 0) {
    throw new Error(
      `deno bundle of ${root} failed: ${new TextDecoder().decode(stderr)}`,
    );
  }
  bundles.push(out);
}

function spawnNode(bundle: string, mode: string): Promise<Server> {
  return spawnServer("node", [...nodeFlags, bundle, mode]);
}

async function measure(
  bundle: string,
  mode: string,
  url: string,
): Promise<number[]> {
  const output = await new Deno.Command("node", {
    args: [
      ...nodeFlags,
      bundle,
      mode,
      url,
      String(flags.seconds),
      String(flags.calls),
    ],
    stderr: "inherit",
  }).output();
  const text = new TextDecoder().decode(output.stdout).trim().split("\n")
    .at(-1)!;
  return JSON.parse(text);
}

const servers: Server[] = [];
try {
  const raw = await spawnNode(bundles[0], "rawserver");
  servers.push(raw);
  const rafter: Server[] = [];
  for (const bundle of bundles) {
    const server = await spawnNode(bundle, "server");
    servers.push(server);
    rafter.push(server);
  }
  const table = new AbTable();
  const add = (row: string, side: number, value: number) =>
    table.add(row, side, value);
  for (let round = 0; round < ROUNDS; round++) {
    const [rawP50] = await measure(bundles[0], "rawseq", raw.url);
    add("raw node:net echo, sequential p50 µs", 0, rawP50);
    add("raw node:net echo, sequential p50 µs", 1, rawP50);
    for (const side of [0, 1]) {
      const [p50, p99] = await measure(bundles[side], "seq", rafter[side].url);
      add("sequential p50 µs", side, p50);
      add("sequential p99 µs", side, p99);
      const [rate] = await measure(bundles[side], "pipe", rafter[side].url);
      add("64 in flight, calls/s", side, rate);
    }
  }
  const version = new TextDecoder().decode(
    (await new Deno.Command("node", { args: ["--version"] }).output()).stdout,
  ).trim();
  table.print(
    `Node ${version}: A = ${roots[0]}, B = ${
      roots[1]
    }; medians of ${ROUNDS} rounds, A and B alternating`,
  );
} finally {
  for (const server of servers) await server.stop().catch(() => {});
  await Deno.remove(work, { recursive: true });
}
