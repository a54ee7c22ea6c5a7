/**
 * `rafter`, the command line of Rafter (`deno task rafter …`, or
 * `deno run -A cli/main.ts …`): run a registry node, look at the registry,
 * change it, and call services through a cluster stub, as etcdctl and
 * grpcurl do.
 *
 * Tables for people by default, `--json` for scripts. Exit codes: 0 done;
 * 1 the registry or the service answered with an error; 2 bad usage;
 * 3 no registry node could be reached (or none answered in time);
 * 4 not found (a lookup with no endpoint, an unknown lease, nothing bound
 * under the name called); 130 interrupted.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { connect, type RafterClient } from "../stub/client.ts";
import { CANCELLED, DEADLINE_EXCEEDED, RpcError } from "../rpc/errors.ts";
import {
  DEFAULT_REGISTRY_URL,
  type Endpoint,
  LEASE_NOT_FOUND,
  NO_ENDPOINTS,
  NOT_LEADER,
  type RegistryStatus,
  UNAVAILABLE,
  type WatchEvent,
} from "../registry/protocol.ts";
import { formatTable } from "./table.ts";

/** Exit codes of the CLI. */
export const EXIT = {
  ok: 0,
  failed: 1,
  usage: 2,
  unavailable: 3,
  notFound: 4,
  interrupted: 130,
} as const;

const USAGE = `usage: rafter <command> [options]

commands:
  registry [node options]     run a registry node (see: rafter registry --help)
  status                      every registry node: role, term, leader, indexes, peers
  ls [PREFIX]                 names bound under PREFIX, with their endpoint counts
  lookup NAME[?k=v&...]       the endpoints of NAME (matching the attributes)
  watch PREFIX                print changes under PREFIX as they happen (Ctrl-C stops)
  bind NAME URL               bind URL under NAME
  unbind NAME ID              remove endpoint ID from NAME
  drain NAME ID               mark endpoint ID of NAME draining (stubs stop picking it)
  lease grant TTL_MS          grant a lease
  lease revoke ID             revoke a lease and its bindings
  lease ttl ID                time left on a lease, and its bindings
  lease ls                    every lease
  lease keepalive ID          renew a lease once
  call NAME METHOD [PARAMS]   call METHOD on a server of NAME through a cluster stub;
                              PARAMS is a JSON array or object

options:
  --registry URLS   registry nodes, comma-separated (default $RAFTER_REGISTRY or
                    ${DEFAULT_REGISTRY_URL})
  --json            print JSON instead of tables
  --timeout-ms N    give up after N ms (default 10000)
  --help            show this text

lookup:   --serializable (answer from one node, no quorum needed)  --all (unhealthy too)
          --no-rotate
watch:    --from REV (replay from revision REV)  --count N (stop after N events)
bind:     --id ID  --attr K=V (repeatable)  --weight N  --zone Z  --lease ID | --ttl-ms N
          --check tcp|ping  --local (this node's local area; give one --registry)
call:     --idempotent (safe to retry after a failure)

exit codes: 0 done, 1 error answer, 2 bad usage, 3 registry unreachable,
            4 not found, 130 interrupted`;

/** Raised for bad command lines: printed with the usage, exit 2. */
class UsageError extends Error {}

interface Globals {
  registry: string[];
  json: boolean;
  timeoutMs: number;
}

type Out = (line: string) => void;

/**
 * Runs one command line and returns its exit code.
 *
 * @param argv the arguments after the program name.
 * @param io where to print (default the console).
 *
 * @example
 * ```ts ignore
 * import { runCli } from "./main.ts";
 * const code = await runCli(["ls", "--json"]);
 * ```
 */
