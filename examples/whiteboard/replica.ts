/**
 * One whiteboard replica: a replica of the {@link whiteboard} service
 * (Raft-replicated: every stroke acknowledged is on a majority's disks),
 * bound in the registry as `whiteboard`, and a web page on `--web-port`
 * where people draw; each page shows every stroke live (server-sent
 * events), whichever replica it was drawn on. Run three:
 *
 * ```sh
 * export RAFTER_SERVICE_SECRET=$(openssl rand -hex 32)   # the same for all
 * P=w1=127.0.0.1:7311,w2=127.0.0.1:7312,w3=127.0.0.1:7313
 * deno run -A examples/whiteboard/replica.ts --id w1 --peers $P --data data-w1 --web-port 8081 &
 * deno run -A examples/whiteboard/replica.ts --id w2 --peers $P --data data-w2 --web-port 8082 &
 * deno run -A examples/whiteboard/replica.ts --id w3 --peers $P --data data-w3 --web-port 8083 &
 * ```
 *
 * then open http://127.0.0.1:8081/ and http://127.0.0.1:8082/ side by side.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { DEFAULT_REGISTRY_URL, INVALID_PARAMS, RpcError } from "../../mod.ts";
import { connect } from "../../adapter/deno/mod.ts";
import { leader } from "../../stub/distributors/mod.ts";
import { startReplica } from "../../replicated/mod.ts";
import {
  type BoardChange,
  whiteboard,
  type WhiteboardService,
} from "./board.ts";
import { pageHtml } from "./page.ts";
import { untilStopped } from "../until_stopped.ts";
import {
  failWith,
  REPLICA_OPTIONS,
  replicaArgs,
  replicaTls,
  TLS_USAGE,
} from "../replicated/args.ts";

const USAGE =
  `usage: deno run -A examples/whiteboard/replica.ts --id ID --peers ID=HOST:PORT,... --data DIR [options]

  --id ID               this replica's id (one of --peers)
  --peers LIST          every replica's peer address, id=host:port, comma-separated
  --data DIR            this replica's data folder
  --join URL            join the running board whose replica serves RPC at URL
                        (this replica is not in the others' --peers)
  --web-port N          the web page's port (default 8080)
  --port N              the RPC client port (default: a free one)
  --registry URLS       registry nodes (default $RAFTER_REGISTRY, else ${DEFAULT_REGISTRY_URL})
  --snapshot-entries N  take a snapshot every N strokes (default 10000)
  --snapshot-trailing N log entries kept behind a snapshot (default min(5000, N))
  --tick-ms N           Raft tick (default 100)

${TLS_USAGE}

The replicas' shared secret (32+ characters) comes from $RAFTER_SERVICE_SECRET.`;

const fail: (message: string) => never = failWith(USAGE);
let parsed;
try {
  parsed = parseArgs({
    options: {
      ...REPLICA_OPTIONS,
      "web-port": { type: "string", default: "8080" },
      "snapshot-entries": { type: "string", default: "10000" },
      "snapshot-trailing": { type: "string" },
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
const client = connect(registry);

// The pages listening, and what each applied change tells them.
const pages = new Set<ReadableStreamDefaultController<Uint8Array>>();
const encoder = new TextEncoder();
const send = (
  page: ReadableStreamDefaultController<Uint8Array>,
  event: string,
  data: unknown,
) => {
  try {
    page.enqueue(
      encoder.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
    );
  } catch {
    pages.delete(page);
  }
};
const broadcast = (change: BoardChange) => {
  for (const page of pages) {
    if (change.kind === "stroke") send(page, "stroke", change.stroke);
    else if (change.kind === "clear") send(page, "clear", {});
    else send(page, "reset", change.board.strokes);
  }
};

const replica = await startReplica({
  id,
  peers,
  dataDir,
  clusterSecret: secret,
  ...replicaTls(tls),
  port: Number(values.port),
  tickMs: Number(values["tick-ms"]),
  snapshotEntries: Number(values["snapshot-entries"]),
  snapshotTrailingEntries: values["snapshot-trailing"] === undefined
    ? undefined
    : Number(values["snapshot-trailing"]),
  join: values.join === undefined ? undefined : { via: values.join.split(",") },
  service: whiteboard(broadcast),
  bind: { client, name: "whiteboard", ttlMs: 3_000 },
}).catch((error) => {
  console.error(`error: ${id}: ${error.message}`);
  client.close();
  Deno.exit(1);
});

// Writes from the pages go to the leader, wherever it is.
const board = client.stub<WhiteboardService>("whiteboard", {
  distributor: leader({ reads: ["strokes"] }),
  idempotent: true, // every write carries a requestId
  attemptTimeoutMs: 5_000,
});

async function write(
  request: Request,
  method: "stroke" | "clear",
): Promise<Response> {
  const text = await request.text();
  if (text.length > 1_000_000) {
    return Response.json({ error: "the stroke is over 1 MB" }, { status: 413 });
  }
  let params: Record<string, unknown>;
  try {
    params = JSON.parse(text);
    if (
      typeof params !== "object" || params === null || Array.isArray(params)
    ) throw 0;
  } catch {
    return Response.json({
      error: "send a JSON object: { points, color, requestId }",
    }, { status: 400 });
  }
  try {
    const seq = method === "stroke"
      ? await board.stroke(params as Parameters<WhiteboardService["stroke"]>[0])
      : await board.clear(params);
    return Response.json({ seq });
  } catch (error) {
    const invalid = error instanceof RpcError && error.code === INVALID_PARAMS;
    return Response.json({ error: (error as Error).message }, {
      status: invalid ? 400 : 503,
    });
  }
}

const web = Deno.serve({
  hostname: "127.0.0.1",
  port: Number(values["web-port"]),
  onListen: () => {},
}, (request) => {
  const { pathname } = new URL(request.url);
  if (request.method === "GET" && pathname === "/") {
    return new Response(pageHtml(id), {
      headers: { "content-type": "text/html; charset=utf-8" },
    });
  }
  if (request.method === "GET" && pathname === "/strokes") {
    return Response.json(replica.state.strokes);
  }
  if (request.method === "GET" && pathname === "/events") {
    let page: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        page = controller;
        pages.add(controller);
        send(controller, "reset", replica.state.strokes);
      },
      cancel() {
        pages.delete(page);
      },
    });
    return new Response(body, {
      headers: {
        "content-type": "text/event-stream",
        "cache-control": "no-store",
      },
    });
  }
  if (request.method === "POST" && pathname === "/stroke") {
    return write(request, "stroke");
  }
  if (request.method === "POST" && pathname === "/clear") {
    return write(request, "clear");
  }
  return new Response("not found", { status: 404 });
});
console.log(
  `${id} ready on ${replica.url} web http://127.0.0.1:${web.addr.port}/ (pid ${Deno.pid})`,
);

await untilStopped(values["watch-stdin"]);
for (const page of pages) {
  try {
    page.close();
  } catch { /* gone */ }
}
await web.shutdown();
await replica.close();
client.close();
Deno.exit(0);
