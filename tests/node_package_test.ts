/**
 * End to end, the npm package under Node: `scripts/build_npm.ts` builds it
 * into a temp folder, `npm pack` packs it and `npm install` puts the
 * tarball into a fresh folder with the Node examples (`examples/node/`);
 * a 1-node registry runs as a Deno process, two Node hello servers bind
 * themselves in it, and the Node client makes 200 calls back to back
 * while the server its next call goes to is killed with SIGKILL (that
 * call is under way there). Then the survivor drains on SIGTERM, and the
 * installed declarations type-check a TypeScript consumer (tsc, strict,
 * no skipLibCheck, @types/node 20).
 *
 * Needs `node` (20.3 or later) and `npm` on PATH. Prints the figures it
 * measured (prefixed "measured:").
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { LocalCluster } from "../testing/cluster.ts";
import { connect } from "../stub/client.ts";
import { RpcError } from "../rpc/errors.ts";
import { NO_ENDPOINTS } from "../protocol/registry.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
/** Calls the client makes, and after which one the test kills a server. */
const CALLS = 200;
const KILL_AFTER_CALL = 100;
/**
 * How long the servers take to answer, ms: the client calls back to back,
 * so a call is under way on the killed server (200 calls take about 2.2 s).
 */
const DELAY_MS = 10;

/** A process started by this test, its output kept line by line. */
interface Child {
  readonly name: string;
  readonly pid: number;
  readonly lines: string[];
  /** Resolves with the exit code (or the signal's name) once it ended and its output is read. */
  readonly exited: Promise<number | string>;
  running: boolean;
  /** Calls `onLine` for every line, those already printed first. */
  onLine(onLine: (line: string) => void): void;
  /** Sends `signal` if it still runs. */
  kill(signal: Deno.Signal): void;
}

/** Starts `command` in `cwd` with piped output (stdin held open for `--watch-stdin`). */
function start(
  name: string,
  command: string,
  args: string[],
  cwd: string,
): Child {
  const proc = new Deno.Command(command, {
    args,
    cwd,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const listeners: ((line: string) => void)[] = [];
  const read = async (stream: ReadableStream<Uint8Array>, prefix: string) => {
    let rest = "";
    const emit = (line: string) => {
      lines.push(prefix + line);
      if (prefix === "") { for (const listener of listeners) listener(line); }
    };
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + text).split("\n");
      rest = parts.pop()!;
      parts.forEach(emit);
    }
    if (rest !== "") emit(rest);
  };
  const child: Child = {
    name,
    pid: proc.pid,
    lines,
    running: true,
    exited: Promise.all([
      proc.status,
      read(proc.stdout, ""),
      read(proc.stderr, "stderr: "),
    ]).then(async ([status]) => {
      child.running = false;
      await proc.stdin.close().catch(() => {});
      return status.signal ?? status.code;
    }),
    onLine(onLine) {
      lines.filter((line) => !line.startsWith("stderr: ")).forEach(onLine);
      listeners.push(onLine);
    },
    kill(signal) {
      if (!child.running) return;
      try {
        proc.kill(signal);
      } catch {
        // It ended in the meantime.
      }
    },
  };
  return child;
}

/** Resolves with the first line of `child` matching `pattern`; rejects after `timeoutMs` or if it exits. */
function waitForLine(
  child: Child,
  pattern: RegExp,
  timeoutMs: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let done = false;
    const fail = (why: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      reject(
        new Error(
          `${child.name}: ${why}; its output:\n${child.lines.join("\n")}`,
        ),
      );
    };
    const timer = setTimeout(
      () => fail(`no line matching ${pattern} within ${timeoutMs} ms`),
      timeoutMs,
    );
    child.onLine((line) => {
      if (done || !pattern.test(line)) return;
      done = true;
      clearTimeout(timer);
      resolve(line);
    });
    child.exited.then((code) => fail(`exited (${code})`));
  });
}

