/**
 * A hello client for Node (20.3 or later), on the npm package
 * `@rafter/rpc`: calls `greet` on the servers bound as `hello` through a
 * cluster stub (round robin; `greet` is idempotent, so a call caught by a
 * server's crash runs again on another), `--count` times, and prints each
 * result.
 *
 *     node client.mjs --registry tcp://127.0.0.1:7001 --count 5
 *     node client.mjs --count 200 --interval-ms 10 --json   # a JSON line per call
 *
 * The registry URLs come from `--registry`, else `$RAFTER_REGISTRY`, else
 * `tcp://127.0.0.1:7001`. Exits 0 when every call got its greeting, 1
 * otherwise.
 *
 * @module
 */

import process from "node:process";
import { createRequire } from "node:module";
import { parseArgs } from "node:util";
import { connect, DEFAULT_REGISTRY_URL, roundRobin } from "@rafter/rpc";

const USAGE = `usage: node client.mjs [options]

  --registry URLS    registry nodes, comma-separated (default
                     $RAFTER_REGISTRY, else ${DEFAULT_REGISTRY_URL})
  --service NAME     service to call (default hello)
  --name TEXT        the name to greet; call i greets TEXT-i (default Ada)
  --count N          calls to make, one after another (default 10)
  --interval-ms N    pause between calls (default 0)
  --json             one JSON line per call and a summary line:
                     {"call","ok","greeting","server","startedAt","ms"}
  --help             show this text
  --version, -V      print Rafter's and Node's versions`;

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
        service: { type: "string", default: "hello" },
        name: { type: "string", default: "Ada" },
        count: { type: "string", default: "10" },
        "interval-ms": { type: "string", default: "0" },
        json: { type: "boolean", default: false },
        help: { type: "boolean", default: false },
        version: { type: "boolean", short: "V", default: false },
      },
      strict: true,
    }));
  } catch (error) {
    console.error(`hello client: ${error.message}\n\n${USAGE}`);
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
  const count = Number(values.count);
  const intervalMs = Number(values["interval-ms"]);
  if (!Number.isSafeInteger(count) || count < 1) {
    console.error("hello client: --count must be a positive integer");
    return 2;
  }
  if (!Number.isFinite(intervalMs) || intervalMs < 0) {
    console.error("hello client: --interval-ms must be a number of ms >= 0");
    return 2;
  }

  const client = connect(values.registry.split(","));
  const hello = client.stub(values.service, {
    distributor: roundRobin(),
    idempotent: ["greet"],
  });
  /** @type {Record<string, number>} */
  const byServer = {};
  let failed = 0;
  for (let call = 1; call <= count; call++) {
    const name = `${values.name}-${call}`;
    const startedAt = Date.now();
    const started = performance.now();
    let line;
    try {
      const { greeting, server } = await hello.greet(name);
      const ms = Math.round((performance.now() - started) * 1000) / 1000;
      const ok = greeting === `Hello, ${name}!`;
      if (ok) byServer[server] = (byServer[server] ?? 0) + 1;
      else failed++;
      line = values.json
        ? JSON.stringify({ call, ok, greeting, server, startedAt, ms })
        : `${call} ${greeting} (from ${server}, ${ms} ms)${
          ok ? "" : " WRONG GREETING"
        }`;
    } catch (error) {
      failed++;
      line = values.json
        ? JSON.stringify({
          call,
          ok: false,
          error: String(error?.message ?? error),
          code: error?.code,
          startedAt,
        })
        : `${call} failed: ${error?.message ?? error}`;
    }
    console.log(line);
    if (call < count && intervalMs > 0) {
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
  client.close();
  const summary = { calls: count, ok: count - failed, failed, byServer };
  console.log(
    values.json
      ? JSON.stringify({ summary })
      : `${count - failed} of ${count} calls answered: ${
        Object.entries(byServer).map(([id, n]) => `${id}=${n}`).join(" ")
      }`,
  );
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main();
