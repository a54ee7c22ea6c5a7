/**
 * Why a lookup or a call of `NAME[?QUERY][@CLUSTER]` found no endpoint,
 * for `rafter lookup` and `rafter call` (the same words in both): nothing
 * is bound under NAME at all; endpoints are bound but none has every
 * attribute of the query (with the attributes they have, and a word when
 * the query names an endpoint's field, such as its id, which is no
 * attribute); or those that match fail their health check.
 *
 * @module
 */

import {
  type Attributes,
  type Endpoint,
  formatName,
  matchesQuery,
  parseName,
} from "../protocol/registry.ts";
import type { Context } from "./context.ts";
import { notASiblingLine, siblingRegistryFlag } from "./cluster_target.ts";

/** What a lookup of every endpoint bound under the base name found. */
export interface NoEndpoints {
  /** The name as the command was given it. */
  name: string;
  /** The base name (without the query and `@CLUSTER`). */
  base: string;
  /** The query, `{}` for none. */
  query: Attributes;
  /** The name to look the base up by: `base`, or `base@CLUSTER`. */
  lookupName: string;
  /** The sibling cluster it is bound in, or null for the local registry. */
  cluster: string | null;
  /** The revision of that lookup. */
  revision: number;
  /** Every endpoint bound under the base, healthy or not. */
  bound: readonly Endpoint[];
  /** Those with every attribute of the query. */
  matching: readonly Endpoint[];
}

/**
 * Looks up every endpoint bound under `name`'s base (unhealthy ones too)
 * to tell why `name` found none.
 */
export async function whyNoEndpoints(
  context: Context,
  name: string,
  consistency: "linearizable" | "serializable" = "linearizable",
): Promise<NoEndpoints> {
  const target = context.cluster ?? null;
  const remote = target !== null &&
    (target.kind === "sibling" || target.kind === "own");
  const { base, query } = parseName(remote ? target.base : name);
  const lookupName = remote ? `${base}@${target.cluster}` : base;
  const result = await context.client.lookup(lookupName, {
    consistency,
    includeUnhealthy: true,
    rotate: false,
  });
  return {
    name,
    base,
    query,
    lookupName,
    cluster: target?.kind === "sibling" ? target.cluster : null,
    revision: result.revision,
    bound: result.endpoints,
    matching: result.endpoints.filter((e) => matchesQuery(e.attrs, query)),
  };
}

/** The words of a {@link NoEndpoints} for a command, and the lines after. */
export interface NoEndpointsText {
  /** What was wrong and what to do, one line (without `rafter: `). */
  message: string;
  /** Lines after it (an id in the query, a cluster that is no sibling). */
  hints: string[];
}

/**
 * Says why nothing was found: for `lookup` (with its revision; `all`:
 * `--all` was given) or `call` (`No endpoints: …`).
 */
