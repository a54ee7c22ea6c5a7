/**
 * One replica of the replicated counter ({@link counter}): run three, each
 * with its own id and data folder and the same `--peers` list and secret;
 * each binds itself in the registry under `counter`.
 *
 * ```sh
 * export RAFTER_SERVICE_SECRET=$(openssl rand -hex 32)   # the same for all three
 * P=c1=127.0.0.1:7301,c2=127.0.0.1:7302,c3=127.0.0.1:7303
 * deno run -A examples/replicated/replica.ts --id c1 --peers $P --data data-c1 &
 * deno run -A examples/replicated/replica.ts --id c2 --peers $P --data data-c2 &
 * deno run -A examples/replicated/replica.ts --id c3 --peers $P --data data-c3 &
 * ```
 *
 * The registry URLs come from `--registry`, else `$RAFTER_REGISTRY`, else
 * `tcp://127.0.0.1:7001`; `--no-bind` serves without binding. The client
 * port is `--port` (default: a free one), printed in the `ready` line.
 * SIGINT/SIGTERM unbind (draining) and stop; the data folder stays, and a
 * replica started again on it catches up from the others.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { DEFAULT_REGISTRY_URL } from "../../mod.ts";
import { connect } from "../../adapter/deno/mod.ts";
import { startReplica } from "../../replicated/mod.ts";
import { counter } from "./counter.ts";
import { untilStopped } from "../until_stopped.ts";
import {
  failWith,
  REPLICA_OPTIONS,
  replicaArgs,
  replicaTls,
  TLS_USAGE,
} from "./args.ts";

const USAGE =
  `usage: deno run -A examples/replicated/replica.ts --id ID --peers ID=HOST:PORT,... --data DIR [options]

  --id ID          this replica's id (one of --peers)
  --peers LIST     every replica's peer address: id=host:port, comma-separated
  --data DIR       this replica's data folder
  --port N         client port (default: a free one)
  --host ADDR      client port's address (default 127.0.0.1)
  --registry URLS  registry nodes (default $RAFTER_REGISTRY, else ${DEFAULT_REGISTRY_URL})
  --name NAME      name to bind under (default counter)
  --no-bind        do not bind in a registry
  --leave          leave the service for good when stopped (SIGINT/SIGTERM)
  --join URLS      join the running service one of whose replicas serves
                   RPC at URL (comma-separated); --peers then lists only
                   this replica
  --tick-ms N      Raft tick (default 100)

${TLS_USAGE}

The replicas' shared secret (32+ characters) comes from $RAFTER_SERVICE_SECRET.`;

const fail: (message: string) => never = failWith(USAGE);
let parsed;
try {
  parsed = parseArgs({
    options: {
      ...REPLICA_OPTIONS,
      host: { type: "string", default: "127.0.0.1" },
      name: { type: "string", default: "counter" },
      "no-bind": { type: "boolean", default: false },
      leave: { type: "boolean", default: false },
    },
  });
} catch (error) {
  fail((error as Error).message);
}
const { values } = parsed;
if (values.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const { id, dataDir, peers, secret, registry, tls } = replicaArgs(
  values,
  fail,
);
const client = values["no-bind"] ? undefined : connect(registry);

const replica = await startReplica({
  id,
  peers,
  dataDir,
  clusterSecret: secret,
  ...replicaTls(tls),
  hostname: values.host,
  port: Number(values.port),
  tickMs: Number(values["tick-ms"]),
  service: counter,
  join: values.join === undefined ? undefined : { via: values.join.split(",") },
  bind: client === undefined
    ? undefined
    : { client, name: values.name, ttlMs: 3_000 },
}).catch((error) => {
  console.error(`error: ${id}: ${error.message}`);
  client?.close();
  Deno.exit(1);
});
console.log(
  `${id} ready on ${replica.url} (peer port ${replica.peerUrl}, pid ${Deno.pid})`,
);

await untilStopped(values["watch-stdin"]);
if (values.leave) {
  await replica.leave().catch((error) => {
    console.error(`error: ${id}: could not leave: ${error.message}`);
  });
}
await replica.close();
client?.close();
Deno.exit(0);