export async function runCli(
  argv: string[],
  io: { out?: Out; err?: Out; signal?: AbortSignal } = {},
): Promise<number> {
  const out = io.out ?? ((line: string) => console.log(line));
  const err = io.err ?? ((line: string) => console.error(line));
  const [command, ...rest] = argv;
  if (
    command === undefined || command === "--help" || command === "-h" ||
    command === "help"
  ) {
    (command === undefined ? err : out)(USAGE);
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  if (command === "registry") {
    const { runRegistry } = await import("../registry/main.ts");
    return await runRegistry(rest);
  }
  let parsed;
  try {
    parsed = parseCommand(command, rest);
  } catch (error) {
    if (error instanceof UsageError || error instanceof TypeError) {
      err(`rafter: ${error.message}\n\n${USAGE}`);
      return EXIT.usage;
    }
    throw error;
  }
  if (parsed.help) {
    out(USAGE);
    return EXIT.ok;
  }
  const client = connect(parsed.globals.registry, {
    deadlineMs: parsed.globals.timeoutMs,
  });
  try {
    return await parsed.run(client, parsed.globals, out, io.signal);
  } catch (error) {
    return report(error, err, parsed.globals);
  } finally {
    client.close();
  }
}

interface Parsed {
  help: boolean;
  globals: Globals;
  run(
    client: RafterClient,
    globals: Globals,
    out: Out,
    signal?: AbortSignal,
  ): Promise<number>;
}

function parseCommand(command: string, argv: string[]): Parsed {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      registry: { type: "string" },
      json: { type: "boolean", default: false },
      "timeout-ms": { type: "string" },
      help: { type: "boolean", default: false },
      serializable: { type: "boolean", default: false },
      all: { type: "boolean", default: false },
      "no-rotate": { type: "boolean", default: false },
      from: { type: "string" },
      count: { type: "string" },
      id: { type: "string" },
      attr: { type: "string", multiple: true },
      weight: { type: "string" },
      zone: { type: "string" },
      lease: { type: "string" },
      "ttl-ms": { type: "string" },
      check: { type: "string" },
      local: { type: "boolean", default: false },
      idempotent: { type: "boolean", default: false },
    },
    strict: true,
    allowPositionals: true,
  });
  const registryText = values.registry ?? Deno.env.get("RAFTER_REGISTRY") ??
    DEFAULT_REGISTRY_URL;
  const globals: Globals = {
    registry: registryText.split(",").map((u) => u.trim()).filter((u) =>
      u !== ""
    ),
    json: values.json ?? false,
    timeoutMs: integer(values["timeout-ms"], "--timeout-ms", 10_000, 1),
  };
  if (globals.registry.length === 0) {
    throw new UsageError("--registry needs at least one URL");
  }
  const need = (count: number, shape: string) => {
    if (positionals.length < count) {
      throw new UsageError(`${command} takes ${shape}`);
    }
    if (positionals.length > count && !shape.includes("[")) {
      throw new UsageError(
        `${command} takes ${shape}; unexpected ${
          JSON.stringify(positionals[count])
        }`,
      );
    }
  };
  const help = values.help ?? false;
  const base = { help, globals };
  switch (command) {
    case "status":
      need(0, "no arguments");
      return { ...base, run: status };
    case "ls":
      if (positionals.length > 1) throw new UsageError("ls takes [PREFIX]");
      return { ...base, run: (c, g, o) => ls(c, g, o, positionals[0] ?? "") };
    case "lookup": {
      need(1, "NAME[?key=value&...]");
      const name = positionals[0];
      return {
        ...base,
        run: (c, g, o) =>
          lookup(c, g, o, name, {
            serializable: values.serializable ?? false,
            all: values.all ?? false,
            rotate: !(values["no-rotate"] ?? false),
          }),
      };
    }
    case "watch": {
      need(1, "PREFIX");
      const from = values.from === undefined
        ? undefined
        : integer(values.from, "--from", 1, 1);
      const count = values.count === undefined
        ? undefined
        : integer(values.count, "--count", 1, 1);
      return {
        ...base,
        run: (c, g, o, s) => watch(c, g, o, positionals[0], from, count, s),
      };
    }
    case "bind": {
      need(2, "NAME URL");
      const [name, url] = positionals;
      const attrs: Record<string, string> = {};
      for (const pair of values.attr ?? []) {
        const equals = pair.indexOf("=");
        if (equals < 1) {
          throw new UsageError(`--attr ${pair}: write --attr key=value`);
        }
        attrs[pair.slice(0, equals)] = pair.slice(equals + 1);
      }
      if (values.lease !== undefined && values["ttl-ms"] !== undefined) {
        throw new UsageError("give --lease ID or --ttl-ms N, not both");
      }
      if (
        values.check !== undefined && values.check !== "tcp" &&
        values.check !== "ping"
      ) {
        throw new UsageError("--check must be tcp or ping");
      }
      const spec = {
        url,
        ...(values.id === undefined ? {} : { id: values.id }),
        ...(Object.keys(attrs).length === 0 ? {} : { attrs }),
        ...(values.weight === undefined
          ? {}
          : { weight: integer(values.weight, "--weight", 1, 1) }),
        ...(values.zone === undefined ? {} : { zone: values.zone }),
        ...(values.check === undefined
          ? {}
          : { check: { kind: values.check as "tcp" | "ping" } }),
      };
      const ttlMs = values["ttl-ms"] === undefined
        ? undefined
        : integer(values["ttl-ms"], "--ttl-ms", 1, 1);
      const local = values.local ?? false;
      if (local && globals.registry.length !== 1) {
        throw new UsageError(
          "--local binds on one registry node: give exactly one --registry URL",
        );
      }
      return {
        ...base,
        run: (c, g, o) =>
          bind(c, g, o, name, spec, { lease: values.lease, ttlMs, local }),
      };
    }
    case "unbind":
    case "drain": {
      need(2, "NAME ID");
      const [name, id] = positionals;
      const local = values.local ?? false;
      return {
        ...base,
        run: (c, g, o) =>
          command === "unbind"
            ? unbind(c, g, o, name, id, values.lease, local)
            : drain(c, g, o, name, id, local),
      };
    }
    case "lease":
      return { ...base, ...parseLease(positionals) };
    case "call": {
      if (positionals.length < 2 || positionals.length > 3) {
        throw new UsageError("call takes NAME METHOD [PARAMS-JSON]");
      }
      const [name, method, paramsText] = positionals;
      let params: unknown = [];
      if (paramsText !== undefined) {
        try {
          params = JSON.parse(paramsText);
        } catch (error) {
          throw new UsageError(
            `PARAMS must be JSON (an array or an object): ${
              (error as Error).message
            }`,
          );
        }
        if (typeof params !== "object" || params === null) {
          throw new UsageError("PARAMS must be a JSON array or object");
        }
      }
      const idempotent = values.idempotent ?? false;
      return {
        ...base,
        run: (c, g, o) =>
          call(c, g, o, name, method, params as object, idempotent),
      };
    }
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  }
}

