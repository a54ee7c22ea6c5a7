/**
 * Fixtures of the edge tests: workerd from npm and the bundled Cloudflare
 * example ({@link installWorkerd}, {@link bundleWorker}), and
 * {@link startTlsBackend}, a registry node and hello servers on real
 * processes, every link TLS (a throw-away test CA) and the registry
 * enforcing tokens.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { connect } from "../adapter/deno/mod.ts";
import { makeTestPki } from "../testing/certs.ts";
import { freePorts } from "../testing/ports.ts";
import { dial } from "../rpc/transport/dial.ts";

const ROOT = new URL("../", import.meta.url).pathname;
/** The Cloudflare example's folder. */
export const CLOUDFLARE_EXAMPLE = `${ROOT}examples/edge/cloudflare`;
/** The workerd release the edge tests run (npm `workerd`). */
export const WORKERD_VERSION = "1.20261117.1";

/**
 * Installs workerd from npm into a folder of its own (once: it stays under
 * node_modules); returns its binary: the platform package's own (where npm
 * skipped the install script, `.bin/workerd` is a Node wrapper that does
 * not pass SIGTERM on).
 */
export async function installWorkerd(): Promise<string> {
  const prefix = `${ROOT}node_modules/.rafter-workerd-${WORKERD_VERSION}`;
  const arch = Deno.build.arch === "x86_64" ? "64" : "arm64";
  const candidates = (folder: string) => [
    `${folder}/node_modules/@cloudflare/workerd-${Deno.build.os}-${arch}/bin/workerd`,
    `${folder}/node_modules/.bin/workerd`,
  ];
  const installed = async (folder = prefix) => {
    for (const binary of candidates(folder)) {
      try {
        await Deno.stat(binary);
        return binary;
      } catch {
        // Not this one.
      }
    }
    return null;
  };
  const found = await installed();
  if (found !== null) return found;
  // Test files run in parallel and two may install at once: each installs
  // into a folder of its own, then renames it into place (atomic); one
  // that finds the place taken uses the winner's and drops its own.
  await Deno.mkdir(`${ROOT}node_modules`, { recursive: true });
  const own = await Deno.makeTempDir({
    dir: `${ROOT}node_modules`,
    prefix: `.rafter-workerd-${WORKERD_VERSION}.tmp-`,
  });
  try {
    const npm = await new Deno.Command("npm", {
      args: [
        "install",
        "--no-audit",
        "--no-fund",
        "--no-save",
        "--prefix",
        own,
        `workerd@${WORKERD_VERSION}`,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(
      npm.code,
      0,
      `npm install workerd failed: ${new TextDecoder().decode(npm.stderr)}`,
    );
    assert.ok(await installed(own) !== null, "npm installed no workerd binary");
    try {
      await Deno.rename(own, prefix);
    } catch (error) {
      // Another test file's install got there first.
      if (await installed() === null) throw error;
    }
  } finally {
    await Deno.remove(own, { recursive: true }).catch(() => {});
  }
  const binary = await installed();
  assert.ok(binary !== null, "npm installed no workerd binary");
  return binary;
}

/**
 * Bundles a worker (default: the Cloudflare example) into
 * `dir`/dist/worker.js with `deno bundle`.
 */
export async function bundleWorker(
  dir: string,
  entry = `${CLOUDFLARE_EXAMPLE}/worker.ts`,
): Promise<void> {
  const bundle = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "browser",
      "--external",
      "cloudflare:sockets",
      "-o",
      `${dir}/dist/worker.js`,
      entry,
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(bundle.code, 0, new TextDecoder().decode(bundle.stderr));
}

/** A child process whose output lines a test can wait on. */
export interface Spawned {
  readonly name: string;
  readonly process: Deno.ChildProcess;
  /** Every line printed so far, stdout and stderr. */
  readonly output: string[];
  /** Resolves with the exit code once it ended and its output was read. */
  readonly exited: Promise<number>;
  /** Whether it still runs. */
  running(): boolean;
  /**
   * The first line matching `pattern` (printed already or later).
   * @throws {Error} with the output, after `timeoutMs` or once it exited.
   */
  line(pattern: RegExp, timeoutMs: number): Promise<string>;
  /** SIGKILL unless it ended; resolves once it has. */
  kill(): Promise<void>;
}

/**
 * Spawns `command` with `args` and `env` added to this process's
 * environment; collects its output lines.
 */
export function spawnProcess(
  name: string,
  command: string,
  args: string[],
  options: { env?: Record<string, string>; cwd?: string } = {},
): Spawned {
  const process = new Deno.Command(command, {
    args,
    cwd: options.cwd ?? ROOT,
    env: { NO_COLOR: "1", PWD: options.cwd ?? ROOT, ...options.env },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output: string[] = [];
  const read = async (stream: ReadableStream<Uint8Array>) => {
    let rest = "";
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      const lines = (rest + text).split("\n");
      rest = lines.pop()!;
      output.push(...lines);
    }
    if (rest !== "") output.push(rest);
  };
  let running = true;
  const exited = Promise.all([
    process.status,
    read(process.stdout),
    read(process.stderr),
  ]).then(async ([status]) => {
    running = false;
    await process.stdin.close().catch(() => {});
    return status.code;
  });
  return {
    name,
    process,
    output,
    exited,
    running: () => running,
    async line(pattern, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline && running) {
        const seen = output.find((line) => pattern.test(line));
        if (seen !== undefined) return seen;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const seen = output.find((line) => pattern.test(line));
      if (seen !== undefined) return seen;
      throw new Error(
        `${name}: no line matching ${pattern} within ${timeoutMs} ms${
          running ? "" : " (it exited)"
        }:\n${output.join("\n")}`,
      );
    },
    async kill() {
      if (running) {
        try {
          process.kill("SIGKILL");
        } catch {
          // Already gone.
        }
      }
      await exited;
    },
  };
}

/** `deno run -A script args --watch-stdin` (it ends with this process). */
function spawnDeno(
  name: string,
  script: string,
  args: string[],
  env: Record<string, string> = {},
): Spawned {
  return spawnProcess(name, Deno.execPath(), [
    "run",
    "-A",
    `${ROOT}${script}`,
    ...args,
    "--watch-stdin",
  ], { env });
}

/** What {@link startTlsBackend} started. */
export interface TlsBackend {
  /** The registry's client URL, `tls://127.0.0.1:PORT`. */
  registryUrl: string;
  /** The test CA (PEM file) that signed the registry's and servers' certificates. */
  caFile: string;
  /** A token with `read:hello` only: what an edge handler needs. */
  readToken: string;
  /** The hello servers' `tls://` URLs, by id. */
  helloUrls: Map<string, string>;
  /** The registry node and the hello servers. */
  children: Spawned[];
  /** Kills every child and removes the folder. */
  stop(): Promise<void>;
}

/**
 * Starts, on real processes and 127.0.0.1: a throw-away PKI (certificates
 * for `localhost` and `127.0.0.1`); a 1-node registry with client TLS
 * (`--tls-cert/--tls-key`) and `--auth`; a bind token (`bind:hello`) and a
 * read token (`read:hello`) made with the bootstrap admin token; and the
 * hello servers `helloIds`, serving TLS and bound with the bind token
 * (`RAFTER_TOKEN`, `RAFTER_CA`).
 */
export async function startTlsBackend(
  helloIds: readonly string[],
): Promise<TlsBackend> {
  const dir = await Deno.makeTempDir({ prefix: "rafter_edge_tls_" });
  const children: Spawned[] = [];
  const stop = async () => {
    await Promise.all(children.map((child) => child.kill()));
    await Deno.remove(dir, { recursive: true });
  };
  try {
    await Deno.mkdir(join(dir, "pki"));
    const pki = await makeTestPki(join(dir, "pki"), {
      others: ["registry", "hello"],
    });
    const [port, peerPort] = freePorts(2);
    const registryUrl = `tls://127.0.0.1:${port}`;
    const adminTokenFile = join(dir, "admin_token");
    const registry = spawnDeno("n1", "registry/main.ts", [
      "--id",
      "n1",
      "--listen",
      `127.0.0.1:${port}`,
      "--peer-listen",
      `127.0.0.1:${peerPort}`,
      "--data",
      join(dir, "n1"),
      "--auth",
      "--admin-token-file",
      adminTokenFile,
      "--tls-cert",
      pki.certs.registry.certFile,
      "--tls-key",
      pki.certs.registry.keyFile,
      "--tick-ms",
      "20",
      "--election-ticks",
      "5",
    ]);
    children.push(registry);
    await registry.line(/listening on tls:\/\//, 30_000);
    await registry.line(/recorded the bootstrap admin token/, 30_000);
    const admin = connect(registryUrl, {
      token: (await Deno.readTextFile(adminTokenFile)).trim(),
      tls: { caFile: pki.caFile },
    });
    let bindToken: string;
    let readToken: string;
    try {
      bindToken = (await admin.registry.tokenCreate("edge-hello", [
        "bind:hello",
      ])).token;
      readToken = (await admin.registry.tokenCreate("edge-reader", [
        "read:hello",
      ])).token;
    } finally {
      admin.close();
    }
    const helloUrls = new Map<string, string>();
    await Promise.all(helloIds.map(async (id) => {
      const hello = spawnDeno(id, "examples/hello/server.ts", [
        "--registry",
        registryUrl,
        "--id",
        id,
        "--tls-cert",
        pki.certs.hello.certFile,
        "--tls-key",
        pki.certs.hello.keyFile,
      ], { RAFTER_TOKEN: bindToken, RAFTER_CA: pki.caFile });
      children.push(hello);
      const line = await hello.line(/serving on .* bound as/, 30_000);
      const url = line.match(/serving on (\S+),/)?.[1];
      assert.ok(url !== undefined, line);
      helloUrls.set(id, url);
    }));
    return {
      registryUrl,
      caFile: pki.caFile,
      readToken,
      helloUrls,
      children,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Asserts that the backend's processes logged no TLS trouble (a refused
 * handshake, a socket closed without close_notify, any error or warning)
 * so far, and then that it takes nothing but TLS with a token: a plain
 * TCP call to the registry's port and to each hello server's port gets no
 * answer (and the registry logs the failed handshake), and a TLS client
 * without a token has its lookup refused. So an edge handler that got
 * answers reached them over TLS, with its token. Call it once the edge
 * handler is done (the registry logs a failed handshake only once a
 * minute per address, so a later one would go unseen).
 */
export async function assertTlsAndTokenEnforced(
  backend: TlsBackend,
): Promise<void> {
  for (const child of backend.children) {
    assert.deepEqual(
      child.output.filter((line) =>
        /error|handshake|close_notify|warn/i.test(line)
      ),
      [],
      `${child.name} logged:\n${child.output.join("\n")}`,
    );
  }
  const plain = (url: string) => url.replace(/^tls:/, "tcp:");
  for (const url of [backend.registryUrl, ...backend.helloUrls.values()]) {
    assert.match(url, /^tls:\/\/127\.0\.0\.1:\d+$/);
    const connection = await dial(plain(url), { connectTimeoutMs: 2_000 });
    try {
      await assert.rejects(
        connection.call("rpc.ping", [], { timeoutMs: 5_000 }),
        `${plain(url)} answered a plain TCP call`,
      );
    } finally {
      connection.close();
    }
  }
  await backend.children[0].line(
    /TLS handshake with 127\.0\.0\.1 failed/,
    5_000,
  );
  const anonymous = connect(backend.registryUrl, {
    tls: { caFile: backend.caFile },
  });
  try {
    await assert.rejects(
      anonymous.lookup("hello"),
      /Unauthenticated/,
    );
  } finally {
    anonymous.close();
  }
}

/** Fetches `url` until something answers; false after `tries` × 100 ms. */
export async function answers(url: string, tries: number): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    try {
      await (await fetch(url)).body?.cancel();
      return true;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return false;
}

/**
 * `GET origin/?name=NAME` on an edge example: the hello server that
 * answered, when the answer is 200 with NAME's greeting; else what came
 * back.
 */
export async function greetThrough(
  origin: string,
  name: string,
): Promise<{ server: string } | { wrong: string }> {
  const response = await fetch(
    `${origin}/?name=${encodeURIComponent(name)}`,
    { signal: AbortSignal.timeout(10_000) },
  );
  const body = await response.json();
  if (
    response.status !== 200 || body.greeting !== `Hello, ${name}!` ||
    typeof body.server !== "string"
  ) {
    return { wrong: `${name}: ${response.status} ${JSON.stringify(body)}` };
  }
  return { server: body.server };
}

/**
 * Runs the `deno serve` example (examples/edge/deno/main.ts) on a free
 * 127.0.0.1 port, with the permissions its README gives (network, the
 * three variables, and reading `readFiles`, e.g. the CA file) and `env`;
 * resolves once it listens, with its origin (`http://127.0.0.1:PORT`).
 */
export async function startDenoServe(
  env: Record<string, string>,
  readFiles: readonly string[] = [],
): Promise<{ serve: Spawned; origin: string }> {
  const serve = spawnProcess("deno serve", Deno.execPath(), [
    "serve",
    "--allow-net=127.0.0.1",
    "--allow-env=RAFTER_REGISTRY,RAFTER_TOKEN,RAFTER_CA",
    ...(readFiles.length === 0 ? [] : [`--allow-read=${readFiles.join(",")}`]),
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "examples/edge/deno/main.ts",
  ], { env });
  try {
    const line = await serve.line(
      /Listening on http:\/\/127\.0\.0\.1:\d+\//,
      20_000,
    );
    return { serve, origin: line.match(/(http:\/\/127\.0\.0\.1:\d+)\//)![1] };
  } catch (error) {
    await serve.kill();
    throw error;
  }
}

/**
 * {@link greetThrough} `count` times in a row (names n0, n1, …); logs a
 * `measured:` line and asserts every answer right and both `servers`
 * among those that answered; `context` goes into the assertion message.
 */
export async function assertGreetsRight(
  origin: string,
  count: number,
  servers: readonly string[],
  context: () => string,
): Promise<void> {
  const wrong: string[] = [];
  const byServer = new Map<string, number>();
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const answer = await greetThrough(origin, `n${i}`);
    if ("wrong" in answer) {
      wrong.push(answer.wrong);
      continue;
    }
    byServer.set(answer.server, (byServer.get(answer.server) ?? 0) + 1);
  }
  console.log(
    `measured: ${count} requests in ${
      (performance.now() - started).toFixed(0)
    } ms, ${wrong.length} wrong, by server ${
      JSON.stringify(Object.fromEntries(byServer))
    }`,
  );
  assert.deepEqual(wrong, [], context());
  assert.deepEqual([...byServer.keys()].sort(), [...servers].sort());
}
