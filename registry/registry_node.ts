/**
 * One running registry node: a Raft node whose state machine is the
 * registry, served with the registry API and the Raft peer method on one
 * TCP port.
 *
 * @module
 */

import { type RpcServer, serve } from "../rpc/serve.ts";
import { formatTcpUrl, type TcpAddress } from "../rpc/transport.ts";
import { RaftNode } from "../raft/node.ts";
import type { SoftState } from "../raft/core.ts";
import { type ApplyResult, registryMethods } from "./service.ts";
import { RegistryState } from "./state.ts";

/** Settings of {@link startRegistryNode}. */
export interface RegistryNodeOptions {
  /** This node's id, a key of `peers`. */
  id: string;
  /** Address to listen on; port 0 picks a free port (single-node only). */
  listen: TcpAddress;
  /**
   * Every voter's id → `tcp://host:port`, this node included. Omit for a
   * single-node registry.
   */
  peers?: Record<string, string>;
  /** Folder for this node's log; created if missing. */
  dataDir: string;
  /** Milliseconds per Raft tick. Default 100. */
  tickMs?: number;
  /** Election timeout in ticks (randomized up to twice this). Default 10. */
  electionTicks?: number;
  /** Largest request frame accepted, bytes. Default 8 MiB. */
  maxFrameBytes?: number;
  /** Receives one line per notable event (leader changes). */
  log?(line: string): void;
  /** Called if storage fails and the node had to stop. */
  onFatal?(error: unknown): void;
}

/** A started registry node. */
export interface RegistryNode {
  /** This node's id. */
  readonly id: string;
  /** The URL it serves on (actual port). */
  readonly url: string;
  /** The Raft driver. */
  readonly raft: RaftNode<ApplyResult>;
  /** The replicated registry state on this node. */
  readonly state: RegistryState;
  /** The RPC server. */
  readonly server: RpcServer;
  /**
   * Stops serving and stops the Raft node (the log stays on disk). With
   * `graceMs`, first drains the server: requests under way are answered and
   * clients are told to go elsewhere, for up to that many ms.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
}

/**
 * Starts a registry node: reloads its log from `dataDir`, joins its peers
 * and serves `registry.*`, `raft.step` and `rpc.ping`.
 *
 * @throws {Error} when the data folder is unusable or the port is taken.
 *
 * @example
 * ```ts ignore
 * import { startRegistryNode } from "./registry_node.ts";
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir: await Deno.makeTempDir(),
 * });
 * console.log(node.url);
 * await node.stop();
 * ```
 */
export async function startRegistryNode(
  options: RegistryNodeOptions,
): Promise<RegistryNode> {
  const tickMs = options.tickMs ?? 100;
  const electionTicks = options.electionTicks ?? 10;
  const listenUrl = formatTcpUrl(options.listen);
  const peers = options.peers ?? { [options.id]: listenUrl };
  if (options.listen.port === 0 && Object.keys(peers).length > 1) {
    throw new Error(
      "a node of a multi-node registry needs a fixed port: its peers must know where to reach it",
    );
  }
  const state = new RegistryState();
  const log = options.log ?? (() => {});
  const raft = await RaftNode.start<ApplyResult>({
    id: options.id,
    peers,
    dataDir: options.dataDir,
    tickMs,
    electionTicks,
    apply: (entry) => state.apply(entry.data),
    onSoftState: (soft: SoftState) => log(describeRole(options.id, soft)),
    onFatal: options.onFatal,
  });
  let selfUrl = listenUrl;
  let server: RpcServer;
  try {
    server = serve({
      hostname: options.listen.hostname,
      port: options.listen.port,
      maxFrameBytes: options.maxFrameBytes ?? 8 * 1024 * 1024,
      methods: {
        ...raft.methods,
        ...registryMethods({
          node: raft,
          state,
          url: () => selfUrl,
          electionTimeoutMs: tickMs * electionTicks,
        }),
      },
    });
  } catch (error) {
    await raft.stop();
    throw error;
  }
  selfUrl = server.url;
  return {
    id: options.id,
    url: server.url,
    raft,
    state,
    server,
    async stop(options = {}) {
      if (options.graceMs !== undefined) await server.drain(options.graceMs);
      await server.close();
      await raft.stop();
    },
  };
}

/** One log line for a role change, e.g. "n1: follower in term 3, leader n2". */
function describeRole(id: string, soft: SoftState): string {
  switch (soft.role) {
    case "leader":
      return `${id}: leader of term ${soft.term}`;
    case "candidate":
      return `${id}: candidate in term ${soft.term}, asking for votes`;
    case "follower":
      return `${id}: follower in term ${soft.term}, leader ${
        soft.leader ?? "unknown (election under way)"
      }`;
  }
}