function parseLease(positionals: string[]): Pick<Parsed, "run"> {
  const [verb, arg, extra] = positionals;
  const takes = (shape: string, count: number) => {
    if (positionals.length !== count) {
      throw new UsageError(
        `lease ${shape}${
          extra !== undefined ? `; unexpected ${JSON.stringify(extra)}` : ""
        }`,
      );
    }
  };
  switch (verb) {
    case "grant": {
      takes("grant takes TTL_MS", 2);
      const ttlMs = integer(arg, "TTL_MS", 0, 1);
      return { run: (c, g, o) => leaseGrant(c, g, o, ttlMs) };
    }
    case "revoke":
    case "ttl":
    case "keepalive":
      takes(`${verb} takes ID`, 2);
      return { run: (c, g, o) => leaseOne(c, g, o, verb, arg) };
    case "ls":
      takes("ls takes no arguments", 1);
      return { run: leaseList };
    default:
      throw new UsageError(
        `lease takes grant TTL_MS, revoke ID, ttl ID, ls or keepalive ID${
          verb === undefined ? "" : `, not ${JSON.stringify(verb)}`
        }`,
      );
  }
}

// --- commands ----------------------------------------------------------------

async function status(
  client: RafterClient,
  globals: Globals,
  out: Out,
): Promise<number> {
  // Ask every node given, and every member they report.
  const urls = new Set(client.registry.urls);
  const statuses = new Map<string, RegistryStatus | string>();
  const ask = async (url: string) => {
    try {
      statuses.set(
        url,
        await client.registry.status(url, { timeoutMs: 2_000 }),
      );
    } catch (error) {
      statuses.set(url, (error as Error).message);
    }
  };
  await Promise.all([...urls].map(ask));
  const more = new Set<string>();
  for (const result of statuses.values()) {
    if (typeof result === "string") continue;
    for (const member of result.members) {
      if (member.clientUrl !== null && !statuses.has(member.clientUrl)) {
        more.add(member.clientUrl);
      }
    }
  }
  await Promise.all([...more].map(ask));
  if (globals.json) {
    out(JSON.stringify(
      [...statuses].map(([url, s]) =>
        typeof s === "string" ? { url, error: s } : s
      ),
      null,
      2,
    ));
  } else {
    const rows = [...statuses].map(([url, s]) =>
      typeof s === "string"
        ? [url, "-", "unreachable", "-", "-", "-", "-", "-", s]
        : [
          s.url,
          s.id,
          s.role,
          String(s.term),
          s.leader ?? "(none)",
          String(s.commitIndex),
          String(s.appliedIndex),
          String(s.revision),
          s.members.filter((m) => !m.self).map((m) =>
            `${m.id} ${
              m.reachable
                ? `ok ${m.lastHeardMsAgo ?? "-"}ms`
                : `unreachable${
                  m.lastError === null ? "" : ` (${m.lastError})`
                }`
            }`
          ).join(", "),
        ]
    );
    out(formatTable(
      [
        "URL",
        "ID",
        "ROLE",
        "TERM",
        "LEADER",
        "COMMIT",
        "APPLIED",
        "REVISION",
        "PEERS",
      ],
      rows,
    ));
  }
  const reachable = [...statuses.values()].filter((s) => typeof s !== "string");
  return reachable.length === 0 ? EXIT.unavailable : EXIT.ok;
}

