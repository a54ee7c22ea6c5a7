/**
 * `rafter bind NAME URL`: binds the server at URL under NAME (with
 * attributes, weight, zone, health check, a lease or a lease of its own),
 * in the replicated registry or, with `--local`, in one node's local area.
 *
 * @module
 */

import { parseTcpUrl } from "../../rpc/transport/transport.ts";
import type { EndpointSpec } from "../../protocol/registry.ts";
import { checkName, optionalInteger } from "../args.ts";
import type { Command, Context, Values } from "../context.ts";
import { EXIT, UsageError } from "../errors.ts";

/** The spec of `rafter bind`. */
export const bindCommand: Command = {
  name: "bind",
  args: "NAME URL",
  summary: "bind the server at URL under NAME",
  about:
    `Binds the server at URL under NAME (NAME?key=value&... adds attributes),
replacing a binding with the same id, unless another live lease holds that
id at another URL (refused: ID_IN_USE, exit 1). A binding with --ttl-ms or
--lease goes away when the lease expires: keep it alive with rafter lease
keepalive.`,
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
export async function bind(
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
  if (!/^t(?:cp|ls):\/\//.test(url)) url = `tcp://${url}`; // tls:// stays
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