/** Waits at most `timeoutMs` for `child` to end; SIGKILLs it and fails after that. */
async function exitWithin(child: Child, timeoutMs: number) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  const result = await Promise.race([child.exited, timedOut]);
  clearTimeout(timer);
  if (result === "timeout") {
    child.kill("SIGKILL");
    await child.exited;
    throw new Error(
      `${child.name} still ran after ${timeoutMs} ms; its output:\n${
        child.lines.join("\n")
      }`,
    );
  }
  return result;
}

/** Runs a command to its end (killed after `timeoutMs`); fails unless it exits 0. */
async function run(
  command: string,
  args: string[],
  cwd: string,
  timeoutMs: number,
): Promise<string> {
  const child = start(`${command} ${args[0]}`, command, args, cwd);
  const code = await exitWithin(child, timeoutMs);
  const output = child.lines.join("\n");
  assert.equal(code, 0, `${command} ${args.join(" ")} failed:\n${output}`);
  return child.lines.filter((line) => !line.startsWith("stderr: ")).join(
    "\n",
  );
}

/** One line of `client.mjs --json`. */
interface CallLine {
  call: number;
  ok: boolean;
  greeting?: string;
  server?: string;
  error?: string;
  startedAt: number;
  ms?: number;
}

/** The TypeScript consumer of the installed package the test type-checks. */
const CONSUMER = `import {
  connect,
  roundRobin,
  type RpcServer,
  serve,
  type Stub,
} from "@rafter/rpc";
import { nodeTcpDialer, serve as serveNode } from "@rafter/rpc/node";
import { type Distributor, RpcError } from "@rafter/rpc/core";
import { sticky } from "@rafter/rpc/distributors";
import type { LookupResult } from "@rafter/rpc/protocol";
import { setDefaultDialer } from "@rafter/rpc/transport";
import { RetryBudget } from "@rafter/rpc/client";

interface Hello {
  greet(name: string): { greeting: string; server: string };
}

export async function main(): Promise<string> {
  const server: RpcServer = await serve({
    methods: { greet: (name: string) => ({ greeting: \`Hello, \${name}!\`, server: "ts" }) },
  });
  setDefaultDialer(nodeTcpDialer);
  const client = connect("tcp://127.0.0.1:7001");
  const distributor: Distributor = roundRobin();
  const pinned: Distributor = sticky();
  const empty: LookupResult["endpoints"] = [];
  const budget = new RetryBudget();
  const hello: Stub<Hello> = client.stub<Hello>("hello", { distributor, idempotent: ["greet"] });
  const { greeting } = await hello.greet("Ada");
  // @ts-expect-error greet takes a string
  await hello.greet(42);
  // @ts-expect-error serve() of Node resolves to the server: it is a promise
  const notAwaited: RpcServer = serveNode({ methods: {} });
  const binding = await client.bindServer("hello", server, { ttlMs: 5_000 });
  await binding.close();
  client.close();
  await server.close();
  return greeting + String(notAwaited) + String(new RpcError(-32000, "x").code) +
    String(pinned) + String(empty) + String(budget);
}
`;

