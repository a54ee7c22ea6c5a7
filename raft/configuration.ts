/**
 * Cluster membership as a value (Raft dissertation chapter 4): which nodes
 * vote and which only replicate (learners), the quorum it implies, the rules
 * of a single-server change (§4.1) and the encoding of the log entry that
 * carries a change.
 *
 * A configuration change is a log entry with `type: "config"` whose `data`
 * is the JSON of the whole new configuration (not a delta: applying it twice
 * is harmless, and it can be checked on its own). Every node uses the latest
 * configuration in its log, committed or not (§4.1).
 *
 * @module
 */

import type { Configuration, Entry, NodeId } from "./types.ts";

export type { Configuration } from "./types.ts";

/** The addresses a {@link Configuration} carries (see {@link makeConfiguration}). */
export interface MemberUrls {
  /** Member id → peer URL; entries of non-members are dropped. */
  peerUrls?: Readonly<Record<NodeId, string>>;
  /** Member id → client URL; entries of non-members are dropped. */
  clientUrls?: Readonly<Record<NodeId, string>>;
}

/**
 * One single-server membership change (dissertation §4.1):
 * - `addLearner`: a new node joins as a learner (§4.2.1, to catch up first);
 * - `addVoter`: a new node, or a learner, becomes a voter;
 * - `promote`: a learner becomes a voter;
 * - `remove`: a voter or learner leaves (the leader may remove itself, §4.2.2).
 */
export interface ConfChange {
  /** What to do with `node`. */
  type: "addLearner" | "addVoter" | "promote" | "remove";
  /** The node the change is about. */
  node: NodeId;
  /**
   * `addLearner` / `addVoter`: the node's peer URL (`tcp://host:port`), so
   * every member learns where to reach it. Default: keep the one the
   * configuration has (none for a new node: then only drivers that know
   * it otherwise can reach it).
   */
  peerUrl?: string;
  /** `addLearner` / `addVoter`: the node's client URL. Default: keep the known one. */
  clientUrl?: string;
}

/**
 * A membership change that cannot be made: the message says why and what to
 * do instead. Thrown by {@link applyConfChange}, {@link checkTransition} and
 * `RaftCore.proposeConfChange`.
 */
export class ConfChangeError extends Error {
  /**
   * Makes the error.
   *
   * @param message why the change was refused and what to do.
   */
  constructor(message: string) {
    super(message);
    this.name = "ConfChangeError";
  }
}

/**
 * Makes a configuration: ids deduplicated and sorted; URLs kept for
 * members only (the fields are omitted when no member has one).
 *
 * @param voters the voting members.
 * @param learners the non-voting members. Default none.
 * @param urls the members' peer and client URLs. Default none.
 * @throws {RangeError} when an id is not a non-empty string, a node is
 * listed both as a voter and as a learner, or a URL is not a non-empty
 * string.
 */
export function makeConfiguration(
  voters: readonly NodeId[],
  learners: readonly NodeId[] = [],
  urls: MemberUrls = {},
): Configuration {
  for (const id of [...voters, ...learners]) {
    if (typeof id !== "string" || id === "") {
      throw new RangeError(
        `a member id must be a non-empty string, got ${JSON.stringify(id)}`,
      );
    }
  }
  const both = voters.filter((id) => learners.includes(id));
  if (both.length > 0) {
    throw new RangeError(
      `${
        both.join(", ")
      } listed both as voter and as learner; a node is one or the other`,
    );
  }
  const config: {
    voters: NodeId[];
    learners: NodeId[];
    peerUrls?: Record<NodeId, string>;
    clientUrls?: Record<NodeId, string>;
  } = {
    voters: [...new Set(voters)].sort(),
    learners: [...new Set(learners)].sort(),
  };
  const members = new Set([...voters, ...learners]);
  for (const field of ["peerUrls", "clientUrls"] as const) {
    const kept: Record<NodeId, string> = {};
    for (const [id, url] of Object.entries(urls[field] ?? {}).sort()) {
      if (!members.has(id)) continue;
      if (typeof url !== "string" || url === "") {
        throw new RangeError(
          `${field} of ${id} must be a non-empty string, got ${
            JSON.stringify(url)
          }`,
        );
      }
      kept[id] = url;
    }
    if (Object.keys(kept).length > 0) config[field] = kept;
  }
  return config;
}

/** The peer URL `config` records for `id`, or null. */
export function peerUrlOf(config: Configuration, id: NodeId): string | null {
  return config.peerUrls?.[id] ?? null;
}

/** The client URL `config` records for `id`, or null. */
export function clientUrlOf(config: Configuration, id: NodeId): string | null {
  return config.clientUrls?.[id] ?? null;
}

