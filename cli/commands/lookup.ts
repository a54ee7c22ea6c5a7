/**
 * `rafter lookup NAME[?key=value&...]`: the endpoints bound under NAME, in
 * binding order, optionally only those whose attributes match the query;
 * exit 4 (saying why) when none match.
 *
 * @module
 */

import {
  type Endpoint,
  formatName,
  type LookupResult,
} from "../../protocol/registry.ts";
import { checkName, optionalInteger } from "../args.ts";
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
