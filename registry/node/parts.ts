/**
 * The parts of a started registry node, by type: what
 * {@link RegistryNodeInternals} shows to tests and to the registry's own
 * assembly. Apart from `internals.ts`, which checks a node is one the
 * assembly started, so that the assembly can name the type it implements
 * without importing that check.
 *
 * @module
 */

import type { RaftNode } from "../../raft/node.ts";
import type { PeerServer } from "../../raft/peer_server.ts";
import type { PeerTransport } from "../../raft/peer_transport.ts";
import type { RpcServer } from "../../rpc/server/server.ts";
import type { ApplyResult, RegistryState } from "../state.ts";
import type { LeaseKeeper } from "../lease_keeper.ts";
import type { WatchHub } from "../watch_hub.ts";
import type { LocalArea } from "../local_area.ts";
import type { RegistryNode } from "./options.ts";
import type { RegistryNodeSnapshot } from "./replica.ts";

/** A started registry node with its parts showing. */
export interface RegistryNodeInternals extends RegistryNode {
  /** The Raft driver. */
  readonly raft: RaftNode<ApplyResult>;
  /** The replicated registry state on this node. */
  readonly state: RegistryState;
  /** Lease timing and reported loads on this node. */
  readonly leases: LeaseKeeper;
  /** The watches this node serves. */
  readonly watches: WatchHub;
  /** This node's local-area bindings. */
  readonly local: LocalArea;
  /** Smallest lease TTL this node accepts, ms (1.5 × the election timeout). */
  readonly minTtlMs: number;
  /**
   * The registry at this node's applied index, for log compaction: the
   * deterministic state, and the leases' remaining times as this node times
   * them (hints for the node that restores it; see
   * `restoreRegistrySnapshot`).
   */
  snapshot(): RegistryNodeSnapshot;
  /** The client port's RPC server. */
  readonly server: RpcServer;
  /** The peer port. */
  readonly peerServer: PeerServer;
  /** The authenticated connections to the peers (`notify` for peer messages). */
  readonly transport: PeerTransport;
}