async function ls(
  client: RafterClient,
  globals: Globals,
  out: Out,
  prefix: string,
): Promise<number> {
  const result = await client.list(prefix);
  if (globals.json) {
    out(JSON.stringify(result, null, 2));
  } else {
    out(formatTable(
      ["NAME", "ENDPOINTS"],
      result.names.map((n) => [n.name, String(n.count)]),
    ));
    out(`revision ${result.revision}`);
  }
  return EXIT.ok;
}

async function lookup(
  client: RafterClient,
  globals: Globals,
  out: Out,
  name: string,
  options: { serializable: boolean; all: boolean; rotate: boolean },
): Promise<number> {
  const result = await client.lookup(name, {
    consistency: options.serializable ? "serializable" : "linearizable",
    includeUnhealthy: options.all,
    rotate: options.rotate,
  });
  if (globals.json) {
    out(JSON.stringify(result, null, 2));
  } else {
    out(endpointTable(result.endpoints));
    out(`revision ${result.revision}`);
  }
  return result.endpoints.length === 0 ? EXIT.notFound : EXIT.ok;
}

function endpointTable(endpoints: readonly Endpoint[]): string {
  return formatTable(
    ["ID", "URL", "STATE", "WEIGHT", "ZONE", "LOAD", "LEASE", "ATTRS"],
    endpoints.map((e) => [
      e.scope === "local" ? `${e.id} (local)` : e.id,
      e.url,
      e.state,
      String(e.weight),
      e.zone ?? "-",
      e.load === null ? "-" : String(e.load),
      e.leaseId ?? "-",
      Object.entries(e.attrs).map(([k, v]) => `${k}=${v}`).join(",") || "-",
    ]),
  );
}

