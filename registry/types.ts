/**
 * Shapes of the registry's data and of its JSON-RPC API, shared by the
 * registry service and its clients. Web-standard (it imports only
 * `protocol.ts`, which is too).
 *
 * @module
 */

/** One server bound under a service name. */
export interface Endpoint {
  /** Unique within its name (e.g. `"hello-1"`); re-binding the same id replaces it. */
  id: string;
  /** Where the server listens: `tcp://host:port`. */
  url: string;
}

/** Params of `registry.bind`. */
export interface BindParams {
  /** Service name, 1..256 characters. */
  name: string;
  /** The endpoint; `id` defaults to the URL. */
  endpoint: { id?: string; url: string };
}

/** Result of `registry.bind` and `registry.unbind`. */
export interface WriteResult {
  /** Registry revision after the write (bumped by every change). */
  revision: number;
  /** `unbind`: how many endpoints were removed (0 or 1). */
  removed?: number;
}

/** Params of `registry.unbind`. */
export interface UnbindParams {
  /** Service name the endpoint is bound under. */
  name: string;
  /** Id of the endpoint to remove. */
  id: string;
}

/**
 * Read consistency of `registry.lookup`: `linearizable` (default) reflects
 * every write acknowledged before the lookup began (ReadIndex through the
 * leader); `serializable` answers from the node's own state at once, which
 * may lag but works without a quorum.
 */
export type Consistency = "linearizable" | "serializable";

/** Params of `registry.lookup`. */
export interface LookupParams {
  /** Service name to look up. */
  name: string;
  /** Read consistency. Default `"linearizable"`. */
  consistency?: Consistency;
}

/** Result of `registry.lookup`: the stubs list of a name. */
export interface LookupResult {
  /** The name looked up. */
  name: string;
  /** Bound endpoints in binding order; empty when none. */
  endpoints: Endpoint[];
  /** Revision of the state the answer was read from. */
  revision: number;
}

/**
 * Result of `registry.status`, and one member in it: the shapes of
 * `protocol.ts`, the registry's full contract.
 */
export type { MemberStatus, RegistryStatus } from "./protocol.ts";

/** Data of a `NOT_LEADER` (-32001) error: where to send the write. */
export interface NotLeaderData {
  /** The leader's node id, or null when unknown. */
  leaderId: string | null;
  /** The leader's `tcp://host:port` URL, or null when unknown. */
  leaderUrl: string | null;
}
