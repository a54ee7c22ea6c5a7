/**
 * Edge mode in a real workerd (npm `workerd`): concurrent requests of one
 * isolate share one lookup through plain data (`share: "poll"`, the
 * default of `edgeClient()`), a request whose lookup others wait on may
 * end early without anyone hanging, and a stale list is served while
 * `ctx.waitUntil` refreshes it. A fake registry on 127.0.0.1 counts the
 * lookups and holds its answers, so the requests surely overlap.
 *
 * The worker runs twice in one workerd, under a current compatibility date
 * and under 2024-01-01 (before `handle_cross_request_promise_resolution`,
 * when a promise whose request ended never settles): sharing through
 * plain data does not depend on either.
 *
 * @module
 */

import assert from "node:assert/strict";
import { serve } from "../adapter/deno/serve.ts";
import { freePorts } from "../testing/ports.ts";
import { waitFor } from "../testing/time.ts";
import {
  type CountingRegistry,
  countingRegistry,
} from "../testing/counting_registry.ts";
import { answers, bundleWorker, installWorkerd } from "./_edge_fixtures.ts";

const WORKER = new URL("./edge/share_worker.ts", import.meta.url).pathname;
/** Concurrent cold requests. */
const N = 16;
/** The stubs lists' TTL in the worker, ms. */
const TTL_MS = 500;
const DATES = { current: "2026-11-01", old: "2024-01-01" } as const;
const MODES = ["off", "poll", "promise"] as const;
const NAMES = [...MODES, "poll-early", "promise-early", "stale"];

