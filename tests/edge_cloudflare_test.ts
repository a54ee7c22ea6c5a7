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
import {
  answers,
  bundleWorker,
  CLOUDFLARE_EXAMPLE,
  greetThrough,
  installWorkerd,
} from "./_edge_fixtures.ts";

const EXAMPLE = CLOUDFLARE_EXAMPLE;
const REQUESTS = 200;

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
    const origin = `http://127.0.0.1:${port}`;
    assert.ok(
      await answers(`${origin}/?name=ready`, 100),
      `workerd did not answer: ${logs.join("")}`,
    );

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
      const answer = await greetThrough(origin, `n${i}`);
      if ("wrong" in answer) {
        wrong.push(answer.wrong);
        continue;
      }
      const phase = i < REQUESTS / 2 ? byServer.before : byServer.after;
      phase.set(answer.server, (phase.get(answer.server) ?? 0) + 1);
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
