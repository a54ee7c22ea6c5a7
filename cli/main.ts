/**
 * `rafter`, the command line of Rafter (`deno task rafter …`, or
 * `deno run -A cli/main.ts …`): run a registry node, look at the registry,
 * change it, and call services through a cluster stub, as etcdctl and
 * grpcurl do.
 *
 * Tables for people by default; `--json` prints JSON on stdout (one
 * document, or one line per event for `watch`) and errors as one JSON line
 * on stderr. The registry nodes come from `--registry URL,URL`, else the
 * `RAFTER_REGISTRY` environment variable, else `tcp://127.0.0.1:7001`.
 *
 * Exit codes ({@link EXIT}): 0 done; 1 the registry or the service
 * answered with an error (for `status`: the cluster is degraded); 2 bad
 * usage; 3 no registry node (or no server) could be reached, or none
 * answered in time; 4 not found (a lookup with no endpoint, an unknown
 * lease or binding, nothing bound under the name called); 130 interrupted.
 *
 * @module
 */

import {
  type Endpoint,
  type EndpointSpec,
  formatName,
  type LeaderTransferResult,
  type LeaseInfo,
  type LookupResult,
  type MemberListResult,
  type ParamsOf,
  parseName,
  REGISTRY_METHODS,
  type RegistryStatus,
  type WatchEvent,
} from "../protocol/registry.ts";
import type { Command, Context, Group, Out, Values } from "./context.ts";
import {
  EXIT,
  report,
  START_HINT,
  UsageError,
  usageFailure,
} from "./errors.ts";
import { formatTable } from "./table.ts";
import {
  bindingTarget,
  checkName,
  checkUrl,
  type CommandLine,
  integer,
  optionalInteger,
  parseCommandLine,
  TARGET_OPTION_HELP,
  TARGET_OPTIONS,
} from "./args.ts";
import { WatchClient } from "../stub/registry_client/watch.ts";
import { parseTcpUrl } from "../rpc/transport/transport.ts";
import { INVALID_PARAMS, RpcError } from "../rpc/errors.ts";
import { connect } from "../stub/client.ts";
import { commandHelp, groupHelp, shortUsage, usage, verbList } from "./help.ts";

export { EXIT } from "./errors.ts";
export { DEFAULT_TIMEOUT_MS } from "./args.ts";

/** Where {@link runCli} prints, and what stops a `watch`. */
export interface CliIo {
  /** Receives each line meant for stdout. @default console.log */
  out?: (line: string) => void;
  /** Receives each line meant for stderr. @default console.error */
  err?: (line: string) => void;
  /**
   * Aborting it stops a `watch` as Ctrl-C does (exit 130). Without it,
   * `watch` listens for SIGINT itself.
   */
  signal?: AbortSignal;
  /** Reads an environment variable (`RAFTER_REGISTRY`). @default Deno.env.get */
  env?: (name: string) => string | undefined;
}

// --- status ----------------------------------------------------------------
/** The spec of `rafter status`. */
const statusCommand: Command = {
  name: "status",
  args: "",
  summary: "every member's role, term, leader, indexes",
  about: `Asks each registry node given, and every member they report, for its
Raft state; members that do not answer are listed with the reason.
Exit 0 when every member answered and all agree on a leader, 1 when the
cluster is degraded (a member did not answer, or there is no leader),
3 when no node answered.`,
  positionals: [0, 0],
  run: (c) => status(c),
};

/** One row of `status`: a member (or a URL given) and its answer. */
interface NodeAnswer {
  id: string | null;
  url: string | null;
  status: RegistryStatus | null;
  error: string | null;
}

/** Runs `rafter status`. */
async function status(context: Context): Promise<number> {
  const { globals, out, err } = context;
  const nodes = statusRows(await askEveryMember(context));
  const answered = nodes.filter((n) => n.status !== null);
  const leaders = new Set(answered.map((n) => n.status!.leader));
  const leader = leaders.size === 1 ? [...leaders][0] : null;
  if (globals.json) {
    out(JSON.stringify({ leader, nodes }, null, 2));
  } else {
    out(statusTable(nodes));
  }
  if (answered.length === 0) {
    if (!globals.json) {
      err(
        `rafter: no registry node answered (${
          globals.registry.join(", ")
        }, from ${globals.registrySource}).\n${START_HINT}`,
      );
    }
    return EXIT.unavailable;
  }
  const degraded = answered.length < nodes.length || leader === null;
  if (!globals.json) {
    const summary = leader === null
      ? `no leader agreed on (${
        [...leaders].map((l) => l ?? "none").join(", ")
      }): an election may be under way`
      : `leader ${leader}, term ${
        answered.find((n) => n.status!.id === leader)?.status?.term ??
          answered[0].status!.term
      }`;
    out(`${summary}; ${answered.length} of ${nodes.length} members answered`);
  }
  return degraded ? EXIT.failed : EXIT.ok;
}

/**
 * Asks every URL given, then every member the answers name, until no new
 * client URL turns up (a few rounds at most): each URL's status or error.
 */
async function askEveryMember(
  context: Context,
): Promise<Map<string, RegistryStatus | Error>> {
  const { client, globals } = context;
  const answers = new Map<string, RegistryStatus | Error>();
  let pending = [...globals.registry];
  for (let round = 0; round < 4 && pending.length > 0; round++) {
    await Promise.all(pending.map(async (url) => {
      try {
        answers.set(
          url,
          await client.registry.status(url, { timeoutMs: globals.timeoutMs }),
        );
      } catch (error) {
        answers.set(url, error as Error);
      }
    }));
    pending = [];
    for (const answer of answers.values()) {
      if (answer instanceof Error) continue;
      for (const member of answer.members) {
        const url = member.clientUrl;
        if (url !== null && !answers.has(url) && !pending.includes(url)) {
          pending.push(url);
        }
      }
    }
  }
  return answers;
}