async function watch(
  client: RafterClient,
  globals: Globals,
  out: Out,
  prefix: string,
  fromRevision: number | undefined,
  count: number | undefined,
  signal: AbortSignal | undefined,
): Promise<number> {
  const interrupted = new AbortController();
  const onSignal = () => interrupted.abort();
  const listening = signal === undefined;
  if (listening) Deno.addSignalListener("SIGINT", onSignal);
  const stop = signal === undefined
    ? interrupted.signal
    : AbortSignal.any([signal, interrupted.signal]);
  const watcher = client.watch(prefix, { fromRevision, signal: stop });
  let seen = 0;
  if (!globals.json) {
    out(
      `watching "${prefix}"${
        fromRevision === undefined ? "" : ` from revision ${fromRevision}`
      } (Ctrl-C stops)`,
    );
  }
  try {
    for await (const update of watcher) {
      const events: WatchEvent[] = update.kind === "events"
        ? update.events
        : [];
      if (update.kind === "reset") {
        out(
          globals.json
            ? JSON.stringify(update)
            : `reset at revision ${update.revision}: ${update.names.length} names`,
        );
      }
      for (const event of events) {
        out(
          globals.json
            ? JSON.stringify(event)
            : `${event.revision} ${
              event.type.padEnd(6)
            } ${event.name} ${event.endpoint.id} ${event.endpoint.url} ${
              event.type === "put" ? event.endpoint.state : event.reason ?? ""
            }`.trimEnd(),
        );
        if (count !== undefined && ++seen >= count) {
          watcher.close();
          return EXIT.ok;
        }
      }
    }
    return interrupted.signal.aborted || signal?.aborted
      ? EXIT.interrupted
      : EXIT.ok;
  } finally {
    if (listening) Deno.removeSignalListener("SIGINT", onSignal);
  }
}

async function bind(
  client: RafterClient,
  globals: Globals,
  out: Out,
  name: string,
  spec: Parameters<RafterClient["bind"]>[1],
  options: { lease?: string; ttlMs?: number; local: boolean },
): Promise<number> {
  const result = await client.bind(name, spec, {
    leaseId: options.lease,
    grant: options.ttlMs === undefined ? undefined : { ttlMs: options.ttlMs },
    scope: options.local ? "local" : undefined,
    node: options.local ? globals.registry[0] : undefined,
  });
  if (globals.json) {
    out(JSON.stringify(result, null, 2));
  } else {
    out(
      `bound ${result.endpoint.id} (${result.endpoint.url}) under "${result.name}" at revision ${result.revision}${
        result.leaseId === null ? "" : ` with lease ${result.leaseId}`
      }`,
    );
  }
  return EXIT.ok;
}

async function unbind(
  client: RafterClient,
  globals: Globals,
  out: Out,
  name: string,
  id: string,
  leaseId: string | undefined,
  local: boolean,
): Promise<number> {
  const result = await client.unbind(name, id, {
    leaseId,
    scope: local ? "local" : undefined,
    node: local ? globals.registry[0] : undefined,
  });
  if (globals.json) out(JSON.stringify(result, null, 2));
  else {
    out(
      result.removed === 0
        ? `nothing bound as "${id}" under "${name}"`
        : `unbound "${id}" from "${name}" at revision ${result.revision}`,
    );
  }
  return result.removed === 0 ? EXIT.notFound : EXIT.ok;
}

async function drain(
  client: RafterClient,
  globals: Globals,
  out: Out,
  name: string,
  id: string,
  local: boolean,
): Promise<number> {
  const result = await client.registry.setState(name, id, "draining", {
    scope: local ? "local" : undefined,
    node: local ? globals.registry[0] : undefined,
  });
  if (globals.json) out(JSON.stringify(result, null, 2));
  else out(`"${id}" of "${name}" is draining (revision ${result.revision})`);
  return EXIT.ok;
}