/** The workerd config: one worker per compatibility date, each on a port. */
function config(ports: Record<string, number>, registry: string): string {
  const workers = Object.entries(DATES).map(([key, date]) => `
const ${key} :Workerd.Worker = (
  modules = [ (name = "worker", esModule = embed "dist/worker.js") ],
  compatibilityDate = "${date}",
  bindings = [
    (name = "RAFTER_REGISTRY", text = "${registry}"),
    (name = "TTL_MS", text = "${TTL_MS}"),
  ],
);`).join("\n");
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    ${
    Object.keys(DATES).map((key) => `(name = "${key}", worker = .${key}),`)
      .join("\n    ")
  }
    (name = "internet", network = ( allow = ["public", "private", "local"] )),
  ],
  sockets = [
    ${
    Object.keys(DATES).map((key) =>
      `(name = "${key}", address = "127.0.0.1:${
        ports[key]
      }", http = (), service = "${key}"),`
    ).join("\n    ")
  }
  ],
);
${workers}
`;
}

/** The scenarios, against the worker at `origin`; its figures. */
async function scenarios(
  origin: string,
  registry: CountingRegistry,
  prefix: string,
): Promise<Record<string, number>> {
  const svc = (name: string) => `${prefix}-${name}`;
  const get = async (path: string) => {
    const response = await fetch(`${origin}${path}`, {
      signal: AbortSignal.timeout(20_000),
    });
    return { status: response.status, body: await response.json() };
  };
  const stats = async (name: string, cache = "poll") =>
    (await get(`/stats?svc=${svc(name)}&cache=${cache}`)).body as {
      entered: number;
      fresh: number | null;
      lookingUp: boolean;
    };
  const greet = (name: string, query = "") => get(`/?svc=${svc(name)}${query}`);
  const ok = (name: string) => ({ status: 200, body: { answer: svc(name) } });
  /** N requests at once while the registry holds its answers. */
  const cold = async (name: typeof MODES[number]) => {
    registry.hold();
    const entered = (await stats(name, name)).entered;
    const answered = Array.from(
      { length: N },
      () => greet(name, `&cache=${name}`),
    );
    let seen = 0;
    await waitFor(
      async () => {
        seen = (await stats(name, name)).entered;
        return seen === entered + N;
      },
      `${N} requests in the worker (${prefix})`,
      20_000,
    );
    await waitFor(
      () => registry.received(svc(name)) === (name === "off" ? N : 1),
      `the ${name} lookups (${prefix})`,
      20_000,
    );
    registry.release();
    assert.deepEqual(await Promise.all(answered), Array(N).fill(ok(name)));
    return registry.received(svc(name));
  };
  const figures: Record<string, number> = {};
  for (const mode of MODES) figures[`lookupsShare_${mode}`] = await cold(mode);
  assert.deepEqual(
    [
      figures.lookupsShare_off,
      figures.lookupsShare_poll,
      figures.lookupsShare_promise,
    ],
    [N, 1, 1],
  );

  // The request others wait on ends early (its deadline passes while its
  // lookup is held, and its client closes): they look up themselves, one
  // for all, and nobody hangs.
  for (const mode of ["poll", "promise"]) {
    const name = `${mode}-early`;
    registry.hold();
    const owner = greet(name, `&cache=${mode}&deadlineMs=300`);
    await waitFor(
      () => registry.received(svc(name)) === 1,
      "the owner's lookup",
      20_000,
    );
    const others = Array.from(
      { length: 4 },
      () => greet(name, `&cache=${mode}`),
    );
    const ownerAnswer = await owner;
    assert.equal(ownerAnswer.status, 502, JSON.stringify(ownerAnswer));
    await waitFor(
      () => registry.received(svc(name)) === 2,
      "one of the others to look up",
      20_000,
    );
    registry.release();
    assert.deepEqual(await Promise.all(others), Array(4).fill(ok(name)));
    figures[`lookupsOwnerEndedEarly_${mode}`] = registry.received(svc(name));
    assert.equal(registry.received(svc(name)), 2);
  }

  // Stale-while-revalidate through ctx.waitUntil.
  assert.deepEqual(await greet("stale"), ok("stale"));
  assert.equal(registry.received(svc("stale")), 1);
  const first = (await stats("stale")).fresh;
  assert.equal(first, registry.revision());
  await new Promise((r) => setTimeout(r, TTL_MS + 100));
  assert.equal((await stats("stale")).fresh, null);
  registry.hold();
  registry.list(svc("stale"), [HELLO_URL!]); // a new revision
  // Answered from the stale list while its refresh is held.
  assert.deepEqual(await greet("stale"), ok("stale"));
  assert.equal(registry.received(svc("stale")), 2);
  assert.equal(registry.held(), 1);
  assert.equal((await stats("stale")).lookingUp, true);
  registry.release();
  await waitFor(
    async () => (await stats("stale")).fresh === registry.revision(),
    "the refresh (in waitUntil) to store the new list",
    20_000,
  );
  assert.equal((await stats("stale")).lookingUp, false);
  figures.lookupsStale = registry.received(svc("stale"));
  assert.equal(figures.lookupsStale, 2);
  return figures;
}

let HELLO_URL: string | undefined;

Deno.test({
  name:
    "edge mode in workerd: N concurrent cold requests make 1 lookup through plain data, a request that ends early strands nobody, a stale list is served while ctx.waitUntil refreshes it; no workerd error or warning",
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const workerd = await installWorkerd();
  const dir = await Deno.makeTempDir({ prefix: "rafter_workerd_share_" });
  const hello = serve({ methods: { greet: (name: string) => name } });
  HELLO_URL = hello.url;
  const lists: Record<string, string[]> = {};
  for (const prefix of Object.keys(DATES)) {
    for (const name of NAMES) lists[`${prefix}-${name}`] = [hello.url];
  }
  const registry = countingRegistry(lists);
  let worker: Deno.ChildProcess | undefined;
  const logs: string[] = [];
  try {
    await bundleWorker(dir, WORKER);
    const [current, old] = freePorts(2);
    await Deno.writeTextFile(
      `${dir}/config.capnp`,
      config({ current, old }, registry.url),
    );
    worker = new Deno.Command(workerd, {
      args: ["serve", "--verbose", `${dir}/config.capnp`],
      cwd: dir,
      env: { PWD: dir },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const collect = async (stream: ReadableStream<Uint8Array>) => {
      for await (
        const text of stream.pipeThrough(new TextDecoderStream())
      ) logs.push(text);
    };
    const collecting = [collect(worker.stdout), collect(worker.stderr)];
    for (const [prefix, port] of Object.entries({ current, old })) {
      const origin = `http://127.0.0.1:${port}`;
      assert.ok(
        await answers(`${origin}/stats`, 100),
        `workerd did not answer: ${logs.join("")}`,
      );
      const figures = await scenarios(origin, registry, prefix);
      console.log(
        `measured (workerd, compatibility date ${
          DATES[prefix as keyof typeof DATES]
        }): ${JSON.stringify(figures)} with N = ${N}`,
      );
    }
    worker.kill("SIGTERM");
    const grace = setTimeout(() => worker?.kill("SIGKILL"), 5_000);
    const status = await worker.status;
    clearTimeout(grace);
    assert.equal(status.signal, null, "workerd stopped on SIGTERM");
    await Promise.all(collecting);
    worker = undefined;
    const output = logs.join("").split("\n").filter((line) =>
      line.trim() !== ""
    );
    assert.deepEqual(
      output.filter((line) =>
        /error|warning|hung|hanging|canceled|uncaught|context/i.test(line)
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
    await registry.close();
    await hello.close();
    await Deno.remove(dir, { recursive: true });
  }
});