function statusTable(nodes: readonly NodeAnswer[]): string {
  return formatTable(
    [
      "ID",
      "URL",
      "ROLE",
      "TERM",
      "LEADER",
      "COMMIT",
      "APPLIED",
      "REVISION",
      "ERRORS",
    ],
    nodes.map((n) => {
      const s = n.status;
      if (s === null) {
        return [
          n.id ?? "?",
          n.url ?? "-",
          "unreachable",
          "-",
          "-",
          "-",
          "-",
          "-",
          n.error ?? "",
        ];
      }
      const problems = memberProblems(s);
      return [
        s.id,
        s.url,
        s.role,
        String(s.term),
        s.leader ?? "(none)",
        String(s.commitIndex),
        String(s.appliedIndex),
        String(s.revision),
        problems.join("; ") || "-",
      ];
    }),
  );
}

/**
 * What a node's view of its peers says is wrong: peers it cannot reach,
 * and, between a leader and its followers (who hear from each other at
 * every heartbeat), a peer silent for over two election timeouts (a
 * process that is stopped but keeps its connections open).
 */
function memberProblems(s: RegistryStatus): string[] {
  const problems: string[] = [];
  for (const m of s.members) {
    if (m.self) continue;
    if (!m.reachable) {
      problems.push(
        `cannot reach ${m.id}${
          m.lastError === null ? "" : ` (${m.lastError})`
        }`,
      );
    } else if (s.role === "leader" || m.id === s.leader) {
      if (m.lastHeardMsAgo === null) {
        problems.push(`never heard from ${m.id}`);
      } else if (m.lastHeardMsAgo > 2 * s.electionTimeoutMs) {
        problems.push(
          `no word from ${m.id} for ${(m.lastHeardMsAgo / 1000).toFixed(1)} s`,
        );
      }
    }
  }
  return problems;
}

/**
 * One row per member any answer names (those that did not answer with
 * the reason), then the URLs given that failed and belong to no member.
 */
function statusRows(
  answers: Map<string, RegistryStatus | Error>,
): NodeAnswer[] {
  const rows = new Map<string, NodeAnswer>();
  const urlOf = new Map<string, string | null>(); // member id → client URL
  for (const answer of answers.values()) {
    if (answer instanceof Error) continue;
    rows.set(answer.id, {
      id: answer.id,
      url: answer.url,
      status: answer,
      error: null,
    });
    for (const member of answer.members) {
      if (!urlOf.has(member.id) || urlOf.get(member.id) === null) {
        urlOf.set(member.id, member.clientUrl);
      }
    }
  }
  const claimed = new Set(
    [...rows.values()].map((row) => row.url).filter((u) => u !== null),
  );
  for (const [id, url] of urlOf) {
    if (rows.has(id)) continue;
    const answer = url === null ? undefined : answers.get(url);
    rows.set(id, {
      id,
      url,
      status: null,
      error: answer instanceof Error
        ? answer.message
        : "no member knows its client URL yet (it has not connected since they started)",
    });
    if (url !== null) claimed.add(url);
  }
  // URLs given that answered with an error and belong to no known member.
  for (const [url, answer] of answers) {
    if (!(answer instanceof Error) || claimed.has(url)) continue;
    rows.set(`?${url}`, { id: null, url, status: null, error: answer.message });
  }
  return [...rows.values()].sort((a, b) =>
    (a.id ?? `~${a.url}`).localeCompare(b.id ?? `~${b.url}`)
  );
}

// --- ls --------------------------------------------------------------------
/** The spec of `rafter ls`. */
const lsCommand: Command = {
  name: "ls",
  args: "[PREFIX]",
  summary: "names under PREFIX, with endpoint counts",
  about:
    "Lists the names that start with PREFIX and how many endpoints each has.",
  options: { serializable: { type: "boolean" } },
  optionHelp:
    "  --serializable    answer from the node asked, without a quorum (may lag)",
  positionals: [0, 1],
  run: (c, [prefix], v) => ls(c, prefix ?? "", v.serializable === true),
};

