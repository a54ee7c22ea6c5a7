/**
 * A server for the stub chaos tests (not part of the public API): serves
 * `exec(callId, delayMs?)`, which appends `<callId> <server> <Date.now()>`
 * to its log file before answering (a synchronous write: a SIGKILL right
 * after loses nothing), so a test can count how often each call ran.
 * Binds itself with `bindServer` (a lease) and prints "ready" once bound.
 *
 * ```sh
 * deno run -A tests/_exec_server.ts --registry URLS --id s1 --log /tmp/s1.log --ttl-ms 2000
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { connect } from "../stub/client.ts";
import { serve } from "../rpc/serve.ts";

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
    "watch-stdin": { type: "boolean", default: false },
  },
});
if (
  values.registry === undefined || values.id === undefined ||
  values.log === undefined
) {
  console.error("usage: _exec_server.ts --registry URLS --id ID --log FILE");
  Deno.exit(2);
}
const id = values.id;
const log = values.log;
const encoder = new TextEncoder();
const server = serve({
  methods: {
    exec: async (callId: string, delayMs = 0) => {
      Deno.writeFileSync(
        log,
        encoder.encode(`${callId} ${id} ${Date.now()}\n`),
        {
          append: true,
        },
      );
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      return { server: id, callId };
    },
  },
});
const client = connect(values.registry.split(","));
const binding = await client.bindServer(values.name, server, {
  id,
  ttlMs: Number(values["ttl-ms"]),
  zone: values.zone,
  weight: values.weight === undefined ? undefined : Number(values.weight),
  drainMs: 200,
});
console.log(`${id} ready on ${server.url} lease ${binding.leaseId}`);
const stop = Promise.withResolvers<void>();
Deno.addSignalListener("SIGTERM", () => stop.resolve());
Deno.addSignalListener("SIGINT", () => stop.resolve());
if (values["watch-stdin"]) {
  (async () => {
    for await (const _ of Deno.stdin.readable) { /* until EOF */ }
    stop.resolve();
  })();
}
await stop.promise;
await binding.close();
client.close();
Deno.exit(0);