const PROBE = new URL("./edge/promise_probe_worker.js", import.meta.url)
  .pathname;

/**
 * Why `edgeClient()` shares through plain data: what workerd does when a
 * request awaits a promise that another request's I/O settles.
 */
Deno.test({
  name:
    "workerd: a promise another request's I/O settles reaches its waiters while that request lives; once it ended, waiters get a rejection (current date) or hang (2024-01-01); nothing is logged",
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const workerd = await installWorkerd();
  const dir = await Deno.makeTempDir({ prefix: "rafter_workerd_probe_" });
  let served = 0;
  let inFlight = 0;
  const slow = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      inFlight++;
      const ms = Number(new URL(request.url).searchParams.get("ms"));
      await new Promise((r) => setTimeout(r, ms));
      inFlight--;
      return new Response(`r${++served}`);
    },
  );
  let worker: Deno.ChildProcess | undefined;
  const logs: string[] = [];
  try {
    await Deno.copyFile(PROBE, `${dir}/probe.js`);
    const ports = freePorts(2);
    const keys = Object.keys(DATES) as (keyof typeof DATES)[];
    await Deno.writeTextFile(
      `${dir}/config.capnp`,
      `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    ${keys.map((key) => `(name = "${key}", worker = .${key}),`).join("\n    ")}
    (name = "internet", network = ( allow = ["public", "private", "local"] )),
  ],
  sockets = [
    ${
        keys.map((key, i) =>
          `(name = "${key}", address = "127.0.0.1:${
            ports[i]
          }", http = (), service = "${key}"),`
        ).join("\n    ")
      }
  ],
);
${
        keys.map((key) => `
const ${key} :Workerd.Worker = (
  modules = [ (name = "worker", esModule = embed "probe.js") ],
  compatibilityDate = "${DATES[key]}",
  bindings = [ (name = "SLOW", text = "http://127.0.0.1:${slow.addr.port}") ],
);`).join("\n")
      }
`,
    );
    worker = new Deno.Command(workerd, {
      args: ["serve", "--verbose", `${dir}/config.capnp`],
      cwd: dir,
      env: { PWD: dir },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const collect = async (stream: ReadableStream<Uint8Array>) => {
      for await (
        const text of stream.pipeThrough(new TextDecoderStream())
      ) logs.push(text);
    };
    const collecting = [collect(worker.stdout), collect(worker.stderr)];
    const outcomes: Record<string, Record<string, string[]>> = {};
    for (const [i, key] of keys.entries()) {
      const origin = `http://127.0.0.1:${ports[i]}`;
      const text = async (path: string) =>
        await (await fetch(`${origin}${path}`, {
          signal: AbortSignal.timeout(10_000),
        })).text();
      assert.ok(
        await answers(`${origin}/start?key=ready`, 100),
        `workerd did not answer: ${logs.join("")}`,
      );
      // The owner awaits its own fetch while two others await it too.
      const before = served;
      const owner = text("/start?key=alive&own=1");
      // Its fetch is under way (the slow server counts when it answers):
      // the promise is set.
      await waitFor(() => inFlight > 0, "the owner's fetch", 20_000);
      const alive = await Promise.all([
        text("/await?key=alive"),
        text("/await?key=alive"),
      ]);
      assert.match(await owner, /^own:r\d+$/);
      assert.equal(served, before + 1);
      // The owner ends before its fetch settles.
      assert.equal(await text("/start?key=ended"), "started");
      const ended = await Promise.all([
        text("/await?key=ended"),
        text("/await?key=ended"),
      ]);
      outcomes[key] = { alive, ended };
    }
    console.log(`measured: ${JSON.stringify(outcomes)}`);
    for (const key of keys) {
      for (const seen of outcomes[key].alive) {
        assert.match(seen, /^settled:r\d+$/);
      }
    }
    for (const seen of outcomes.current.ended) {
      assert.match(
        seen,
        /^rejected:Error: This promise was created by a request that has since ended/,
      );
    }
    assert.deepEqual(outcomes.old.ended, ["timeout", "timeout"]);
    worker.kill("SIGTERM");
    const grace = setTimeout(() => worker?.kill("SIGKILL"), 5_000);
    await worker.status;
    clearTimeout(grace);
    await Promise.all(collecting);
    worker = undefined;
    // workerd (--verbose) logs no warning about the cross-request promise.
    const output = logs.join("").split("\n");
    assert.deepEqual(
      output.filter((line) =>
        /error|warn|promise|context|hung|hanging|canceled|uncaught/i.test(line)
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
    await slow.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});