/** Runs `rafter ls`. */
async function ls(
  context: Context,
  prefix: string,
  serializable: boolean,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.list(prefix, {
    consistency: serializable ? "serializable" : "linearizable",
  });
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

// --- lookup ----------------------------------------------------------------
/** The spec of `rafter lookup`. */
const lookupCommand: Command = {
  name: "lookup",
  args: "NAME[?key=value&...]",
  summary: "the endpoints of NAME (matching the query)",
  about: `The endpoints bound under NAME, in binding order; with ?key=value&...
only those whose attributes match every pair (quote it in the shell).
Exit 4 when none match.`,
  options: {
    serializable: { type: "boolean" },
    all: { type: "boolean" },
    limit: { type: "string" },
  },
  optionHelp:
    `  --serializable    answer from the node asked, without a quorum (may lag)
  --all             include endpoints whose health check fails
  --limit N         the first N endpoints only (and how many matched)`,
  positionals: [1, 1],
  run: (c, [name], v) =>
    lookup(c, checkName(name), {
      serializable: v.serializable === true,
      all: v.all === true,
      limit: optionalInteger(v.limit, "--limit", 1),
    }),
};

/** What `rafter lookup` was asked besides the name. */
interface LookupOptions {
  serializable: boolean;
  all: boolean;
  limit?: number;
}

/** Runs `rafter lookup`. */
async function lookup(
  context: Context,
  name: string,
  options: LookupOptions,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.lookup(name, {
    consistency: options.serializable ? "serializable" : "linearizable",
    includeUnhealthy: options.all,
    // People compare one lookup with the next: keep the binding order.
    rotate: false,
    limit: options.limit,
  });
  if (globals.json) {
    out(JSON.stringify(result, null, 2));
  } else if (result.endpoints.length > 0) {
    out(endpointTable(result.endpoints));
    const shown = result.endpoints.length < result.total
      ? `, ${result.endpoints.length} of ${result.total} endpoints shown (--limit)`
      : "";
    out(`revision ${result.revision}${shown}`);
  } else {
    await reportNothingFound(context, name, options, result);
  }
  return result.endpoints.length === 0 ? EXIT.notFound : EXIT.ok;
}

/**
 * Says that nothing matched, or, when endpoints are bound but all fail
 * their health checks, that they do.
 */
async function reportNothingFound(
  context: Context,
  name: string,
  options: LookupOptions,
  result: LookupResult,
): Promise<void> {
  const { client, err } = context;
  const query = Object.keys(result.query).length === 0
    ? ""
    : ` matching ${formatName("", result.query).slice(1)}`;
  const unhealthy = options.all ? 0 : (await client.lookup(name, {
    consistency: "serializable",
    includeUnhealthy: true,
    rotate: false,
  })).endpoints.filter((e) => e.state === "unhealthy").length;
  err(
    unhealthy > 0
      ? `rafter: ${unhealthy} endpoint(s) ${
        unhealthy === 1 ? "is" : "are"
      } bound under "${result.name}"${query} but failing ${
        unhealthy === 1 ? "its" : "their"
      } health check (revision ${result.revision}); --all shows ${
        unhealthy === 1 ? "it" : "them"
      }`
      : `rafter: nothing is bound under "${result.name}"${query} (revision ${result.revision}); rafter ls lists the names bound${
        options.all ? "" : ", --all includes unhealthy endpoints"
      }`,
  );
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

// --- watch -----------------------------------------------------------------
/** The spec of `rafter watch`. */
const watchCommand: Command = {
  name: "watch",
  args: "PREFIX",
  summary: "print changes under PREFIX as they happen",
  about: `Prints one line per change under PREFIX ("" watches every name):
revision, put or delete, name, endpoint id, URL, and the state (put) or
the reason (delete). Follows the registry through node failures without
losing or repeating a change. Ends after --count events (exit 0) or on
Ctrl-C (exit 130).`,
  options: { from: { type: "string" }, count: { type: "string" } },
  optionHelp:
    `  --from REV        start at revision REV (replays history), instead of now
  --count N         stop after N events`,
  positionals: [1, 1],
  run: (c, [prefix], v) =>
    watch(
      c,
      prefix,
      optionalInteger(v.from, "--from", 1),
      optionalInteger(v.count, "--count", 1),
    ),
};

/** Runs `rafter watch`. */
async function watch(
  context: Context,
  prefix: string,
  fromRevision: number | undefined,
  count: number | undefined,
): Promise<number> {
  const { client, globals, out, err, signal } = context;
  // Fail fast (exit 3) when no registry node answers, and learn the
  // revision to start from, so nothing between this and the watch is lost.
  const listed = await client.list(prefix);
  const from = fromRevision ?? listed.revision + 1;
  const interrupted = new AbortController();
  const onSigint = () => interrupted.abort();
  if (signal === undefined) Deno.addSignalListener("SIGINT", onSigint);
  signal?.addEventListener("abort", onSigint, { once: true });
  if (signal?.aborted) interrupted.abort();
  const watches = new WatchClient(client.registry, {
    connectTimeoutMs: Math.min(globals.timeoutMs, 2_000),
    callTimeoutMs: Math.min(globals.timeoutMs, 4_000),
    onReconnect: reconnectNotice(context, (): number => watcher.revision),
  });
  const watcher = watches.watch(prefix, {
    fromRevision: from,
    signal: interrupted.signal,
  });
  if (!globals.json) {
    err(
      `watching ${
        prefix === "" ? "every name" : `names under "${prefix}"`
      } from revision ${from}; Ctrl-C stops`,
    );
  }
  let seen = 0;
  try {
    for await (const update of watcher) {
      if (update.kind === "reset") {
        out(
          globals.json
            ? JSON.stringify({
              type: "reset",
              revision: update.revision,
              names: update.names,
            })
            : `${update.revision} reset  ${update.names.length} names (the watch fell behind the registry's history; this is the whole prefix now)`,
        );
        continue;
      }
      for (const event of update.events) {
        out(globals.json ? JSON.stringify(event) : eventLine(event));
        if (count !== undefined && ++seen >= count) return EXIT.ok;
      }
    }
    return interrupted.signal.aborted ? EXIT.interrupted : EXIT.ok;
  } finally {
    watcher.close();
    watches.close();
    if (signal === undefined) Deno.removeSignalListener("SIGINT", onSigint);
    signal?.removeEventListener("abort", onSigint);
  }
}

/**
 * The watch's `onReconnect`: a warning on stderr, at most one per 10 s
 * while the registry is away; `revision` is the last revision seen.
 */
function reconnectNotice(
  context: Context,
  revision: () => number,
): (url: string, error: unknown) => void {
  const { globals, err } = context;
  let lastNoticeAt = -Infinity;
  return (url, error) => {
    if (Date.now() - lastNoticeAt < 10_000) return;
    lastNoticeAt = Date.now();
    const notice = `watch connection to ${url} failed (${
      (error as Error)?.message ?? error
    }); retrying on the registry nodes, from revision ${revision() + 1}`;
    err(
      globals.json ? JSON.stringify({ warning: notice }) : `rafter: ${notice}`,
    );
  };
}

function eventLine(event: WatchEvent): string {
  const e = event.endpoint;
  return [
    String(event.revision),
    event.type.padEnd(6),
    event.name,
    e.scope === "local" ? `${e.id} (local)` : e.id,
    e.url,
    event.type === "put" ? e.state : event.reason ?? "",
  ].join(" ").trimEnd();
}

// --- bind ------------------------------------------------------------------
/** The spec of `rafter bind`. */
const bindCommand: Command = {
  name: "bind",
  args: "NAME URL",
  summary: "bind the server at URL under NAME",
  about:
    `Binds the server at URL under NAME (NAME?key=value&... adds attributes),
replacing a binding with the same id. A binding with --ttl-ms or --lease
goes away when the lease expires: keep it alive with rafter lease keepalive.`,
  options: {
    id: { type: "string" },
    attr: { type: "string", multiple: true },
    weight: { type: "string" },
    zone: { type: "string" },
    lease: { type: "string" },
    "ttl-ms": { type: "string" },
    check: { type: "string" },
    local: { type: "boolean" },
  },
  optionHelp: `  --id ID           instance id (default: the URL)
  --attr KEY=VALUE  an attribute (repeatable)
  --weight N        share of calls for weighted distributors (default 1)
  --zone ZONE       failure zone
  --lease ID        attach to this lease
  --ttl-ms N        grant a lease of N ms with the binding (not with --lease)
  --check tcp|ping  let the registry leader probe the server
  --local           bind in the local area of the one --registry node given`,
  positionals: [2, 2],
  run: (c, [name, url], v) => bind(c, checkName(name), url, v),
};

/** Runs `rafter bind`. */
async function bind(
  context: Context,
  name: string,
  url: string,
  values: Values,
): Promise<number> {
  const { client, globals, out } = context;
  const { spec, lease, ttlMs } = bindOptions(url, values);
  const local = values.local === true;
  // A local binding cannot grant its lease in the same call: grant it
  // first (on the leader), then bind with it on the node.
  const granted = local && ttlMs !== undefined
    ? await client.registry.grantLease(ttlMs)
    : undefined;
  const bound = await client.bind(name, spec, {
    leaseId: granted?.id ?? lease,
    grant: ttlMs === undefined || local ? undefined : { ttlMs },
    scope: local ? "local" : undefined,
    node: local ? globals.registry[0] : undefined,
  });
  const result = granted === undefined
    ? bound
    : { ...bound, ttlMs: granted.ttlMs };
  if (globals.json) {
    out(JSON.stringify(result, null, 2));
  } else {
    const e = result.endpoint;
    const leaseText = result.leaseId === null
      ? ""
      : `, lease ${result.leaseId}${
        result.ttlMs === undefined ? "" : ` (ttl ${result.ttlMs} ms)`
      }: it lapses unless kept alive (rafter lease keepalive ${result.leaseId})`;
    out(
      `bound "${e.id}" (${e.url}) under "${result.name}"${
        local ? " in the local area of " + globals.registry[0] : ""
      } at revision ${result.revision}${leaseText}`,
    );
  }
  return EXIT.ok;
}

/**
 * The endpoint to bind, and its lease (`--lease`) or lease to grant
 * (`--ttl-ms`), from the URL and options; throws {@link UsageError}.
 */
function bindOptions(
  url: string,
  values: Values,
): { spec: EndpointSpec; lease?: string; ttlMs?: number } {
  try {
    parseTcpUrl(url);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (!url.startsWith("tcp://")) url = `tcp://${url}`;
  const attrs: Record<string, string> = {};
  for (const pair of (values.attr as string[] | undefined) ?? []) {
    const equals = pair.indexOf("=");
    if (equals < 1) {
      throw new UsageError(`--attr ${pair}: write --attr key=value`);
    }
    attrs[pair.slice(0, equals)] = pair.slice(equals + 1);
  }
  const lease = values.lease as string | undefined;
  const ttlMs = optionalInteger(values["ttl-ms"], "--ttl-ms", 1);
  if (lease !== undefined && ttlMs !== undefined) {
    throw new UsageError("give --lease ID or --ttl-ms N, not both");
  }
  const check = values.check as string | undefined;
  if (check !== undefined && check !== "tcp" && check !== "ping") {
    throw new UsageError(`--check must be tcp or ping, not "${check}"`);
  }
  const spec: EndpointSpec = { url };
  if (values.id !== undefined) spec.id = values.id as string;
  if (Object.keys(attrs).length > 0) spec.attrs = attrs;
  const weight = optionalInteger(values.weight, "--weight", 1);
  if (weight !== undefined) spec.weight = weight;
  if (values.zone !== undefined) spec.zone = values.zone as string;
  if (check !== undefined) spec.check = { kind: check };
  return { spec, lease, ttlMs };
}

// --- unbind ----------------------------------------------------------------
/** The spec of `rafter unbind`. */
const unbindCommand: Command = {
  name: "unbind",
  args: "NAME ID",
  summary: "remove endpoint ID from NAME",
  about: "Removes endpoint ID from NAME. Exit 4 when nothing was bound as ID.",
  options: TARGET_OPTIONS,
  optionHelp: TARGET_OPTION_HELP,
  positionals: [2, 2],
  run: (c, [name, id], v) => unbind(c, checkName(name), id, v),
};

/** Runs `rafter unbind`. */
async function unbind(
  context: Context,
  name: string,
  id: string,
  values: Values,
): Promise<number> {
  const { client, globals, out, err } = context;
  const result = await client.unbind(
    name,
    id,
    bindingTarget(values, globals),
  );
  if (globals.json) out(JSON.stringify(result, null, 2));
  else if (result.removed === 0) {
    err(
      `rafter: nothing is bound as "${id}" under "${name}"${
        values.lease === undefined ? "" : ` with lease ${values.lease}`
      }; rafter lookup ${name} lists what is`,
    );
  } else out(`unbound "${id}" from "${name}" at revision ${result.revision}`);
  return result.removed === 0 ? EXIT.notFound : EXIT.ok;
}

// --- drain -----------------------------------------------------------------
/** The spec of `rafter drain`. */
const drainCommand: Command = {
  name: "drain",
  args: "NAME ID",
  summary: "mark endpoint ID of NAME draining",
  about:
    `Marks endpoint ID of NAME draining: stubs pick it for no new calls, calls
under way finish. --undo marks it serving again. Exit 4 when nothing is
bound as ID.`,
  options: { undo: { type: "boolean" }, ...TARGET_OPTIONS },
  optionHelp:
    `  --undo            mark it serving again\n${TARGET_OPTION_HELP}`,
  positionals: [2, 2],
  run: (c, [name, id], v) => drain(c, checkName(name), id, v),
};

/** Runs `rafter drain`. */
async function drain(
  context: Context,
  name: string,
  id: string,
  values: Values,
): Promise<number> {
  const { client, globals, out, err } = context;
  const state = values.undo === true ? "serving" : "draining";
  const target = bindingTarget(values, globals);
  const { node } = target;
  let result;
  try {
    result = await client.registry.setState(name, id, state, target);
  } catch (error) {
    // The registry refuses an unknown endpoint as invalid params: tell
    // "not found" (exit 4) from other bad params by looking it up.
    if (error instanceof RpcError && error.code === INVALID_PARAMS) {
      const found = await client.lookup(parseName(name).base, {
        includeUnhealthy: true,
        rotate: false,
        node,
      });
      if (!found.endpoints.some((e) => e.id === id)) {
        if (globals.json) err(JSON.stringify({ error: error.toJSON() }));
        else {
          err(
            `rafter: nothing is bound as "${id}" under "${name}"; rafter lookup ${name} lists what is`,
          );
        }
        return EXIT.notFound;
      }
    }
    throw error;
  }
  if (globals.json) out(JSON.stringify(result, null, 2));
  else {
    out(`"${id}" of "${name}" is ${state} (revision ${result.revision})`);
  }
  return EXIT.ok;
}

// --- lease -----------------------------------------------------------------
/** The spec of `rafter lease grant`. */
const leaseGrantCommand: Command = {
  name: "lease grant",
  args: "TTL_MS",
  summary: "grant a lease of TTL_MS ms",
  about: `Grants a lease that expires TTL_MS ms after its last keep-alive
(at least 1.5 × the registry's election timeout).`,
  options: { id: { type: "string" } },
  optionHelp: "  --id ID           the lease id (default: a random one)",
  positionals: [1, 1],
  run: (c, [ttl], v) =>
    leaseGrant(c, integer(ttl, "TTL_MS", 1), v.id as string | undefined),
};

/** The spec of `rafter lease revoke`. */
const leaseRevokeCommand: Command = {
  name: "lease revoke",
  args: "ID",
  summary: "revoke a lease and its bindings",
  about:
    "Revokes lease ID and removes its bindings. Exit 4 for an unknown lease.",
  positionals: [1, 1],
  run: (c, [id]) => leaseRevoke(c, id),
};

/** The spec of `rafter lease ttl`. */
const leaseTtlCommand: Command = {
  name: "lease ttl",
  args: "ID",
  summary: "time left on a lease; its bindings",
  about:
    "Time left on lease ID, and its bindings. Exit 4 for an unknown lease.",
  positionals: [1, 1],
  run: (c, [id]) => leaseTtl(c, id),
};

/** The spec of `rafter lease ls`. */
const leaseListCommand: Command = {
  name: "lease ls",
  args: "",
  summary: "every lease",
  about: "Lists every lease: its TTL, the time left, and its bindings.",
  positionals: [0, 0],
  run: (c) => leaseList(c),
};

/** The spec of `rafter lease keepalive`. */
const leaseKeepAliveCommand: Command = {
  name: "lease keepalive",
  args: "ID",
  summary: "renew a lease once",
  about: "Renews lease ID once. Exit 4 for an unknown (or expired) lease.",
  positionals: [1, 1],
  run: (c, [id]) => leaseKeepAlive(c, id),
};

/** The verbs of `rafter lease`, in the order the help lists them. */
const LEASE_COMMANDS: readonly Command[] = [
  leaseGrantCommand,
  leaseRevokeCommand,
  leaseTtlCommand,
  leaseListCommand,
  leaseKeepAliveCommand,
];

/** Runs `rafter lease grant`. */
async function leaseGrant(
  context: Context,
  ttlMs: number,
  id: string | undefined,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.registry.grantLease(ttlMs, { id });
  if (globals.json) out(JSON.stringify(result, null, 2));
  else {
    out(
      `lease ${result.id} granted, ttl ${result.ttlMs} ms (bind with --lease ${result.id}; renew with rafter lease keepalive ${result.id})`,
    );
  }
  return EXIT.ok;
}

/** Runs `rafter lease revoke`. */
async function leaseRevoke(
  context: Context,
  id: string,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.registry.revokeLease(id);
  if (globals.json) out(JSON.stringify(result, null, 2));
  else {
    out(
      `lease ${id} revoked, ${result.removed} binding${
        result.removed === 1 ? "" : "s"
      } removed (revision ${result.revision})`,
    );
  }
  return EXIT.ok;
}

/** Runs `rafter lease keepalive`. */
async function leaseKeepAlive(
  context: Context,
  id: string,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.registry.keepAlive(id);
  if (globals.json) out(JSON.stringify(result, null, 2));
  else out(`lease ${result.id} renewed, ttl ${result.ttlMs} ms`);
  return EXIT.ok;
}

/** Runs `rafter lease ttl`. */
async function leaseTtl(context: Context, id: string): Promise<number> {
  const { client, globals, out } = context;
  const info = await client.registry.timeToLive(id);
  if (globals.json) out(JSON.stringify(info, null, 2));
  else out(leaseTable([info]));
  return EXIT.ok;
}

/** Runs `rafter lease ls`. */
async function leaseList(context: Context): Promise<number> {
  const { client, globals, out } = context;
  const { leases } = await client.registry.leases();
  if (globals.json) out(JSON.stringify({ leases }, null, 2));
  else out(leaseTable(leases));
  return EXIT.ok;
}

function leaseTable(leases: readonly LeaseInfo[]): string {
  return formatTable(
    ["LEASE", "TTL_MS", "REMAINING_MS", "BINDINGS"],
    leases.map((l) => [
      l.id,
      String(l.ttlMs),
      String(l.remainingMs),
      l.bindings.map((b) => `${b.name}/${b.id}`).join(", ") || "-",
    ]),
  );
}

// --- leader ----------------------------------------------------------------
/** The spec of `rafter leader transfer`. */
const leaderTransferCommand: Command = {
  name: "leader transfer",
  args: "",
  summary: "hand leadership to another member",
  about: `Asks the leader to hand leadership over (Raft dissertation §3.10) to
--to ID, or else to the most up-to-date other member, and waits until
another member leads; prints who leads now. Naming the member that
already leads changes nothing. The leader waits up to --timeout-ms less
one second (at most 60 s) for another member to take over. Exit 1 when
the member is unknown, there is no other member, or no member took over
in time (the leader then leads on).`,
  options: { to: { type: "string" } },
  optionHelp:
    "  --to ID           the member to lead next (default: the most up to date)",
  positionals: [0, 0],
  run: (c, _, v) => leaderTransfer(c, v.to as string | undefined),
};

/** The verbs of `rafter leader`. */
const LEADER_COMMANDS: readonly Command[] = [leaderTransferCommand];

/** Runs `rafter leader transfer`. */
async function leaderTransfer(
  context: Context,
  to: string | undefined,
): Promise<number> {
  const { client, globals, out } = context;
  // The leader waits at most this long for a member to take over, leaving
  // time for its answer within --timeout-ms (so a slow hand-over answers
  // "not in time" rather than being retried elsewhere).
  const timeoutMs = Math.max(
    1,
    Math.min(
      60_000,
      globals.timeoutMs - Math.min(1_000, Math.floor(globals.timeoutMs / 2)),
    ),
  );
  const result: LeaderTransferResult = await client.registry.leaderTransfer({
    to,
    timeoutMs,
    attemptTimeoutMs: globals.timeoutMs,
  });
  if (globals.json) out(JSON.stringify(result, null, 2));
  else if (result.leader === result.previousLeader) {
    out(
      `${result.leader} already leads (term ${result.term}); nothing to do`,
    );
  } else {
    out(
      `leadership moved from ${result.previousLeader} to ${result.leader} in ${result.tookMs} ms; ${result.leader} leads term ${result.term}${
        result.leaderUrl === null ? "" : ` at ${result.leaderUrl}`
      }`,
    );
  }
  return EXIT.ok;
}

// --- member ----------------------------------------------------------------
/** The spec of `rafter member list`. */
const memberListCommand: Command = {
  name: "member list",
  args: "",
  summary: "every member: role, URLs, match index, lag",
  about:
    `Lists every member as the leader sees it: id, role (leader or follower),
kind (voter, or learner: receives the log without voting), peer and client
URLs, the highest log index it holds in agreement with the leader (its
match index; "-" until it acknowledges an append in this term) and how
many entries it is behind. Asks the leader (a follower redirects), so it
needs a leader: rafter status works without one.`,
  positionals: [0, 0],
  run: (c) => memberList(c),
};

/** The spec of `rafter member add`. */
const memberAddCommand: Command = {
  name: "member add",
  args: "ID PEER_URL",
  summary: "add a member (a learner unless --voter)",
  about: `Adds member ID, whose peer port is at PEER_URL (tcp://host:port), one
server at a time (Raft dissertation §4.1). It joins as a learner, which
receives the log but does not vote, so the cluster's quorum is not held
up while it catches up (§4.2.1); promote it with rafter member promote
once rafter member list shows its lag near 0. --voter adds a voter at
once. Then start the node with --join (rafter registry --id ID --join URL
--listen ... --peer-listen ... --cluster-secret-file ...; it finds itself
added and catches up), or let --join add it in the first place. Adding a
learner that is one already, with the same URLs, changes nothing and
exits 0 (so a retry is safe). Prints the new member list. Exit 1 when the
change is refused (a voter already, a change still in progress...).`,
  options: {
    "client-url": { type: "string" },
    voter: { type: "boolean" },
  },
  optionHelp: [
    "  --client-url URL  the member's client URL, told to clients and peers",
    "  --voter           add it as a voter at once (default: a learner)",
  ].join("\n"),
  positionals: [2, 2],
  run: (c, [id, peerUrl], v) =>
    memberChange(c, REGISTRY_METHODS.memberAdd, {
      id,
      peerUrl: checkUrl(peerUrl, "PEER_URL"),
      ...(v["client-url"] === undefined ? {} : {
        clientUrl: checkUrl(v["client-url"] as string, "--client-url"),
      }),
      learner: v.voter !== true,
    }),
};

/** The spec of `rafter member promote`. */
const memberPromoteCommand: Command = {
  name: "member promote",
  args: "ID",
  summary: "make a learner a voter",
  about: `Makes learner ID a voter (Raft dissertation §4.2.1): from then on it
votes and counts towards the quorum. Promote a learner once it has
caught up (rafter member list shows its lag): a learner more than 1,000
entries behind (or one never heard from) is refused, since the quorum
would wait for it. Prints the new member list. Exit 1 when ID is not a
learner, has not caught up, or another change is in progress.`,
  positionals: [1, 1],
  run: (c, [id]) => memberChange(c, REGISTRY_METHODS.memberPromote, { id }),
};

/** The spec of `rafter member remove`. */
const memberRemoveCommand: Command = {
  name: "member remove",
  args: "ID",
  summary: "remove a member (the leader too)",
  about: `Removes member ID (Raft dissertation §4.1). Removing the leader is
safe: it first hands leadership to another voter (§3.10), which then
removes it, so writes pause for a hand-over, not an election; only if no
voter takes over does it remove itself and step down once that commits
(§4.2.2). The removed node stays up but takes no part
(its status says it is no member): stop it. Prints the new member list.
Exit 1 when ID is not a member, or it is the last voter.`,
  positionals: [1, 1],
  run: (c, [id]) => memberChange(c, REGISTRY_METHODS.memberRemove, { id }),
};

/** The verbs of `rafter member`, in the order the help lists them. */
const MEMBER_COMMANDS: readonly Command[] = [
  memberListCommand,
  memberAddCommand,
  memberPromoteCommand,
  memberRemoveCommand,
];

/** Runs `rafter member list`. */
async function memberList(context: Context): Promise<number> {
  return printMembers(context, await context.client.registry.memberList());
}

/**
 * Runs one membership change (`rafter member add|promote|remove`) and
 * prints the member list it leaves.
 */
async function memberChange<
  M extends
    | typeof REGISTRY_METHODS.memberAdd
    | typeof REGISTRY_METHODS.memberPromote
    | typeof REGISTRY_METHODS.memberRemove,
>(context: Context, method: M, params: ParamsOf<M>): Promise<number> {
  const result = await context.client.registry.call(method, params, {
    attemptTimeoutMs: context.globals.timeoutMs,
  });
  return printMembers(context, result);
}

function printMembers(context: Context, result: MemberListResult): number {
  const { globals, out } = context;
  if (globals.json) {
    out(JSON.stringify(result, null, 2));
    return EXIT.ok;
  }
  out(formatTable(
    ["ID", "ROLE", "KIND", "PEER_URL", "CLIENT_URL", "MATCH", "LAG"],
    result.members.map((m) => [
      m.id,
      m.role,
      m.kind,
      m.peerUrl,
      m.clientUrl ?? "-",
      m.matchIndex === null ? "-" : String(m.matchIndex),
      m.lag === null ? "-" : String(m.lag),
    ]),
  ));
  out(
    `leader ${result.leader}, term ${result.term}, last index ${result.lastIndex}, commit index ${result.commitIndex}`,
  );
  return EXIT.ok;
}

// --- call ------------------------------------------------------------------
/** The spec of `rafter call`. */
const callCommand: Command = {
  name: "call",
  args: "NAME METHOD [PARAMS-JSON]",
  summary: "call METHOD on a server of NAME",
  about:
    `Calls METHOD on a server bound under NAME (NAME?key=value&... picks among
those with the attributes) and prints the result as JSON. PARAMS-JSON is
a JSON array (positional params) or object (named params); none by
default. Exit 1 when the server answers with an error, 4 when nothing is
bound under NAME.`,
  options: { idempotent: { type: "boolean" } },
  optionHelp:
    "  --idempotent      safe to run twice: retry on another server after a failure",
  positionals: [2, 3],
  run: (c, [name, method, params], v) =>
    call(
      c,
      checkName(name),
      method,
      callParams(params),
      v.idempotent === true,
    ),
};

/** Runs `rafter call`. */
async function call(
  context: Context,
  name: string,
  method: string,
  params: unknown[] | Record<string, unknown>,
  idempotent: boolean,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.call(name, method, params, {
    deadlineMs: globals.timeoutMs,
    idempotent,
  });
  out(JSON.stringify(result ?? null, null, 2));
  return EXIT.ok;
}

/** PARAMS-JSON as params: a JSON array or object; none when not given. */
function callParams(
  text: string | undefined,
): unknown[] | Record<string, unknown> {
  if (text === undefined) return [];
  let params: unknown;
  try {
    params = JSON.parse(text);
  } catch (error) {
    throw new UsageError(
      `PARAMS-JSON must be a JSON array or object (${
        (error as Error).message
      }); e.g. '["Ada"]' or '{"name":"Ada"}'`,
    );
  }
  if (typeof params !== "object" || params === null) {
    throw new UsageError(
      `PARAMS-JSON must be a JSON array or object, not ${text}; e.g. '[${text}]'`,
    );
  }
  return params as unknown[] | Record<string, unknown>;
}

// --- registry --------------------------------------------------------------
/** The line of `rafter registry` in the command list. */
const registryCommand = {
  name: "registry",
  args: "[node options]",
  summary: "run a registry node",
} as const;

/** Runs `rafter registry`: a registry node, until it stops; its exit code. */
async function registry(args: string[]): Promise<number> {
  const { runRegistry } = await import("../registry/main.ts");
  return await runRegistry(args);
}

/** Every command of the table, in the order `rafter --help` lists them. */
const COMMAND_LIST: readonly Command[] = [
  statusCommand,
  lsCommand,
  lookupCommand,
  watchCommand,
  bindCommand,
  unbindCommand,
  drainCommand,
  ...LEASE_COMMANDS,
  ...LEADER_COMMANDS,
  ...MEMBER_COMMANDS,
  callCommand,
];

const COMMANDS: Record<string, Command> = Object.fromEntries(
  COMMAND_LIST.map((command) => [command.name, command]),
);

/** The verbs of a group's commands (`lease grant` → `grant`). */
function verbsOf(commands: readonly Command[]): Group {
  return { verbs: commands.map((command) => command.name.split(" ")[1]) };
}

/** Commands of two words (`lease grant`), by their first word. */
const GROUPS: Record<string, Group> = {
  lease: verbsOf(LEASE_COMMANDS),
  leader: verbsOf(LEADER_COMMANDS),
  member: verbsOf(MEMBER_COMMANDS),
};

const USAGE = usage([registryCommand], COMMAND_LIST);

/**
 * Runs one command line and returns its exit code ({@link EXIT}).
 *
 * @param argv the arguments after the program name, e.g.
 * `["lookup", "hello?version=1", "--json"]`.
 * @param io where to print, and what stops a `watch` (default: the
 * console and SIGINT).
 * @returns the exit code; for `registry`, that of `runRegistry`
 * (registry/main.ts) once the node stops.
 *
 * @example
 * ```ts ignore
 * import { runCli } from "./main.ts";
 * Deno.exit(await runCli(["ls", "--json"]));
 * ```
 */
export async function runCli(argv: string[], io: CliIo = {}): Promise<number> {
  const out = io.out ?? ((line: string) => console.log(line));
  const err = io.err ?? ((line: string) => console.error(line));
  const env = io.env ?? ((name: string) => Deno.env.get(name));
  const [first, ...rest] = argv;
  if (first === undefined) {
    err(USAGE);
    return EXIT.usage;
  }
  if (first === "--help" || first === "-h" || first === "help") {
    out(USAGE);
    return EXIT.ok;
  }
  if (first === registryCommand.name) return await registry(rest);
  const found = findCommand(argv, out, err);
  if (typeof found === "number") return found;
  const { command, args } = found;
  if (args.includes("--help") || args.includes("-h")) {
    out(commandHelp(command));
    return EXIT.ok;
  }
  let line: CommandLine;
  try {
    line = parseCommandLine(command, args, env);
  } catch (error) {
    if (error instanceof UsageError) {
      return commandUsageFailure(error, command, argv, err);
    }
    throw error;
  }
  return await execute(command, line, io.signal, argv, out, err);
}

/**
 * The command `argv` names (one word, or a group's two) and the words
 * after its name; or, when it names none, the exit code of saying so.
 */
function findCommand(
  argv: string[],
  out: Out,
  err: Out,
): { command: Command; args: string[] } | number {
  const [first, ...rest] = argv;
  let name = first;
  let args = rest;
  const group = Object.hasOwn(GROUPS, first) ? GROUPS[first] : undefined;
  if (group !== undefined) {
    const help = groupHelp(first, group, COMMANDS);
    const verb = rest[0];
    if (verb === undefined || verb.startsWith("-")) {
      if (rest.includes("--help") || rest.includes("-h")) {
        out(help);
        return EXIT.ok;
      }
      return usageFailure(
        `${first} needs a verb: ${verbList(group.verbs)}`,
        help,
        argv,
        err,
      );
    }
    if (group.later?.verbs.includes(verb)) {
      return usageFailure(
        `${first} ${verb} is not available yet: ${group.later.why}`,
        help,
        argv,
        err,
      );
    }
    if (!group.verbs.includes(verb)) {
      return usageFailure(
        `unknown ${first} verb ${JSON.stringify(verb)}: use ${
          verbList(group.verbs)
        }`,
        help,
        argv,
        err,
      );
    }
    name = `${first} ${verb}`;
    args = rest.slice(1);
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    return usageFailure(
      `unknown command ${JSON.stringify(first)}`,
      USAGE,
      argv,
      err,
    );
  }
  return { command, args };
}

/** Runs `command` on a cluster stub of the registry; its exit code. */
async function execute(
  command: Command,
  { globals, positionals, values }: CommandLine,
  signal: AbortSignal | undefined,
  argv: string[],
  out: Out,
  err: Out,
): Promise<number> {
  const client = connect(globals.registry, {
    deadlineMs: globals.timeoutMs,
    attemptTimeoutMs: Math.min(globals.timeoutMs, 4_000),
    connectTimeoutMs: Math.min(globals.timeoutMs, 2_000),
    // One-shot commands need no watch to keep a cluster map current.
    watch: false,
  });
  const context: Context = {
    client,
    globals,
    out,
    err,
    signal,
    command: command.name,
  };
  try {
    return await command.run(context, positionals, values);
  } catch (error) {
    if (error instanceof UsageError) {
      return commandUsageFailure(error, command, argv, err);
    }
    return report(error, context);
  } finally {
    client.close();
  }
}

function commandUsageFailure(
  error: UsageError,
  command: Command,
  argv: string[],
  err: Out,
): number {
  return usageFailure(
    error.message,
    shortUsage(command),
    argv,
    err,
    command.name,
  );
}

if (import.meta.main) {
  Deno.exit(await runCli(Deno.args));
}
