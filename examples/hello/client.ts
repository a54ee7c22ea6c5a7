/**
 * A hello client: calls `hello.greet` through a cluster stub, once a
 * second by default, and prints which server answered.
 *
 * ```sh
 * deno run -A examples/hello/client.ts --registry tcp://127.0.0.1:7001 --count 5
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { DEFAULT_REGISTRY_URL, roundRobin } from "../../mod.ts";
import { connect } from "../../adapter/deno/mod.ts";
import { reachFromEnv } from "./security.ts";
import { versionLine } from "../../internal/version.ts";
import type { Hello } from "./server.ts";

const USAGE = `usage: deno run -A examples/hello/client.ts [options]

  --registry URLS    registry nodes, comma-separated (default $RAFTER_REGISTRY,
                     else ${DEFAULT_REGISTRY_URL})
  environment:       RAFTER_TOKEN (a token with read on the service) and
                     RAFTER_CA (the CA of tls:// registries and servers)
  --service NAME     service to call (default hello; NAME?k=v picks by attributes)
  --name TEXT        the name to greet (default Ada)
  --count N          calls to make (default 10)
  --interval-ms N    pause between calls (default 1000)
  --help             show this text
  --version, -V      print Rafter's and the runtime's versions

Exits 0 when every call succeeded, 1 otherwise.`;

function parse() {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      registry: { type: "string" },
      service: { type: "string", default: "hello" },
      name: { type: "string", default: "Ada" },
      count: { type: "string", default: "10" },
      "interval-ms": { type: "string", default: "1000" },
      help: { type: "boolean", default: false },
      version: { type: "boolean", short: "V", default: false },
    },
    strict: true,
  });
  const count = Number(values.count);
  const intervalMs = Number(values["interval-ms"]);
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new Error("--count must be a positive integer");
  }
  if (!Number.isFinite(intervalMs) || intervalMs < 0) {
    throw new Error("--interval-ms must be a number of ms >= 0");
  }
  return { ...values, count, intervalMs };
}

async function main(): Promise<number> {
  let options;
  try {
    options = parse();
  } catch (error) {
    console.error(`hello client: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (options.help) {
    console.log(USAGE);
    return 0;
  }
  if (options.version) {
    console.log(versionLine());
    return 0;
  }
  const reach = reachFromEnv();
  const client = connect((options.registry ?? reach.registry).split(","), {
    token: reach.token,
    tls: reach.tls,
  });
  const hello = client.stub<Hello>(options.service, {
    distributor: roundRobin(),
  });
  let failed = 0;
  for (let i = 0; i < options.count; i++) {
    try {
      const { greeting, server } = await hello.greet(options.name);
      console.log(`${greeting} (from ${server})`);
    } catch (error) {
      failed++;
      const message = (error as Error).message;
      // The stub's advice names the option; this program reads RAFTER_CA.
      const hint = /not trusted|UnknownIssuer/.test(message)
        ? "\n  (set RAFTER_CA to the CA certificate that signed the registry's and servers' certificates)"
        : "";
      console.error(`call failed: ${message}${hint}`);
    }
    if (i + 1 < options.count) {
      await new Promise((r) => setTimeout(r, options.intervalMs));
    }
  }
  client.close();
  return failed === 0 ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main());
