/**
 * Fail-over across federated registry clusters (Consul's prepared-query
 * failover): a stub's calls go to its name's endpoints in the client's
 * own cluster while it has a serving one, else to the first sibling
 * cluster (in the order given) that has one, and back as soon as the
 * local cluster lists one again.
 *
 * @module
 */

import type { Candidate } from "../distributors/distributor.ts";
import type { ClusterMap } from "./cluster_map.ts";

/** A sibling cluster's map, made when the client knows the cluster's registry. */
export interface SiblingMap {
  /** The cluster's name. */
  cluster: string;
  /** Its map of the name. */
  map: ClusterMap;
}

/**
 * The maps of one name in the local cluster and its siblings, as one map
 * for a stub.
 */
export class FailoverMap {
  readonly #local: ClusterMap;
  readonly #siblings: () => Promise<readonly SiblingMap[]>;
  #known: readonly SiblingMap[] = [];
  /** Clusters whose last lookup failed (unreachable), with why. */
  readonly unreachable = new Map<string, string>();

  /**
   * @param local the name's map in the client's cluster.
   * @param siblings the name's maps in the sibling clusters, in fail-over
   * order (resolved once the client knows its domain).
   */
  constructor(
    local: ClusterMap,
    siblings: () => Promise<readonly SiblingMap[]>,
  ) {
    this.#local = local;
    this.#siblings = siblings;
  }

  /** The cluster calls go to now: "" for the local one. */
  get serving(): string {
    return this.#pick()?.cluster ?? "";
  }

  candidates(): readonly Candidate[] {
    return (this.#pick()?.map ?? this.#local).candidates();
  }

  needsLookup(): boolean {
    const picked = this.#pick();
    return picked === null || picked.map.needsLookup();
  }

  /**
   * The local endpoints when the local cluster has a serving one (after a
   * lookup if needed), else the first sibling's that has; a sibling that
   * cannot be reached is skipped (and listed in {@link unreachable}).
   *
   * @throws what the local lookup threw, when no cluster has an endpoint.
   */
  async endpoints(): Promise<readonly Candidate[]> {
    let localError: unknown = null;
    try {
      const local = await this.#local.endpoints();
      if (hasServing(this.#local)) return local;
    } catch (error) {
      localError = error;
    }
    try {
      this.#known = await this.#siblings();
    } catch {
      // No domain known: the local answer stands.
    }
    for (const { cluster, map } of this.#known) {
      try {
        const endpoints = await map.endpoints();
        this.unreachable.delete(cluster);
        if (hasServing(map)) return endpoints;
      } catch (error) {
        this.unreachable.set(cluster, (error as Error).message);
      }
    }
    if (localError !== null) throw localError;
    return this.#local.candidates();
  }

  /** The maps belong to the client, which closes them. */
  close(): void {}

  #pick(): { cluster: string; map: ClusterMap } | null {
    if (hasServing(this.#local)) return { cluster: "", map: this.#local };
    for (const sibling of this.#known) {
      if (hasServing(sibling.map)) return sibling;
    }
    return null;
  }
}

/** Whether `map` was looked up and lists a serving endpoint (per call: no copy of the map). */
function hasServing(map: ClusterMap): boolean {
  return map.updatedAt !== null && map.servingCount > 0;
}
