/**
 * The registry's JSON-RPC API (`registry.bind`, `registry.unbind`,
 * `registry.lookup`, `registry.status`): validates params, turns writes
 * into Raft proposals, and serves lookups from the replicated state.
 * Served on the client port only; peers use the peer port.
 *
 * @module
 */

import type { Methods } from "../rpc/dispatcher.ts";
import {
  INVALID_PARAMS,
  NOT_LEADER,
  RpcError,
  UNAVAILABLE,
} from "../rpc/errors.ts";
import { formatTcpUrl, parseTcpUrl } from "../rpc/transport.ts";
import { NotLeaderError } from "../raft/core.ts";
import { type RaftNode, RaftUnavailableError } from "../raft/node.ts";
import { type Command, encodeCommand, type RegistryState } from "./state.ts";
import type {
  Consistency,
  Endpoint,
  LookupResult,
  MemberStatus,
  NotLeaderData,
  RegistryStatus,
  WriteResult,
} from "./types.ts";

/** Longest service name or endpoint id, in characters. */
export const MAX_NAME_LENGTH = 256;

/** What the registry's Raft node returns for each applied entry. */
export type ApplyResult = WriteResult | { error: string };

/**
 * The members as this node sees them, for `registry.status` and the
 * leader's URL in NOT_LEADER hints (the registry node keeps it from its
 * peer directory).
 */
export interface MemberView {
  /** This node's peer URL. */
  readonly peerUrl: string;
  /** Every member, this node included. */
  members(): MemberStatus[];
  /** Member `id`'s client URL, as it announced it to this node, or null. */
  clientUrl(id: string): string | null;
}

/** What {@link registryMethods} needs. */
export interface RegistryServiceOptions {
  /** The node's Raft driver, applying entries to `state`. */
  node: RaftNode<ApplyResult>;
  /** The replicated state. */
  state: RegistryState;
  /** This node's own client URL (read when needed: the port may be learnt late). */
  url: () => string;
  /** The members: peer URLs, reachability, learnt client URLs. */
  members: MemberView;
  /**
   * How long a write waits to commit, ms. Default 3000: under the registry
   * client's 4000 ms per attempt (a client waits longer than the server it
   * calls).
   */
  writeTimeoutMs?: number;
  /** Election timeout the node runs with, ms; sent as a retry hint. */
  electionTimeoutMs?: number;
}

/**
 * Builds the registry's JSON-RPC methods. Params are by name (an object) or
 * by position in the order the docs list them.
 *
 * Errors: -32602 for bad params (the message names the field);
 * -32001 NOT_LEADER on a follower for writes, with `data: { leaderId,
 * leaderUrl }`; -32006 UNAVAILABLE when no leader is known or a write or
 * linearizable read could not complete in time (retry).
 *
 * @example
 * ```ts ignore
 * import { serve } from "../rpc/serve.ts";
 * const server = serve({ port: 7001, methods: registryMethods({ node, state, url, members }) });
 * ```
 */
export function registryMethods(options: RegistryServiceOptions): Methods {
  const { node, state } = options;
  const retryAfterMs = options.electionTimeoutMs ?? 1000;
  const leaderUrl = (leader: string): string | null =>
    leader === node.status.id
      ? options.url()
      : options.members.clientUrl(leader);

  const propose = async (command: Command): Promise<WriteResult> => {
    try {
      const result = await node.propose(encodeCommand(command), {
        timeoutMs: options.writeTimeoutMs ?? 3000,
      });
      if ("error" in result) {
        throw new RpcError(
          INVALID_PARAMS,
          `Invalid params: ${result.error}`,
        );
      }
      return result;
    } catch (error) {
      throw toRpcError(error, node, leaderUrl, retryAfterMs, "write");
    }
  };

  return {
    "registry.bind": (first: unknown, second?: unknown) => {
      const params = typeof first === "string"
        ? { name: first, endpoint: second }
        : asObject(first, "registry.bind", "{ name, endpoint: { id?, url } }");
      const name = requireName(params.name, "name");
      const endpoint = requireEndpoint(params.endpoint);
      return propose({ op: "bind", name, endpoint });
    },

    "registry.unbind": (first: unknown, second?: unknown) => {
      const params = typeof first === "string"
        ? { name: first, id: second }
        : asObject(first, "registry.unbind", "{ name, id }");
      const name = requireName(params.name, "name");
      const id = requireName(params.id, "id");
      return propose({ op: "unbind", name, id });
    },

    "registry.lookup": async (
      first: unknown,
      second?: unknown,
    ): Promise<LookupResult> => {
      const params = typeof first === "string"
        ? { name: first, consistency: second }
        : asObject(first, "registry.lookup", "{ name, consistency? }");
      const name = requireName(params.name, "name");
      const consistency = requireConsistency(params.consistency);
      if (consistency === "linearizable") {
        try {
          await node.readBarrier();
        } catch (error) {
          throw toRpcError(error, node, leaderUrl, retryAfterMs, "read");
        }
      }
      return state.lookup(name);
    },

    "registry.status": (): RegistryStatus => {
      const status = node.status;
      const electionTimeoutMs = options.electionTimeoutMs ?? 1000;
      return {
        id: status.id,
        url: options.url(),
        peerUrl: options.members.peerUrl,
        term: status.term,
        role: status.role,
        leader: status.leader,
        leaderUrl: status.leader === null ? null : leaderUrl(status.leader),
        commitIndex: status.commitIndex,
        appliedIndex: status.appliedIndex,
        revision: state.revision,
        // Leases and watches are not implemented yet.
        compactRevision: 0,
        leases: 0,
        watchers: 0,
        electionTimeoutMs,
        minTtlMs: 1.5 * electionTimeoutMs,
        members: options.members.members(),
      };
    },
  };
}