/** Whether `id` is a voter of `config`. */
export function isVoter(config: Configuration, id: NodeId): boolean {
  return config.voters.includes(id);
}

/** Whether `id` is a learner of `config`. */
export function isLearner(config: Configuration, id: NodeId): boolean {
  return config.learners.includes(id);
}

/** Whether `id` is a voter or a learner of `config`. */
export function isMember(config: Configuration, id: NodeId): boolean {
  return isVoter(config, id) || isLearner(config, id);
}

/** Every member (voters, then learners). */
export function membersOf(config: Configuration): NodeId[] {
  return [...config.voters, ...config.learners];
}

/**
 * How many voters make a quorum: a strict majority of the voters (Raft
 * paper §5.2); learners never count.
 */
export function quorumSize(config: Configuration): number {
  return Math.floor(config.voters.length / 2) + 1;
}

/**
 * Whether two configurations have the same voters, learners, peer URLs and
 * client URLs.
 */
export function sameConfiguration(a: Configuration, b: Configuration): boolean {
  // The core compares its configuration with the one it last reported on
  // every hasReady()/ready(): almost always the same object.
  if (a === b) return true;
  const same = (x: readonly NodeId[], y: readonly NodeId[]) =>
    x.length === y.length && x.every((id) => y.includes(id));
  const sameUrls = (
    x: Readonly<Record<NodeId, string>> = {},
    y: Readonly<Record<NodeId, string>> = {},
  ) =>
    Object.keys(x).length === Object.keys(y).length &&
    Object.entries(x).every(([id, url]) => y[id] === url);
  return same(a.voters, b.voters) && same(a.learners, b.learners) &&
    sameUrls(a.peerUrls, b.peerUrls) && sameUrls(a.clientUrls, b.clientUrls);
}

/**
 * Checks that going from `from` to `to` is a safe single-server change
 * (dissertation §4.1): at most one voter added or removed, so that every
 * majority of `from` intersects every majority of `to`; something changes;
 * at least one voter is left.
 *
 * @throws {ConfChangeError} when the transition is not allowed.
 */
export function checkTransition(from: Configuration, to: Configuration): void {
  if (sameConfiguration(from, to)) {
    throw new ConfChangeError(
      "the change changes nothing (the node already has that role); nothing to do",
    );
  }
  const added = to.voters.filter((id) => !from.voters.includes(id));
  const removed = from.voters.filter((id) => !to.voters.includes(id));
  if (added.length + removed.length > 1) {
    throw new ConfChangeError(
      `the change adds voters [${added}] and removes [${removed}]; only one ` +
        "voter may change at a time (dissertation §4.1): make one change, " +
        "wait for it to commit, then make the next",
    );
  }
  if (to.voters.length === 0) {
    throw new ConfChangeError(
      "the change would leave no voter; add another voter first",
    );
  }
}

/**
 * The configuration after `change`.
 *
 * @throws {ConfChangeError} when the change does not apply: `addLearner` of
 * a voter (remove it first), `promote` of a node that is not a learner,
 * `remove` of a non-member or of the last voter, a change that changes
 * nothing, or an empty or non-string node id.
 */
export function applyConfChange(
  config: Configuration,
  change: ConfChange,
): Configuration {
  const { type, node } = change;
  for (const field of ["peerUrl", "clientUrl"] as const) {
    const url = change[field];
    if (url !== undefined && (typeof url !== "string" || url === "")) {
      throw new ConfChangeError(
        `a membership change's ${field} must be a non-empty string (tcp://host:port), got ${
          JSON.stringify(url)
        }`,
      );
    }
  }
  if (typeof node !== "string" || node === "") {
    throw new ConfChangeError(
      `a membership change needs a node id (a non-empty string), got ${
        JSON.stringify(node)
      }`,
    );
  }
  const voters = config.voters.filter((id) => id !== node);
  const learners = config.learners.filter((id) => id !== node);
  const urls: MemberUrls = {
    peerUrls: { ...config.peerUrls },
    clientUrls: { ...config.clientUrls },
  };
  if (type === "addLearner" || type === "addVoter") {
    if (change.peerUrl !== undefined) {
      urls.peerUrls = { ...urls.peerUrls, [node]: change.peerUrl };
    }
    if (change.clientUrl !== undefined) {
      urls.clientUrls = { ...urls.clientUrls, [node]: change.clientUrl };
    }
  }
  let next: Configuration;
  switch (type) {
    case "addLearner":
      if (isVoter(config, node)) {
        throw new ConfChangeError(
          `${node} is a voter; to make it a learner, remove it, then add it as a learner`,
        );
      }
      next = makeConfiguration(voters, [...learners, node], urls);
      break;
    case "addVoter":
      next = makeConfiguration([...voters, node], learners, urls);
      break;
    case "promote":
      if (!isLearner(config, node)) {
        throw new ConfChangeError(
          `${node} is not a learner; only a learner can be promoted (add it with addLearner first)`,
        );
      }
      next = makeConfiguration([...voters, node], learners, urls);
      break;
    case "remove":
      if (!isMember(config, node)) {
        throw new ConfChangeError(
          `${node} is not a member of the cluster; nothing to remove`,
        );
      }
      // The removed node's URLs go with it (makeConfiguration keeps
      // members' only).
      next = makeConfiguration(voters, learners, urls);
      break;
    default:
      throw new ConfChangeError(
        `unknown membership change type ${
          JSON.stringify(type)
        }; use addLearner, addVoter, promote or remove`,
      );
  }
  checkTransition(config, next);
  return next;
}

