/**
 * Which registry cluster a command's `NAME@CLUSTER` reaches, for its
 * messages: a sibling cluster and its registry URLs as the local registry
 * names them (`registry.status` `federation`, the client's `clusters()`),
 * this registry's own cluster, or no known cluster (the `@…` is then part
 * of a local name, as docs/federation.md says).
 *
 * @module
 */

import { clusterSuffix, type RafterClient } from "../stub/client.ts";

/** The cluster a name's `@CLUSTER` suffix names, as the local registry told. */
export interface ClusterTarget {
  /** The cluster the suffix names. */
  cluster: string;
  /** The name without `@CLUSTER` (its query kept). */
  base: string;
  /**
   * `sibling`: a sibling cluster, reached through `urls`; `own`: the local
   * registry's own cluster (the name is the local `base`); `unknown`: no
   * cluster the local registry knows (the name, `@` and all, is local);
   * `misplaced`: a sibling's suffix written before the query
   * (`name@b?key=value`, a local name: see `respelled`).
   */
  kind: "sibling" | "own" | "unknown" | "misplaced";
  /** For `misplaced`: the spelling that reaches the sibling. */
  respelled?: string;
  /** The sibling's registry client URLs (empty unless `sibling`). */
  urls: readonly string[];
  /** Every sibling the local registry names. */
  siblings: readonly string[];
}

/**
 * The cluster `name`'s `@CLUSTER` suffix names, or null for a name with
 * none. Asks the local registry for its siblings (the client keeps them
 * for the stub and lookups that follow).
 *
 * @throws the local registry's error when it cannot tell its siblings:
 * the failure is then the local registry's, not a sibling's.
 */
export async function clusterTarget(
  client: RafterClient,
  name: string,
): Promise<ClusterTarget | null> {
  const at = clusterSuffix(name);
  if (at === null) return await misplaced(client, name);
  const clusters = await client.clusters();
  const siblings = Object.keys(clusters);
  const urls = Object.hasOwn(clusters, at.cluster)
    ? clusters[at.cluster]
    : undefined;
  if (urls !== undefined) {
    return { ...at, kind: "sibling", urls, siblings };
  }
  // Not a sibling: this cluster's own name, or none it knows.
  const own = await client.registry.status().then(
    (status) => status.federation?.cluster === at.cluster,
    () => false,
  );
  // An `@` in the query's last value (`users?email=ada@example.com`)
  // that names no cluster is that value's: nothing to say.
  if (!own && at.base.includes("?")) return null;
  return { ...at, kind: own ? "own" : "unknown", urls: [], siblings };
}

/**
 * `name@b?key=value` with sibling `b`: the suffix must follow the query
 * (the client reads `@…` from the end), so this is a local name; the
 * target says how to write it. Null for any other name.
 */
async function misplaced(
  client: RafterClient,
  name: string,
): Promise<ClusterTarget | null> {
  const mark = name.indexOf("?");
  const at = mark === -1 ? null : clusterSuffix(name.slice(0, mark));
  if (at === null) return null;
  const clusters = await client.clusters().catch(() => ({}));
  if (!Object.hasOwn(clusters, at.cluster)) return null;
  return {
    cluster: at.cluster,
    base: name,
    kind: "misplaced",
    urls: [],
    siblings: Object.keys(clusters),
    respelled: `${at.base}${name.slice(mark)}@${at.cluster}`,
  };
}

/**
 * A line saying that `target`'s cluster is no sibling of the local
 * registry at `registry` (so `name` is a local name), or null when it is
 * one.
 */
export function notASiblingLine(
  target: ClusterTarget | null | undefined,
  name: string,
  registry: readonly string[],
): string | null {
  if (target?.kind === "misplaced") {
    return `"${name}" is a local name: the @${target.cluster} of a sibling cluster goes after the query, as in '${target.respelled}'.`;
  }
  if (target?.kind !== "unknown") return null;
  const known = target.siblings.length === 0
    ? "it belongs to no federation: it names no siblings"
    : `its siblings: ${target.siblings.join(", ")}`;
  return `${target.cluster} is not a sibling cluster of the registry at ${
    registry.join(", ")
  } (${known}), so "${name}" was looked up there as a local name, "@${target.cluster}" and all.`;
}

/** The registry URLs of `target`'s sibling, comma-separated for --registry. */
export function siblingRegistryFlag(target: ClusterTarget): string {
  return target.urls.join(",");
}
