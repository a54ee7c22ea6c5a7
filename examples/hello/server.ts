/**
 * A hello server: serves `greet(name)` and binds itself in the registry as
 * `hello` with a lease it keeps alive (`bindServer`), reporting its load
 * (calls in the last second). On SIGINT/SIGTERM it drains: its endpoint is
 * marked draining so clients stop picking it, calls under way are
 * answered, then its lease is revoked; no call is lost. SIGHUP re-reads
 * the `--tls-cert` files; without TLS it logs that there is nothing to
 * reload and goes on serving.
 *
 * ```sh
 * deno run -A examples/hello/server.ts --registry tcp://127.0.0.1:7001 --id hello-1
 * ```
 *
 * The registry URLs come from `--registry`, else `$RAFTER_REGISTRY`, else
 * `tcp://127.0.0.1:7001` (the CLI's rule). A port it cannot listen on is
 * one line on stderr and exit 1.
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  type BindServerOptions,
  DEFAULT_REGISTRY_URL,
  INVALID_PARAMS,
  RpcError,
} from "../../mod.ts";
import { connect, serve } from "../../adapter/deno/mod.ts";
import { parseListenAddress } from "../../rpc/transport/mod.ts";
import { reachFromEnv } from "./security.ts";
import { versionLine } from "../../internal/version.ts";

/** What `greet` returns: the greeting, and which server made it. */
export interface Greeting {
  greeting: string;
  server: string;
}

/** The hello service's method table, as a stub sees it. */
export interface Hello {
  greet(name: string): Greeting;
}

/**
 * The hello methods of server `id`; `onCall` is told of each call.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { helloMethods } from "./server.ts";
 * assert.deepEqual(helloMethods("hello-1").greet("Ada"), {
 *   greeting: "Hello, Ada!",
 *   server: "hello-1",
 * });
 * ```
 */
export function helloMethods(id: string, onCall?: () => void): Hello {
  return {
    greet(param: unknown): Greeting {
      // By position (greet("Ada")) or by name (greet({ name: "Ada" })).
      const name = typeof param === "object" && param !== null
        ? (param as { name?: unknown }).name
        : param;
      if (typeof name !== "string") {
        throw new RpcError(
          INVALID_PARAMS,
          'Invalid params: greet takes the name to greet: ["Ada"] or { "name": "Ada" }',
        );
      }
      onCall?.();
      return { greeting: `Hello, ${name}!`, server: id };
    },
  };
}