/**
 * The `data` of a config entry: the JSON of the whole configuration,
 * `{"voters":[…],"learners":[…]}` plus `"peerUrls":{…}` and
 * `"clientUrls":{…}` when the configuration has any.
 */
export function encodeConfiguration(config: Configuration): string {
  return JSON.stringify({
    voters: config.voters,
    learners: config.learners,
    ...(config.peerUrls === undefined ? {} : { peerUrls: config.peerUrls }),
    ...(config.clientUrls === undefined
      ? {}
      : { clientUrls: config.clientUrls }),
  });
}

/**
 * Reads the `data` of a config entry.
 *
 * @throws {TypeError} when `data` is not JSON of
 * `{ voters: string[] (non-empty), learners: string[], peerUrls?: {id:
 * url}, clientUrls?: {id: url} }` with no node in both lists.
 */
export function decodeConfiguration(data: string): Configuration {
  const fail = (why: string): never => {
    throw new TypeError(
      `a config entry must hold {"voters":[ids, at least one],"learners":[ids]}: ${why}`,
    );
  };
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return fail(`not JSON: ${JSON.stringify(data.slice(0, 80))}`);
  }
  const { voters, learners, peerUrls, clientUrls } = (value ?? {}) as Record<
    string,
    unknown
  >;
  const ids = (list: unknown) =>
    Array.isArray(list) &&
    list.every((id) => typeof id === "string" && id !== "");
  if (!ids(voters) || !ids(learners)) {
    return fail("voters and learners must be arrays of non-empty strings");
  }
  if ((voters as string[]).length === 0) return fail("no voter");
  const urlMap = (map: unknown) =>
    map === undefined ||
    (typeof map === "object" && map !== null && !Array.isArray(map) &&
      Object.values(map).every((url) => typeof url === "string" && url !== ""));
  if (!urlMap(peerUrls) || !urlMap(clientUrls)) {
    return fail("peerUrls and clientUrls must map ids to non-empty strings");
  }
  try {
    return makeConfiguration(voters as string[], learners as string[], {
      peerUrls: peerUrls as Record<NodeId, string> | undefined,
      clientUrls: clientUrls as Record<NodeId, string> | undefined,
    });
  } catch (error) {
    return fail((error as Error).message);
  }
}

/** Whether `entry` carries a configuration (`type: "config"`). */
export function isConfigEntry(entry: Entry): boolean {
  return entry.type === "config";
}

/** A config entry's position and the configuration it holds. */
export interface ConfigEntry {
  /** The entry's index. */
  index: number;
  /** The entry's term. */
  term: number;
  /** The configuration the entry holds. */
  configuration: Configuration;
}

/**
 * The config entries among `entries`, in order, decoded.
 *
 * @throws {TypeError} when a config entry's data is malformed
 * (see {@link decodeConfiguration}).
 */
export function configEntries(entries: readonly Entry[]): ConfigEntry[] {
  const found: ConfigEntry[] = [];
  for (const entry of entries) {
    if (!isConfigEntry(entry)) continue;
    found.push({
      index: entry.index,
      term: entry.term,
      configuration: decodeConfiguration(entry.data),
    });
  }
  return found;
}

/**
 * The configuration in force after `entries` (a node's log, or the part of
 * it after a snapshot): the last config entry's, or `fallback` (the
 * snapshot's or the bootstrap configuration) when there is none. Drivers use
 * it at restart to know which peers to connect to.
 *
 * @throws {TypeError} when a config entry's data is malformed.
 */
export function latestConfiguration(
  entries: readonly Entry[],
  fallback: Configuration,
): Configuration {
  for (let i = entries.length - 1; i >= 0; i--) {
    if (isConfigEntry(entries[i])) return decodeConfiguration(entries[i].data);
  }
  return fallback;
}
