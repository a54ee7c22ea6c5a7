/**
 * A hello server for Node (20.3 or later), on the npm package
 * `@rafter/rpc`: serves `greet(name)` on TCP with `serve()` and binds
 * itself in the registry as `hello` with a lease it keeps alive
 * (`bindServer`). On SIGTERM or SIGINT it drains (its endpoint is marked
 * draining so clients stop picking it, calls under way are answered), then
 * revokes its lease and exits 0. On SIGHUP it logs that it has nothing
 * to reload (it serves no TLS) and goes on serving.
 *
 *     node server.mjs --registry tcp://127.0.0.1:7001 --id hello-node-1
 *
 * The registry URLs come from `--registry`, else `$RAFTER_REGISTRY`, else
 * `tcp://127.0.0.1:7001`. It speaks the same `greet` as the Deno hello
 * server (examples/hello), so both can serve one `hello` name.
 *
 * @module
 */

import process from "node:process";
import { createRequire } from "node:module";
import { parseArgs } from "node:util";
import {
  connect,
  DEFAULT_REGISTRY_URL,
  INVALID_PARAMS,
  RpcError,
  serve,
} from "@rafter/rpc";
import { parseListenAddress } from "@rafter/rpc/transport";

const USAGE = `usage: node server.mjs [options]

  --registry URLS  registry nodes, comma-separated (default $RAFTER_REGISTRY,
                   else ${DEFAULT_REGISTRY_URL})
  --listen H:P     address to serve on (default 127.0.0.1:0, a free port)
  --id ID          instance id (default hello-<random>)
  --name NAME      service name to bind (default hello)
  --ttl-ms N       lease TTL: a crashed server leaves lookups this soon
                   (default 10000)
  --delay-ms N     answer each call after N ms, a stand-in for real work, so
                   calls are under way when a server dies (default 0)
  --watch-stdin    drain and exit when standard input closes
  --help           show this text
  --version, -V    print Rafter's and Node's versions`;

/**
 * The methods of server `id`: `greet(name)` by position or by name,
 * answered after `delayMs` with the greeting and the server's id; `onCall`
 * counts calls.
 *
 * @param {string} id
 * @param {number} delayMs
 * @param {() => void} onCall
 */
function helloMethods(id, delayMs, onCall) {
  return {
    /** @param {unknown} param */
    async greet(param) {
      const name = typeof param === "object" && param !== null
        ? /** @type {{ name?: unknown }} */ (param).name
        : param;
      if (typeof name !== "string") {
        throw new RpcError(
          INVALID_PARAMS,
          'Invalid params: greet takes the name to greet: ["Ada"] or { "name": "Ada" }',
        );
      }
      if (delayMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      onCall();
      return { greeting: `Hello, ${name}!`, server: id };
    },
  };
}

async function main() {
  let values;
  try {
    ({ values } = parseArgs({
      args: process.argv.slice(2),
      options: {
        registry: {
          type: "string",
          default: process.env.RAFTER_REGISTRY || DEFAULT_REGISTRY_URL,
        },
        listen: { type: "string", default: "127.0.0.1:0" },
        id: { type: "string" },
        name: { type: "string", default: "hello" },
        "ttl-ms": { type: "string", default: "10000" },
        "delay-ms": { type: "string", default: "0" },
        "watch-stdin": { type: "boolean", default: false },
        help: { type: "boolean", default: false },
        version: { type: "boolean", short: "V", default: false },
      },
      strict: true,
    }));
  } catch (error) {
    console.error(`hello server: ${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.version) {
    // The installed package's own version (its package.json is exported).
    const { version } = createRequire(import.meta.url)(
      "@rafter/rpc/package.json",
    );
    console.log(`rafter ${version} (node ${process.version})`);
    return 0;
  }
  const ttlMs = Number(values["ttl-ms"]);
  if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
    console.error(`hello server: --ttl-ms must be a positive integer`);
    return 2;
  }
  const delayMs = Number(values["delay-ms"]);
  if (!Number.isFinite(delayMs) || delayMs < 0) {
    console.error(`hello server: --delay-ms must be a number of ms >= 0`);
    return 2;
  }
  let listen;
  try {
    listen = parseListenAddress(values.listen);
  } catch (error) {
    console.error(`hello server: --listen: ${error.message}`);
    return 2;
  }

  const id = values.id ??
    `hello-${Math.floor(Math.random() * 2 ** 32).toString(16)}`;
  let calls = 0;
  // Node binds asynchronously: serve() resolves once it listens.
  const server = await serve({
    ...listen,
    methods: helloMethods(id, delayMs, () => calls++),
  });
  const client = connect(values.registry.split(","));
  // SIGHUP (`systemctl reload`) would end Node; it serves no TLS, so there
  // is nothing to reload: one line says so and it goes on serving (from
  // before its "serving" line on).
  const onHangup = () =>
    console.log(
      `${id}: SIGHUP: nothing to reload (no TLS files); still serving`,
    );
  const hangups = process.platform !== "win32";
  if (hangups) process.on("SIGHUP", onHangup);
  let binding;
  try {
    binding = await client.bindServer(values.name, server, { id, ttlMs });
  } catch (error) {
    console.error(
      `hello server: cannot bind "${values.name}": ${error.message}`,
    );
    if (hangups) process.off("SIGHUP", onHangup);
    client.close();
    await server.close();
    return 1;
  }
  console.log(
    `${id} serving on ${server.url}, bound as "${values.name}" with lease ${binding.leaseId} (ttl ${ttlMs} ms)`,
  );

  const { promise: stopped, resolve: stop } = deferred();
  let signals = 0;
  const onSignal = () => {
    // A second signal does not wait for the drain.
    if (++signals > 1) process.exit(130);
    stop();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  if (values["watch-stdin"]) {
    process.stdin.on("end", stop).on("close", stop).resume();
  }
  await stopped;
  console.log(`${id}: draining after ${calls} calls`);
  await binding.close(); // draining → calls under way finish → revoke
  client.close();
  if (hangups) process.off("SIGHUP", onHangup);
  console.log(`${id} stopped; it answered ${calls} calls`);
  return 0;
}

/** A promise and the function that resolves it. */
function deferred() {
  /** @type {() => void} */
  let resolve = () => {};
  const promise = new Promise((r) => resolve = () => r(undefined));
  return { promise, resolve };
}

process.exit(await main());
