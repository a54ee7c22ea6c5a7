/**
 * Takes a replica that died for good out of a running replicated service
 * (a live replica leaves by itself with `--leave`):
 *
 * ```sh
 * RAFTER_SERVICE_SECRET=... deno run -A examples/replicated/remove.ts --via tcp://127.0.0.1:PORT --id c3
 * ```
 *
 * `--via` is the client URL of any live replica (comma-separated for
 * several); the secret is the replicas' own.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { removeReplica } from "../../replicated/mod.ts";

const USAGE =
  "usage: RAFTER_SERVICE_SECRET=... deno run -A examples/replicated/remove.ts --via URLS --id ID";
let values;
try {
  ({ values } = parseArgs({
    options: { via: { type: "string" }, id: { type: "string" } },
  }));
} catch (error) {
  console.error(`error: ${(error as Error).message}\n${USAGE}`);
  Deno.exit(2);
}
const secret = Deno.env.get("RAFTER_SERVICE_SECRET");
if (values.via === undefined || values.id === undefined || !secret) {
  console.error(USAGE);
  Deno.exit(2);
}
try {
  await removeReplica({
    via: values.via.split(","),
    id: values.id,
    clusterSecret: secret,
  });
  console.log(`removed ${values.id}`);
} catch (error) {
  console.error(`error: ${(error as Error).message}`);
  Deno.exit(1);
}
