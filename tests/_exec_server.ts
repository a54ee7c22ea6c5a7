/**
 * A server for the stub chaos tests (not part of the public API): serves
 * `exec(callId, delayMs?)`, which appends `<callId> <server> <Date.now()>`
 * to its log file (if `--log` is given) before answering (a synchronous
 * write: a SIGKILL right after loses nothing), so a test can count how
 * often each call ran; `--extra-delay-ms` makes every call that much
 * slower (the slow server of `bench/stub.ts`). Binds itself with
 * `bindServer` (a lease), or with `--no-lease` by a plain bind that
 * outlives the process (a SIGKILL leaves the binding listed), and prints
 * "ready" once bound.
 *
 * ```sh
 * deno run -A tests/_exec_server.ts --registry URLS --id s1 --log /tmp/s1.log --ttl-ms 2000
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { connect } from "../stub/client.ts";
import { serve } from "../adapter/deno/serve.ts";
import { untilStopped } from "../examples/until_stopped.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    registry: { type: "string" },
    id: { type: "string" },
    name: { type: "string", default: "exec" },
    log: { type: "string" },
    "ttl-ms": { type: "string", default: "2000" },
    zone: { type: "string" },
    weight: { type: "string" },
    "extra-delay-ms": { type: "string", default: "0" },
    port: { type: "string", default: "0" },
    host: { type: "string", default: "127.0.0.1" },
    "watch-stdin": { type: "boolean", default: false },
    "no-lease": { type: "boolean", default: false },
  },
});
if (values.registry === undefined || values.id === undefined) {
  console.error(
    "usage: _exec_server.ts --registry URLS --id ID [--log FILE] [--extra-delay-ms N]",
  );
  Deno.exit(2);
}
const extraDelayMs = Number(values["extra-delay-ms"]);
const id = values.id;
const log = values.log;
const encoder = new TextEncoder();
let inFlight = 0;
const server = serve({
  hostname: values.host,
  port: Number(values.port),
  methods: {
    exec: async (callId: string, delayMs = 0) => {
      if (log !== undefined) {
        Deno.writeFileSync(
          log,
          encoder.encode(`${callId} ${id} ${Date.now()}\n`),
          { append: true },
        );
      }
      const waitMs = delayMs + extraDelayMs;
      inFlight++;
      try {
        if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs));
      } finally {
        inFlight--;
      }
      return { server: id, callId };
    },
  },
});
const client = connect(values.registry.split(","));
const spec = {
  id,
  zone: values.zone,
  weight: values.weight === undefined ? undefined : Number(values.weight),
};
// Lease-less: bound until unbound; a killed server's binding stays.
const binding = values["no-lease"]
  ? await client.bind(values.name, { ...spec, url: server.url }).then(() => ({
    leaseId: "none",
    close: () => client.unbind(values.name!, id).then(() => {}),
  }))
  : await client.bindServer(values.name, server, {
    ...spec,
    ttlMs: Number(values["ttl-ms"]),
    drainMs: 200,
    load: () => inFlight,
  });
console.log(`${id} ready on ${server.url} lease ${binding.leaseId}`);
await untilStopped(values["watch-stdin"]);
await binding.close();
client.close();
Deno.exit(0);
