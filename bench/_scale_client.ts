/**
 * The client process of `bench/scale.ts`'s client-memory row: connects to
 * the registry, makes one call (`rpc.ping`) through a cluster stub of
 * `--name` (its cluster map is then filled by a linearizable lookup and
 * kept by a watch), waits until the watch runs, collects garbage, and
 * prints one line `result {json}` with its resident memory (MiB) and V8
 * heap in use (MiB) before connecting and after, the map's size, the time
 * to fill it (ms) and its own CPU time (ms); then exits.
 *
 * ```sh
 * deno run -A bench/_scale_client.ts --registry tcp://127.0.0.1:7001 --name scale/ten-thousand
 * ```
 *
 * @module
 */

import process from "node:process";
import { parseArgs } from "node:util";
import v8 from "node:v8";
import vm from "node:vm";
import { connect } from "../stub/client.ts";
import { firstAvailable } from "../stub/distributors/first_available.ts";
import { processRssMiB, selfCpuMs } from "./report.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    registry: { type: "string" },
    name: { type: "string" },
    "watch-stdin": { type: "boolean", default: false },
    // Through a firstAvailable() stub (calls only the first endpoint listed).
    "first-available": { type: "boolean", default: false },
  },
  strict: true,
});
if (values.registry === undefined || values.name === undefined) {
  console.error("usage: _scale_client.ts --registry URL[,URL…] --name NAME");
  Deno.exit(2);
}
const name = values.name;

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

/** Collects garbage and returns [RSS MiB, V8 heap used MiB]. */
function memory(): [number, number] {
  gc();
  gc();
  return [
    processRssMiB(Deno.pid) ?? NaN,
    process.memoryUsage().heapUsed / 2 ** 20,
  ];
}

const [rssBefore, heapBefore] = memory();
const client = connect(values.registry.split(","), { deadlineMs: 20_000 });
try {
  const started = performance.now();
  if (values["first-available"]) {
    await client.stub(name, { distributor: firstAvailable() }).$call(
      "rpc.ping",
    );
  } else await client.call(name, "rpc.ping");
  const loadMs = performance.now() - started;
  // The map is kept by a watch once it has looked the name up.
  for (let i = 0; i < 200 && client.mapAge(name)?.watched !== true; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const endpoints = client.endpointStates(name).length;
  const [rssAfter, heapAfter] = memory();
  console.log(`result ${
    JSON.stringify({
      rssBefore,
      heapBefore,
      rssAfter,
      heapAfter,
      endpoints,
      loadMs,
      watched: client.mapAge(name)?.watched === true,
      cpuMs: selfCpuMs(),
    })
  }`);
} finally {
  client.close();
}
Deno.exit(0);