function toRpcError(
  error: unknown,
  node: RaftNode<ApplyResult>,
  leaderUrl: (leader: string) => string | null,
  retryAfterMs: number,
  kind: "write" | "read",
): unknown {
  if (error instanceof NotLeaderError) {
    if (error.leader === null) {
      return new RpcError(
        UNAVAILABLE,
        "Unavailable: the registry is electing a leader; retry shortly",
        { retryAfterMs },
      );
    }
    return notLeaderError(
      node.status.id,
      error.leader,
      leaderUrl(error.leader),
    );
  }
  if (error instanceof RaftUnavailableError) {
    const hint = kind === "read"
      ? ', or pass consistency: "serializable" for a possibly stale answer'
      : "";
    return new RpcError(
      UNAVAILABLE,
      `Unavailable: ${error.message}${hint}`,
      { retryAfterMs },
    );
  }
  return error;
}

/** The -32001 error a follower answers a write with. */
function notLeaderError(
  self: string,
  leaderId: string,
  leaderUrl: string | null,
): RpcError {
  const data: NotLeaderData = { leaderId, leaderUrl };
  return new RpcError(
    NOT_LEADER,
    `Not leader: node ${self} is a follower; send writes to the leader ${leaderId} at ${
      leaderUrl ?? "(unknown URL)"
    }`,
    data,
  );
}

function asObject(
  value: unknown,
  method: string,
  shape: string,
): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new RpcError(
      INVALID_PARAMS,
      `Invalid params: ${method} takes ${shape}`,
    );
  }
  return value as Record<string, unknown>;
}

function requireName(value: unknown, field: string): string {
  if (
    typeof value !== "string" || value.length === 0 ||
    value.length > MAX_NAME_LENGTH
  ) {
    throw new RpcError(
      INVALID_PARAMS,
      `Invalid params: "${field}" must be a string of 1..${MAX_NAME_LENGTH} characters`,
    );
  }
  return value;
}

function requireEndpoint(value: unknown): Endpoint {
  const endpoint = asObject(
    value,
    "registry.bind",
    "{ name, endpoint: { id?, url } }",
  );
  if (typeof endpoint.url !== "string") {
    throw new RpcError(
      INVALID_PARAMS,
      'Invalid params: "endpoint.url" must be a string like tcp://127.0.0.1:9001',
    );
  }
  let url: string;
  try {
    // One spelling per address (tcp://host:port), so the same server bound
    // as "127.0.0.1:9001" and "tcp://127.0.0.1:9001" is one endpoint.
    url = formatTcpUrl(parseTcpUrl(endpoint.url));
  } catch (error) {
    throw new RpcError(
      INVALID_PARAMS,
      `Invalid params: "endpoint.url": ${(error as Error).message}`,
    );
  }
  const id = endpoint.id === undefined
    ? url
    : requireName(endpoint.id, "endpoint.id");
  return { id, url };
}

function requireConsistency(value: unknown): Consistency {
  if (value === undefined) return "linearizable";
  if (value === "linearizable" || value === "serializable") return value;
  throw new RpcError(
    INVALID_PARAMS,
    'Invalid params: "consistency" must be "linearizable" or "serializable"',
  );
}