const USAGE = `usage: deno run -A examples/hello/server.ts [options]

  --registry URLS  registry nodes, comma-separated (default $RAFTER_REGISTRY,
                   else ${DEFAULT_REGISTRY_URL}); list 2-3 so the server
                   survives a registry node's death
  --tls-cert FILE, --tls-key FILE
                   serve TLS with this certificate and key (binds tls://)
  environment:     RAFTER_TOKEN (a token with bind on the name) and
                   RAFTER_CA (the CA of a tls:// registry), as the CLI
  --listen H:P     address to serve on (default 127.0.0.1:0, a free port)
  --advertise H    address clients dial, when listening on 0.0.0.0 or ::
  --id ID          instance id (default hello-<random>: two copies never clash);
                   one a live server holds at another URL is refused
  --name NAME      service name to bind (default hello); NAME?k=v adds attributes
  --ttl-ms N       lease TTL: a crashed server leaves lookups this soon
                   (default 10000)
  --check KIND     let the registry leader probe it: tcp or ping
  --check-interval-ms N
                   time between probes (default 1000)
  --zone ZONE      failure zone, for zone-aware distributors
  --log-keepalives print a line for each acknowledged lease keep-alive
  --watch-stdin    exit when standard input closes (for supervisors and tests)
  --help           show this text
  --version, -V    print Rafter's and the runtime's versions`;

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: Deno.args,
      options: {
        registry: { type: "string" },
        "tls-cert": { type: "string" },
        "tls-key": { type: "string" },
        listen: { type: "string", default: "127.0.0.1:0" },
        advertise: { type: "string" },
        id: { type: "string" },
        name: { type: "string", default: "hello" },
        "ttl-ms": { type: "string", default: "10000" },
        check: { type: "string" },
        "check-interval-ms": { type: "string" },
        zone: { type: "string" },
        "log-keepalives": { type: "boolean", default: false },
        "watch-stdin": { type: "boolean", default: false },
        help: { type: "boolean", default: false },
        version: { type: "boolean", short: "V", default: false },
      },
      strict: true,
    }));
  } catch (error) {
    console.error(`hello server: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.version) {
    console.log(versionLine());
    return 0;
  }
  const ttlMs = Number(values["ttl-ms"]);
  if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
    console.error(
      `hello server: --ttl-ms must be a positive integer\n\n${USAGE}`,
    );
    return 2;
  }
  if (
    values.check !== undefined && values.check !== "tcp" &&
    values.check !== "ping"
  ) {
    console.error(`hello server: --check must be tcp or ping\n\n${USAGE}`);
    return 2;
  }
  if (
    (values["tls-cert"] === undefined) !== (values["tls-key"] === undefined)
  ) {
    console.error(
      `hello server: --tls-cert and --tls-key go together\n\n${USAGE}`,
    );
    return 2;
  }
  const reach = reachFromEnv();
  let listen;
  try {
    listen = parseListenAddress(values.listen);
  } catch (error) {
    console.error(`hello server: --listen: ${(error as Error).message}`);
    return 2;
  }

  // Load: calls answered in the last second, reported with each keep-alive.
  const callTimes: number[] = [];
  const onCall = () => callTimes.push(Date.now());
  const load = () => {
    const since = Date.now() - 1000;
    while (callTimes.length > 0 && callTimes[0] < since) callTimes.shift();
    return callTimes.length;
  };

  const name = values.name;
  let id = values.id ?? `${name.split("?")[0]}-${randomHex(4)}`;
  let server;
  try {
    server = serve({
      ...listen,
      advertise: values.advertise,
      tls: values["tls-cert"] === undefined ? undefined : {
        certFile: values["tls-cert"],
        keyFile: values["tls-key"],
        onReload: (why) =>
          console.log(`${id}: reloaded its TLS certificate (${why})`),
      },
      methods: { ...helloMethods(id, onCall) },
    });
  } catch (error) {
    console.error(`hello server: ${cannotServe(values.listen, error)}`);
    return 1;
  }
  const client = connect((values.registry ?? reach.registry).split(","), {
    token: reach.token,
    tls: reach.tls,
  });
  let failing = false;
  let revoked = false;
  const options: BindServerOptions = {
    id,
    ttlMs,
    load,
    onEvent: (event) => {
      // Keep-alive trouble is logged when it starts and when it ends, not
      // once per attempt.
      if (event.type === "keepAliveFailed") {
        if (!failing) {
          failing = true;
          const why = event.error instanceof Error
            ? event.error.message
            : String(event.error);
          console.log(
            `${id}: keep-alive failed (${why}); retrying: the lease lapses after ${ttlMs} ms without one`,
          );
        }
        return;
      }
      if (failing && (event.type === "keptAlive" || event.type === "rebound")) {
        failing = false;
        console.log(`${id}: keep-alives get through again`);
      }
      if (event.type === "revoked") revoked = true;
      if (event.type === "rebound") {
        console.log(
          `${id}: bound again with lease ${event.leaseId} (${event.why})`,
        );
      } else if (event.type === "keptAlive" && values["log-keepalives"]) {
        console.log(`${id}: keep-alive acknowledged at ${Date.now()}`);
      }
    },
  };
  if (values.check !== undefined) {
    const intervalMs = Number(values["check-interval-ms"] ?? 1000);
    if (!Number.isSafeInteger(intervalMs) || intervalMs < 100) {
      console.error(
        `hello server: --check-interval-ms must be an integer >= 100\n\n${USAGE}`,
      );
      return 2;
    }
    options.check = {
      kind: values.check as "tcp" | "ping",
      intervalMs,
      timeoutMs: Math.min(500, Math.floor(intervalMs / 2)),
      failuresBeforeUnhealthy: 2,
    };
  }
  if (values.zone !== undefined) options.zone = values.zone;
  // SIGHUP (`systemctl reload`) never stops it, from before its "serving"
  // line on: with --tls-cert the TLS server re-reads the files; without,
  // one line says so.
  const onHangup = () => {
    if (values["tls-cert"] === undefined) {
      console.log(
        `${id}: SIGHUP: nothing to reload (no TLS files); still serving`,
      );
    }
  };
  const hangups = Deno.build.os !== "windows";
  if (hangups) Deno.addSignalListener("SIGHUP", onHangup);
  let binding;
  try {
    binding = await client.bindServer(name, server, options);
  } catch (error) {
    console.error(
      `hello server: cannot bind "${name}": ${(error as Error).message}`,
    );
    if (hangups) Deno.removeSignalListener("SIGHUP", onHangup);
    client.close();
    await server.close();
    return 1;
  }
  id = binding.id;
  console.log(
    `${id} serving on ${server.url}, bound as "${name}" with lease ${binding.leaseId} (ttl ${ttlMs} ms, pid ${Deno.pid})`,
  );

  const stopped = Promise.withResolvers<void>();
  let signals = 0;
  const onSignal = () => {
    // A second signal does not wait for the drain.
    if (++signals > 1) {
      console.log(`${id}: stopping now, without draining`);
      Deno.exit(130);
    }
    stopped.resolve();
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  if (values["watch-stdin"]) {
    (async () => {
      for await (const _ of Deno.stdin.readable) { /* until EOF */ }
      stopped.resolve();
    })();
  }
  await stopped.promise;
  console.log(
    `${id}: draining (clients stop picking it; calls under way finish; then its lease is revoked); a second Ctrl-C or SIGTERM stops at once`,
  );
  await binding.close(); // draining → calls under way finish → revoke
  client.close();
  if (hangups) Deno.removeSignalListener("SIGHUP", onHangup);
  console.log(
    revoked
      ? `${id} stopped`
      : `${id} stopped; its lease could not be revoked (registry unreachable?): it lapses after its ttl`,
  );
  return 0;
}

/**
 * One line on why `serve()` failed on `listen`: what, and what to do.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { cannotServe } from "./server.ts";
 * assert.equal(
 *   cannotServe("127.0.0.1:7201", new Deno.errors.AddrInUse("in use")),
 *   "cannot listen on 127.0.0.1:7201 (EADDRINUSE): another process listens there; stop it, or pass another --listen (127.0.0.1:0 picks a free port)",
 * );
 * ```
 */
export function cannotServe(listen: string, error: unknown): string {
  if (error instanceof Deno.errors.AddrInUse) {
    return `cannot listen on ${listen} (EADDRINUSE): another process listens there; stop it, or pass another --listen (127.0.0.1:0 picks a free port)`;
  }
  if (error instanceof Deno.errors.AddrNotAvailable) {
    return `cannot listen on ${listen} (EADDRNOTAVAIL): no interface of this host has that address; pass one it has, or 0.0.0.0 with --advertise`;
  }
  if (error instanceof Deno.errors.PermissionDenied) {
    return `cannot listen on ${listen} (EACCES): not permitted (a port below 1024?); pass a port above 1023`;
  }
  return `cannot serve on ${listen}: ${(error as Error).message}`;
}

function randomHex(bytes: number): string {
  return [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) =>
    b.toString(16).padStart(2, "0")
  ).join("");
}

if (import.meta.main) Deno.exit(await main());
