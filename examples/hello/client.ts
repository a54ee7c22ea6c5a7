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
import { connect, roundRobin } from "../../mod.ts";
import type { Hello } from "./server.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    registry: { type: "string", default: "tcp://127.0.0.1:7001" },
    name: { type: "string", default: "Ada" },
    count: { type: "string", default: "10" },
    "interval-ms": { type: "string", default: "1000" },
  },
});

const client = connect(values.registry.split(","));
const hello = client.stub<Hello>("hello", { distributor: roundRobin() });
const count = Number(values.count);
let failed = 0;
for (let i = 0; i < count; i++) {
  try {
    const { greeting, server } = await hello.greet(values.name);
    console.log(`${greeting} (from ${server})`);
  } catch (error) {
    failed++;
    console.error(`call failed: ${(error as Error).message}`);
  }
  if (i + 1 < count) {
    await new Promise((r) => setTimeout(r, Number(values["interval-ms"])));
  }
}
client.close();
Deno.exit(failed === 0 ? 0 : 1);
