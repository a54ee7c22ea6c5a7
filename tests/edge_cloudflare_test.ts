/**
 * The Cloudflare example in a real workerd (installed from npm): 200 HTTP
 * requests, each calling `hello` through a Rafter stub from inside the
 * worker, while one of the two hello servers is SIGKILLed midway.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const EXAMPLE = `${ROOT}examples/edge/cloudflare`;
/** The workerd release this test runs (npm `workerd`). */
const WORKERD_VERSION = "1.20261117.1";
const REQUESTS = 200;

/**
 * Installs workerd from npm into a folder of its own; returns its binary:
 * the platform package's own (where npm skipped the install script,
 * `.bin/workerd` is a Node wrapper that does not pass SIGTERM on).
 */
async function installWorkerd(): Promise<string> {
  const prefix = `${ROOT}node_modules/.rafter-workerd-${WORKERD_VERSION}`;
  const arch = Deno.build.arch === "x86_64" ? "64" : "arm64";
  const candidates = [
    `${prefix}/node_modules/@cloudflare/workerd-${Deno.build.os}-${arch}/bin/workerd`,
    `${prefix}/node_modules/.bin/workerd`,
  ];
  const installed = async () => {
    for (const binary of candidates) {
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
  const npm = await new Deno.Command("npm", {
    args: [
      "install",
      "--no-audit",
      "--no-fund",
      "--no-save",
      "--prefix",
      prefix,
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
  const binary = await installed();
  assert.ok(binary !== null, "npm installed no workerd binary");
  return binary;
}

/** Bundles the worker into `dir`/worker.js with `deno bundle`. */
async function bundleWorker(dir: string): Promise<void> {
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
      `${EXAMPLE}/worker.ts`,
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(bundle.code, 0, new TextDecoder().decode(bundle.stderr));
}

Deno.test({
  name:
    "Cloudflare example in workerd: 200 requests through a stub, one hello server SIGKILLed midway, every answer right, no workerd error or warning",
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const workerd = await installWorkerd();
  const dir = await Deno.makeTempDir({ prefix: "rafter_workerd_" });
  const cluster = new LocalCluster();
  let worker: Deno.ChildProcess | undefined;
  const logs: string[] = [];
  try {
    await bundleWorker(dir);
    await cluster.startRegistryWithLeader(1);
    const hello1 = await cluster.startHello("hello-1");
    await cluster.startHello("hello-2");
    const [port] = freePorts(1);
    const template = await Deno.readTextFile(
      `${EXAMPLE}/config.capnp.template`,
    );
    await Deno.writeTextFile(
      `${dir}/config.capnp`,
      template.replaceAll("@PORT@", String(port)).replaceAll(
        "@REGISTRY@",
        cluster.registryUrls.join(","),
      ),
    );
    worker = new Deno.Command(workerd, {
      // --verbose: rejected or hanging background work shows as
      // "uncaught exception" info lines, which the end of the test rejects.
      args: ["serve", "--verbose", `${dir}/config.capnp`],
      cwd: dir,
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const collect = async (stream: ReadableStream<Uint8Array>) => {
      for await (
        const text of stream.pipeThrough(new TextDecoderStream())
      ) logs.push(text);
    };
    const collecting = [collect(worker.stdout), collect(worker.stderr)];
    const base = `http://127.0.0.1:${port}/`;
    // workerd is up once it answers (bounded: 100 tries, 10 s).
    let up = false;
    for (let i = 0; i < 100 && !up; i++) {
      try {
        await (await fetch(`${base}?name=ready`)).body?.cancel();
        up = true;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    assert.ok(up, `workerd did not answer: ${logs.join("")}`);

    const byServer = {
      before: new Map<string, number>(),
      after: new Map<string, number>(),
    };
    const wrong: string[] = [];
    let killedAt = 0;
    let firstAfterKill: number | null = null;
    for (let i = 0; i < REQUESTS; i++) {
      if (i === REQUESTS / 2) {
        await cluster.kill("hello-1");
        killedAt = performance.now();
      }
      const response = await fetch(`${base}?name=n${i}`, {
        signal: AbortSignal.timeout(10_000),
      });
      const body = await response.json();
      if (response.status !== 200 || body.greeting !== `Hello, n${i}!`) {
        wrong.push(`${i}: ${response.status} ${JSON.stringify(body)}`);
        continue;
      }
      const phase = i < REQUESTS / 2 ? byServer.before : byServer.after;
      phase.set(body.server, (phase.get(body.server) ?? 0) + 1);
      if (i >= REQUESTS / 2 && firstAfterKill === null) {
        firstAfterKill = performance.now() - killedAt;
      }
    }
    console.log(
      `measured: ${REQUESTS} requests, ${wrong.length} wrong; before the kill ${
        JSON.stringify(Object.fromEntries(byServer.before))
      }, after ${
        JSON.stringify(Object.fromEntries(byServer.after))
      }; first answer ${
        firstAfterKill?.toFixed(1)
      } ms after the SIGKILL of ${hello1.name} (pid ${hello1.pid})`,
    );
    assert.deepEqual(wrong, []);
    assert.ok((byServer.before.get("hello-1") ?? 0) > 0);
    assert.ok((byServer.before.get("hello-2") ?? 0) > 0);
    assert.deepEqual([...byServer.after.keys()], ["hello-2"]);
    assert.equal(byServer.after.get("hello-2"), REQUESTS / 2);
    // SIGTERM, and SIGKILL if it has not stopped within 5 s.
    worker.kill("SIGTERM");
    const grace = setTimeout(() => worker?.kill("SIGKILL"), 5_000);
    const status = await worker.status;
    clearTimeout(grace);
    assert.equal(status.signal, null, "workerd stopped on SIGTERM");
    await Promise.all(collecting);
    worker = undefined;
    // The SIGKILL itself may log a reset connection (an info line); any
    // other line is an error, a warning or lost work.
    const output = logs.join("").split("\n")
      .filter((line) =>
        line.trim() !== "" && !/Connection reset by peer/.test(line)
      );
    assert.deepEqual(
      output.filter((line) =>
        /error|warning|hung|hanging|canceled|uncaught/i.test(line)
      ),
      [],
      `workerd logged:\n${output.join("\n")}`,
    );
  } finally {
    if (worker !== undefined) {
      try {
        worker.kill("SIGKILL");
      } catch {
        // Already gone.
      }
      await worker.status;
    }
    await cluster.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