Deno.test("the npm package, packed and installed into a fresh folder: two Node hello servers and a Node client answer all 200 calls while one server is killed with SIGKILL; its declarations type-check a TypeScript consumer", async () => {
  const started = performance.now();
  const figures: Record<string, unknown> = {};
  const version = (await run("node", ["--version"], ROOT, 10_000)).trim();
  const [major, minor] = version.slice(1).split(".").map(Number);
  assert.ok(
    major > 20 || (major === 20 && minor >= 3),
    `node ${version}: the package needs 20.3 or later`,
  );
  figures.node = version;

  const tmp = await Deno.makeTempDir({ prefix: "rafter-npm-" });
  const cluster = new LocalCluster();
  const children: Child[] = [];
  try {
    // Build, pack, install into a fresh folder.
    let phase = performance.now();
    await run(
      Deno.execPath(),
      [
        "run",
        "--config",
        `${ROOT}deno.dev.json`,
        "-A",
        `${ROOT}scripts/build_npm.ts`,
        "--out",
        `${tmp}/package`,
        "--quiet",
      ],
      ROOT,
      120_000,
    );
    figures.buildMs = Math.round(performance.now() - phase);
    phase = performance.now();
    const packed = JSON.parse(
      await run(
        "npm",
        [
          "pack",
          `${tmp}/package`,
          "--pack-destination",
          tmp,
          "--json",
        ],
        tmp,
        60_000,
      ),
    ) as { filename: string; files: { path: string }[]; size: number }[];
    const paths = packed[0].files.map((file) => file.path);
    for (
      const entry of [
        "package.json",
        "esm/mod.js",
        "esm/adapter/node/mod.js",
        "types/mod.d.ts",
        "types/adapter/node/mod.d.ts",
        "esm/adapter/node/package_root.js",
        "esm/protocol/mod.js",
        "types/rpc/transport/mod.d.ts",
        "README.md",
        "docs/getting-started.md",
        "esm/rpc/codec/cbor.js",
      ]
    ) {
      assert.ok(paths.includes(entry), `the tarball has no ${entry}`);
    }
    assert.deepEqual(
      paths.filter((path) => /^(esm|types)\/(registry|raft|cli)\//.test(path)),
      [],
      "the tarball holds Deno-only code",
    );
    figures.tarball = `${packed[0].filename}, ${paths.length} files, ${
      Math.round(packed[0].size / 1024)
    } KiB`;
    const app = `${tmp}/app`;
    await Deno.mkdir(app);
    await Deno.writeTextFile(
      `${app}/package.json`,
      JSON.stringify({ private: true, type: "module" }),
    );
    await run(
      "npm",
      [
        "install",
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        `${tmp}/${packed[0].filename}`,
      ],
      app,
      60_000,
    );
    figures.packAndInstallMs = Math.round(performance.now() - phase);
    const installed = JSON.parse(
      await Deno.readTextFile(`${app}/node_modules/@rafter/rpc/package.json`),
    );
    const denoJson = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
    assert.equal(installed.version, denoJson.version);
    assert.equal(installed.type, "module");
    assert.equal(installed.dependencies, undefined);
    for (const file of ["server.mjs", "client.mjs"]) {
      await Deno.copyFile(`${ROOT}examples/node/${file}`, `${app}/${file}`);
      // --version names the installed package's version and Node's.
      assert.equal(
        (await run("node", [file, "--version"], app, 30_000)).trim(),
        `rafter ${denoJson.version} (node ${
          (await run("node", ["--version"], app, 30_000)).trim()
        })`,
      );
    }

    // Which entry each condition gets, that all share one copy, and that
    // importing the Node entry sets no process-wide default dialer.
    const resolved = JSON.parse(
      await run(
        "node",
        [
          "--input-type=module",
          "-e",
          `const node = await import("@rafter/rpc");
         const core = await import("@rafter/rpc/core");
         const sub = await import("@rafter/rpc/node");
         const transport = await import("@rafter/rpc/transport");
         let noDefault = false;
         try { transport.defaultDialer(); } catch (error) { noDefault = error instanceof TypeError; }
         console.log(JSON.stringify({
           nodeServe: typeof node.serve, coreServe: typeof core.serve,
           same: node.connect === sub.connect && node.serve === sub.serve &&
             node.RpcError === core.RpcError &&
             transport.setDefaultDialer !== undefined,
           noDefault,
         }));`,
        ],
        app,
        20_000,
      ),
    );
    assert.deepEqual(resolved, {
      nodeServe: "function",
      coreServe: "undefined",
      same: true,
      noDefault: true,
    });
    const edge = JSON.parse(
      await run(
        "node",
        [
          "--conditions=workerd",
          "--input-type=module",
          "-e",
          `const m = await import("@rafter/rpc");
         console.log(JSON.stringify([typeof m.serve, typeof m.connect]));`,
        ],
        app,
        20_000,
      ),
    );
    assert.deepEqual(edge, ["undefined", "function"], "workerd gets the core");
    // CBOR is opt-in: refused until @rafter/rpc/cbor is imported, then a
    // server started before the import hears a CBOR client too.
    const cbor = JSON.parse(
      await run(
        "node",
        [
          "--input-type=module",
          "-e",
          `const { dial, serve } = await import("@rafter/rpc/node");
         const server = await serve({ port: 0, methods: { echo: (v) => v } });
         let refused = "";
         try { await dial(server.url, { codec: "cbor" }); }
         catch (error) { refused = error.name; }
         await import("@rafter/rpc/cbor");
         const connection = await dial(server.url, { codec: "cbor" });
         const echoed = await connection.call("echo", [{ n: 1 }]);
         connection.close();
         await server.close();
         console.log(JSON.stringify({ refused, echoed }));`,
        ],
        app,
        20_000,
      ),
    );
    assert.deepEqual(cbor, { refused: "RangeError", echoed: { n: 1 } });

    // A 1-node registry (Deno) and two Node hello servers bound in it.
    phase = performance.now();
    await cluster.startRegistryWithLeader(1);
    const registry = cluster.registryUrls.join(",");
    const servers = ["node-1", "node-2"].map((id) => {
      const child = start(id, "node", [
        "server.mjs",
        "--registry",
        registry,
        "--id",
        id,
        "--ttl-ms",
        "2000",
        "--delay-ms",
        String(DELAY_MS),
        "--watch-stdin",
      ], app);
      children.push(child);
      return child;
    });
    await Promise.all(
      servers.map((child) =>
        waitForLine(child, /serving on tcp:\/\/.* bound as "hello"/, 20_000)
      ),
    );
    figures.startMs = Math.round(performance.now() - phase);
    // SIGHUP (systemd's ExecReload) does not stop a server without TLS:
    // it says so and serves on (the calls below need both).
    servers[0].kill("SIGHUP");
    await waitForLine(
      servers[0],
      /node-1: SIGHUP: nothing to reload \(no TLS files\); still serving/,
      10_000,
    );

    // 200 calls back to back. Half a server delay after call 100 is
    // answered, SIGKILL the other server: round robin has sent call 101
    // there, so it is under way (the test reports whether it was).
    const client = start("client", "node", [
      "client.mjs",
      "--registry",
      registry,
      "--count",
      String(CALLS),
      "--json",
    ], app);
    children.push(client);
    const clientStarted = performance.now();
    let victim: Child | null = null;
    let killedAt = 0;
    let deadAt = 0;
    let victimDead: Promise<number | string> | null = null;
    client.onLine((line) => {
      if (victim !== null || !line.startsWith('{"call"')) return;
      const answered = JSON.parse(line) as CallLine;
      if (answered.call < KILL_AFTER_CALL) return;
      victim = servers.find((child) => child.name !== answered.server)!;
      const doomed = victim;
      victimDead = new Promise<void>((resolve) =>
        setTimeout(resolve, DELAY_MS / 2)
      ).then(() => {
        killedAt = Date.now();
        doomed.kill("SIGKILL");
        return doomed.exited;
      }).then((code) => {
        deadAt = Date.now();
        return code;
      });
    });
    const clientCode = await exitWithin(client, 60_000);
    figures.clientMs = Math.round(performance.now() - clientStarted);
    assert.ok(
      victim !== null && victimDead !== null,
      "no kill: the client stopped early",
    );
    const killed: Child = victim;
    const survivor = servers.find((child) => child !== killed)!;
    assert.equal(await victimDead, "SIGKILL", killed.lines.join("\n"));
    const context = client.lines.join("\n");
    assert.equal(clientCode, 0, context);

    const calls = client.lines
      .filter((line) => line.startsWith('{"call"'))
      .map((line) => JSON.parse(line) as CallLine);
    assert.deepEqual(
      calls.map((c) => c.call),
      Array.from({ length: CALLS }, (_, i) => i + 1),
      "one line per call, in order",
    );
    const wrong = calls.filter((c) =>
      !c.ok || c.greeting !== `Hello, Ada-${c.call}!`
    );
    assert.deepEqual(wrong, [], "every call got its own greeting");
    const before = calls.filter((c) => c.call <= KILL_AFTER_CALL);
    assert.deepEqual(
      [...new Set(before.map((c) => c.server))].sort(),
      servers.map((child) => child.name),
      "both servers answered before the kill",
    );
    // Calls started once the victim was seen dead; the ones in between
    // (under way while the signal was on its way) are the failover's.
    const after = calls.filter((c) => c.startedAt > deadAt);
    assert.ok(
      after.length >= CALLS - KILL_AFTER_CALL - 10,
      `only ${after.length} calls after the kill`,
    );
    assert.deepEqual(
      after.filter((c) => c.server !== survivor.name),
      [],
      "the survivor answered every call after the kill",
    );
    // Not answered yet when the signal was sent (call 100 was).
    const underWay = calls.filter((c) =>
      c.call > KILL_AFTER_CALL && c.startedAt <= killedAt
    );
    const summary = JSON.parse(client.lines.at(-1)!).summary;
    assert.equal(summary.failed, 0, context);
    const median = (list: CallLine[]) =>
      list.map((c) => c.ms!).sort((a, b) => a - b)[
        Math.floor(list.length / 2)
      ];
    figures.calls = `${calls.length} calls, ${wrong.length} failed, ${
      JSON.stringify(summary.byServer)
    }; ${killed.name} killed after call ${KILL_AFTER_CALL} (seen dead ${
      deadAt - killedAt
    } ms after SIGKILL); ${after.length} calls started after, all answered by ${survivor.name}`;
    figures.failover = `under way at the kill: ${
      underWay.map((c) => `#${c.call} ${c.ms} ms (answered by ${c.server})`)
        .join(", ") || "none"
    }; median call ${median(before)} ms before the kill, ${
      median(after)
    } ms after (servers answer after ${DELAY_MS} ms)`;

    // The survivor drains and unbinds on SIGTERM.
    phase = performance.now();
    survivor.kill("SIGTERM");
    assert.equal(
      await exitWithin(survivor, 15_000),
      0,
      survivor.lines.join("\n"),
    );
    figures.drainMs = Math.round(performance.now() - phase);
    assert.ok(
      survivor.lines.some((line) => / stopped; it answered \d+/.test(line)),
      survivor.lines.join("\n"),
    );
    const check = connect(cluster.registryUrls);
    try {
      const ids: string[] = await check.lookup("hello").then(
        (result) => result.endpoints.map((endpoint) => endpoint.id),
        (error) => {
          if (error instanceof RpcError && error.code === NO_ENDPOINTS) {
            return [] as string[];
          }
          throw error;
        },
      );
      assert.ok(
        !ids.includes(survivor.name),
        `${survivor.name} still bound after its drain: ${ids}`,
      );
    } finally {
      check.close();
    }

    // The installed declarations type-check a consumer (tsc, no skipLibCheck).
    phase = performance.now();
    await Deno.writeTextFile(`${app}/consumer.ts`, CONSUMER);
    await Deno.writeTextFile(
      `${app}/tsconfig.json`,
      JSON.stringify({
        compilerOptions: {
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2022",
          lib: ["es2022"],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ["node"],
          typeRoots: [`${ROOT}node_modules/@types`],
        },
        files: ["consumer.ts"],
      }),
    );
    await run(
      "node",
      [
        `${ROOT}node_modules/typescript/bin/tsc`,
        "-p",
        `${app}/tsconfig.json`,
      ],
      app,
      60_000,
    );
    figures.typeCheckMs = Math.round(performance.now() - phase);
  } finally {
    for (const child of children) child.kill("SIGKILL");
    await Promise.all(children.map((child) => child.exited));
    await cluster.stop();
    await Deno.remove(tmp, { recursive: true });
  }
  figures.testMs = Math.round(performance.now() - started);
  console.log(`measured: ${JSON.stringify(figures, null, 1)}`);
});