export function describeNoEndpoints(
  why: NoEndpoints,
  context: Context,
  { all }: { all: boolean },
): NoEndpointsText {
  const call = context.command === "call";
  const prefix = call ? "No endpoints: " : "";
  const revision = call ? "" : ` (revision ${why.revision})`;
  const under = `under "${why.base}"${
    why.cluster === null ? "" : ` in cluster ${why.cluster}`
  }`;
  const queryText = formatName("", why.query).slice(1);
  const hints: string[] = [];
  const target = context.cluster ?? null;
  const notSibling = notASiblingLine(
    target,
    why.name,
    context.globals.registry,
  );
  if (notSibling !== null) hints.push(notSibling);
  let message: string;
  if (why.bound.length === 0) {
    const ls = target?.kind === "sibling"
      ? `rafter ls --registry ${
        siblingRegistryFlag(target)
      } lists the names bound in cluster ${target.cluster}`
      : "rafter ls lists the names bound";
    message = `${prefix}nothing is bound ${under}${
      queryText === "" ? "" : " at all"
    }${revision}${
      queryText === "" ? "" : `, so no endpoint matches ${queryText}`
    }; ${call ? "start a server that binds it, or check the name" : ls}`;
  } else if (why.matching.length === 0) {
    const n = why.bound.length;
    message = `${prefix}${n} endpoint${
      n === 1 ? " is" : "s are"
    } bound ${under} but ${
      n === 1 ? "it does not match" : "none matches"
    } the query ${queryText}${revision}; ${
      attributesOf(why.bound)
    }; rafter lookup ${why.lookupName} lists ${n === 1 ? "it" : "them"}`;
    hints.push(...fieldHints(why));
  } else {
    const unhealthy = why.matching.filter((e) => e.state === "unhealthy");
    if (all || unhealthy.length < why.matching.length) {
      // Bound (or healthy again) since the first look.
      const m = why.matching.length;
      message = `${prefix}no endpoint ${under} matched ${
        call ? "when the call looked it up" : "at first"
      }, but ${m} endpoint${m === 1 ? " does" : "s do"}${
        queryText === "" ? "" : ` match ${queryText}`
      } now${revision}: bound or healthy since; run it again`;
      return { message, hints };
    }
    const u = unhealthy.length;
    const matching = queryText === "" ? "" : ` matching ${queryText}`;
    message = `${prefix}${u} endpoint(s) ${
      u === 1 ? "is" : "are"
    } bound ${under}${matching} but failing ${
      u === 1 ? "its" : "their"
    } health check${revision}; ${
      call ? `rafter lookup ${why.lookupName} --all` : "--all"
    } shows ${u === 1 ? "it" : "them"}`;
  }
  return { message, hints };
}

/**
 * Prints why a command found no endpoint (or, under `--json`, the error
 * as one JSON line with those words).
 */
export function printNoEndpoints(
  text: NoEndpointsText,
  context: Context,
  json?: { code: number; data: Record<string, unknown> },
): void {
  if (json !== undefined && context.globals.json) {
    context.err(JSON.stringify({
      error: { code: json.code, message: text.message, data: json.data },
    }));
    return;
  }
  context.err(
    [`rafter: ${text.message}`, ...text.hints].join("\n"),
  );
}

/** At most this many `key=value` pairs are listed. */
const MAX_PAIRS = 8;

/** The attributes bound endpoints have, for a query that matched none. */
function attributesOf(endpoints: readonly Endpoint[]): string {
  const one = endpoints.length === 1;
  const pairs = [
    ...new Set(
      endpoints.flatMap((e) =>
        Object.entries(e.attrs).map(([k, v]) => formatName("", { [k]: v }))
      ),
    ),
  ].map((pair) => pair.slice(1)).sort();
  if (pairs.length === 0) {
    return one ? "it has no attributes" : "none of them has attributes";
  }
  const without = endpoints.filter((e) => Object.keys(e.attrs).length === 0)
    .length;
  const shown = pairs.slice(0, MAX_PAIRS).join(", ") +
    (pairs.length > MAX_PAIRS ? ` and ${pairs.length - MAX_PAIRS} more` : "");
  return `${one ? "its" : "their"} attributes: ${shown}${
    without === 0
      ? ""
      : ` (${without} of them ${without === 1 ? "has" : "have"} none)`
  }`;
}

/** An endpoint's fields that people may take for attributes. */
const FIELDS: Record<string, string> = {
  id: "ids",
  url: "URLs",
  zone: "zones",
  weight: "weights",
  state: "states",
  lease: "leases",
  leaseId: "leases",
  load: "loads",
};

/**
 * A line for each query key that names an endpoint's field (its id, URL,
 * zone…) and no attribute of those bound: a query matches attributes only.
 */
function fieldHints(why: NoEndpoints): string[] {
  const keys = new Set(why.bound.flatMap((e) => Object.keys(e.attrs)));
  return Object.keys(why.query).filter((key) =>
    Object.hasOwn(FIELDS, key) && !keys.has(key)
  ).map((key) =>
    `"${key}" is not an attribute: a query matches the attributes endpoints were bound with (rafter bind --attr key=value), not their ${
      FIELDS[key]
    } (rafter lookup ${why.lookupName} lists them)${
      key === "id"
        ? "; to call one endpoint alone, bind it with an attribute of its own and query that"
        : ""
    }.`
  );
}
