/**
 * `rafter lookup NAME[?key=value&...][@CLUSTER]`: the endpoints bound
 * under NAME (in sibling cluster CLUSTER), in binding order, optionally
 * only those whose attributes match the query; exit 4 when none match,
 * saying why (nothing bound, none with the query's attributes, or those
 * failing their health check).
 *
 * @module
 */

import type { Endpoint } from "../../protocol/registry.ts";
import { checkName, optionalInteger } from "../args.ts";
import { clusterTarget } from "../cluster_target.ts";
import {
  describeNoEndpoints,
  printNoEndpoints,
  whyNoEndpoints,
} from "../no_endpoints.ts";
import type { Command, Context } from "../context.ts";
import { EXIT } from "../errors.ts";
import { formatTable } from "../table.ts";

/** The spec of `rafter lookup`. */
export const lookupCommand: Command = {
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
export interface LookupOptions {
  /** `--serializable`: answer from the node asked, without a quorum. */
  serializable: boolean;
  /** `--all`: include endpoints whose health check fails. */
  all: boolean;
  /** `--limit N`: the first N endpoints only. */
  limit?: number;
}

/** Runs `rafter lookup`. */
export async function lookup(
  context: Context,
  name: string,
  options: LookupOptions,
): Promise<number> {
  const { client, globals, out } = context;
  // NAME@CLUSTER: the cluster's registry, as the local one names it (its
  // errors' hints name that registry).
  context.cluster = await clusterTarget(client, name);
  const consistency = options.serializable ? "serializable" : "linearizable";
  const result = await client.lookup(name, {
    consistency,
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
    // Why none: nothing bound, none with the query's attributes, or
    // those that have them fail their health check.
    const why = await whyNoEndpoints(context, name, consistency);
    printNoEndpoints(
      describeNoEndpoints(why, context, { all: options.all }),
      context,
    );
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