async function leaseGrant(
  client: RafterClient,
  globals: Globals,
  out: Out,
  ttlMs: number,
): Promise<number> {
  const result = await client.registry.grantLease(ttlMs);
  if (globals.json) out(JSON.stringify(result, null, 2));
  else out(`lease ${result.id} granted, ttl ${result.ttlMs} ms`);
  return EXIT.ok;
}

async function leaseOne(
  client: RafterClient,
  globals: Globals,
  out: Out,
  verb: "revoke" | "ttl" | "keepalive",
  id: string,
): Promise<number> {
  const registry = client.registry;
  if (verb === "revoke") {
    const result = await registry.revokeLease(id);
    if (globals.json) out(JSON.stringify(result, null, 2));
    else {out(
        `lease ${id} revoked; ${result.removed} binding(s) removed at revision ${result.revision}`,
      );}
  } else if (verb === "keepalive") {
    const result = await registry.keepAlive(id);
    if (globals.json) out(JSON.stringify(result, null, 2));
    else out(`lease ${id} renewed, ttl ${result.ttlMs} ms`);
  } else {
    const info = await registry.timeToLive(id);
    if (globals.json) out(JSON.stringify(info, null, 2));
    else {
      out(formatTable(
        ["LEASE", "TTL_MS", "REMAINING_MS", "BINDINGS"],
        [[
          info.id,
          String(info.ttlMs),
          String(info.remainingMs),
          info.bindings.map((b) => `${b.name}/${b.id}`).join(", ") || "-",
        ]],
      ));
    }
  }
  return EXIT.ok;
}

async function leaseList(
  client: RafterClient,
  globals: Globals,
  out: Out,
): Promise<number> {
  const { leases } = await client.registry.leases();
  if (globals.json) out(JSON.stringify({ leases }, null, 2));
  else {
    out(formatTable(
      ["LEASE", "TTL_MS", "REMAINING_MS", "BINDINGS"],
      leases.map((
        l,
      ) => [
        l.id,
        String(l.ttlMs),
        String(l.remainingMs),
        String(l.bindings.length),
      ]),
    ));
  }
  return EXIT.ok;
}

async function call(
  client: RafterClient,
  globals: Globals,
  out: Out,
  name: string,
  method: string,
  params: object,
  idempotent: boolean,
): Promise<number> {
  const result = await client.call(
    name,
    method,
    params as unknown[] | Record<string, unknown>,
    { deadlineMs: globals.timeoutMs, idempotent },
  );
  out(JSON.stringify(result, null, globals.json ? 0 : 2));
  return EXIT.ok;
}

// --- errors ------------------------------------------------------------------

function report(error: unknown, err: Out, globals: Globals): number {
  if (globals.json) {
    err(JSON.stringify(
      error instanceof RpcError
        ? { error: error.toJSON() }
        : { error: { message: String(error) } },
    ));
  }
  if (!(error instanceof RpcError)) {
    if (!globals.json) err(`rafter: ${(error as Error)?.message ?? error}`);
    return EXIT.failed;
  }
  const hint = hintFor(error, globals);
  if (!globals.json) err(`rafter: ${error.message}${hint}`);
  switch (error.code) {
    case UNAVAILABLE:
    case DEADLINE_EXCEEDED:
    case NOT_LEADER:
    case -32004:
      return EXIT.unavailable;
    case LEASE_NOT_FOUND:
    case NO_ENDPOINTS:
      return EXIT.notFound;
    case CANCELLED:
      return EXIT.interrupted;
    default:
      return EXIT.failed;
  }
}

function hintFor(error: RpcError, globals: Globals): string {
  if (error.code === -32004 || error.code === UNAVAILABLE) {
    return `\n(registry: ${
      globals.registry.join(", ")
    }; pass --registry URL,URL or start one with: deno task registry)`;
  }
  return "";
}

function integer(
  text: string | undefined,
  option: string,
  fallback: number,
  min: number,
): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (text.trim() === "" || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(
      `${option} must be an integer of at least ${min}, got "${text}"`,
    );
  }
  return value;
}

if (import.meta.main) {
  Deno.exit(await runCli(Deno.args));
}
