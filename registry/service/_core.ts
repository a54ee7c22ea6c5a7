/**
 * What every part of the registry service shares: the node it serves from
 * ({@link RegistryContext}), proposing a command and waiting for it to
 * apply, the read barrier, the leader checks, and the mapping of Raft's
 * errors to the registry's codes (NOT_LEADER, UNAVAILABLE).
 *
 * @module
 */

import { INVALID_PARAMS, RpcError } from "../../rpc/errors.ts";
import { LeadershipTransferError, NotLeaderError } from "../../raft/core.ts";
import { type RaftNode, RaftUnavailableError } from "../../raft/node.ts";
import {
  type Endpoint,
  LEASE_NOT_FOUND,
  NOT_LEADER,
  type NotLeaderData,
  type RegistryMethod,
  type RegistryStatus,
  type ResultOf,
  UNAVAILABLE,
  type UnavailableData,
} from "../../protocol/registry.ts";
import type { LeaseKeeper } from "../lease_keeper.ts";
import type { LocalArea } from "../local_area.ts";
import {
  type ApplyResult,
  type Binding,
  type Command,
  type CommandValue,
  encodeCommand,
  type RegistryState,
  toEndpoint,
} from "../state.ts";
import type { WatchHub } from "../watch_hub.ts";

/** What the registry's methods need from the node that serves them. */
export interface RegistryContext {
  /** The node's Raft driver, applying entries to `state`. */
  readonly raft: RaftNode<ApplyResult>;
  /** The replicated state. */
  readonly state: RegistryState;
  /** Lease timing and reported loads. */
  readonly leases: LeaseKeeper;
  /** Watches open on this node. */
  readonly watches: WatchHub;
  /** This node's local-area bindings. */
  readonly local: LocalArea;
  /** Whether this node leads and has applied the first entry of its term. */
  leaderReady(): boolean;
  /** The client URL of member `id`, if known. */
  clientUrlOf(id: string): string | null;
  /** The node's status, for `registry.status`. */
  status(): RegistryStatus;
  /** The cluster's id (16 hex digits), told to joining nodes. */
  readonly clusterId: string;
  /**
   * Asks this leader to promote learner `member` once its match index
   * reaches the commit index (the `--join` policy, checked every tick).
   */
  promoteWhenCaughtUp(member: string): void;
  /** Tells `member`, just removed (committed), that it is no member any more. */
  memberRemoved(member: string): void;
  /**
   * Resolves at the next change of this node's term, role or leader, or
   * after `timeoutMs`, whichever comes first.
   */
  nextSoftState(timeoutMs: number): Promise<void>;
  /**
   * Why no leader can be elected, when this node reaches too few members
   * for a quorum (e.g. "this node reaches 1 of 3 members …"), or null.
   */
  quorumProblem?(): string | null;
  /**
   * The registry as a node snapshot (JSON) with the index and term of the
   * last entry it reflects, for `registry.snapshot`; absent: the method
   * answers that this node cannot take one.
   */
  takeSnapshot?(): { data: string; index: number; term: number };
  /** Smallest lease TTL accepted, ms (1.5 × the election timeout). */
  readonly minTtlMs: number;
  /** The election timeout, ms; a retry hint while a leader is elected. */
  readonly electionTimeoutMs: number;
  /**
   * How long a write waits to commit, ms. @default 3000 (under the registry
   * client's 4000 ms per attempt: a client waits longer than the server it
   * calls).
   */
  readonly writeTimeoutMs?: number;
  /** How long a linearizable read waits for the leader's confirmation, ms. @default 2000 */
  readonly readTimeoutMs?: number;
  /**
   * Enforce auth on this node whatever the replicated flag says (`--auth`).
   * @default false
   */
  readonly auth?: boolean;
  /** Where this node's bootstrap admin token file is, for error hints. */
  readonly adminTokenFile?: string;
  /** Most bindings one lease may carry (LIMIT_EXCEEDED beyond). @default 1_000 */
  readonly maxBindingsPerLease?: number;
  /** Most tokens the registry holds (LIMIT_EXCEEDED beyond). @default 5_000 */
  readonly maxTokens?: number;
  /**
   * With auth enforced, close a connection that has not authenticated
   * this long after it opened, ms; 0 never. @default 10_000
   */
  readonly authTimeoutMs?: number;
}

/** The methods `M` of the contract, each answering its contract result. */
export type MethodTable<M extends RegistryMethod> = {
  [K in M]: (...args: never[]) => Promise<ResultOf<K>>;
};

/** What the parts of the service share, built once per service. */
export class ServiceCore {
  /** The node the service runs on. */
  readonly context: RegistryContext;

  /** @param context the node the service runs on. */
  constructor(context: RegistryContext) {
    this.context = context;
  }

  /**
   * Proposes `command` and waits for it to be applied. A write that
   * reaches a leader handing leadership over (Raft dissertation §3.10) is
   * held until the hand-over ends, for up to an election timeout: then it
   * is proposed again, so it commits here if the transfer was abandoned, or
   * is answered NOT_LEADER naming the new leader once one leads. (Answered
   * at once, the client would be sent to the transfer's target before it
   * leads, bounce between the two, and back off.) The wait counts
   * against the write's timeout.
   */
  async propose(command: Command): Promise<CommandValue> {
    const { raft, electionTimeoutMs } = this.context;
    const data = encodeCommand(command);
    const writeDeadline = performance.now() +
      (this.context.writeTimeoutMs ?? 3000);
    const deadline = Math.min(
      performance.now() + electionTimeoutMs,
      writeDeadline,
    );
    let handingOver = false;
    let result: ApplyResult | undefined;
    for (let attempt = 0; result === undefined && attempt < 1_000; attempt++) {
      try {
        result = await raft.propose(data, {
          timeoutMs: Math.max(1, Math.round(writeDeadline - performance.now())),
        });
      } catch (error) {
        // Between the old leader stepping down and the new one's first
        // append, this node knows no leader: wait on, as for the transfer.
        const waiting = error instanceof LeadershipTransferError ||
          (handingOver && error instanceof NotLeaderError &&
            error.leader === null);
        const left = deadline - performance.now();
        if (!waiting || left <= 0) throw this.rpcError(error, "write");
        handingOver = true;
        // Woken by the step-down and by the new leader's first message; a
        // transfer the core abandons changes no soft state, so look again
        // every tenth of an election timeout.
        await this.context.nextSoftState(
          Math.min(left, electionTimeoutMs / 10),
        );
      }
    }
    if (result === undefined) {
      throw unavailable(
        "Unavailable: leadership is changing hands; the write was not applied: retry shortly",
        electionTimeoutMs / 10,
        false,
      );
    }
    if (!result.ok) {
      const { code, message, data } = result.error;
      throw new RpcError(
        code,
        code === -32602 ? `Invalid params: ${message}` : message,
        data,
      );
    }
    return result.value;
  }

  /**
   * Waits until this node's state reflects every write acknowledged
   * before the call (ReadIndex through the leader, Raft dissertation
   * §6.4), for a linearizable read.
   */
  async barrier(): Promise<void> {
    try {
      await this.context.raft.readBarrier({
        timeoutMs: this.context.readTimeoutMs ?? 2000,
      });
    } catch (error) {
      throw this.rpcError(error, "read");
    }
  }

  /** NOT_LEADER on a follower, UNAVAILABLE on a leader still catching up. */
  requireLeaderReady(): void {
    const status = this.context.raft.status;
    if (status.role !== "leader") {
      throw this.rpcError(new NotLeaderError(status.leader), "write");
    }
    if (!this.context.leaderReady()) {
      throw unavailable(
        "Unavailable: this node was just elected leader and is applying the log; retry shortly",
        this.context.electionTimeoutMs / 10,
        false,
      );
    }
  }

  /**
   * A Raft error as the registry's answer: NOT_LEADER naming the leader,
   * UNAVAILABLE (with the quorum problem, if any) when none is known or
   * the write or read did not complete in time; any other error as it is.
   */
  rpcError(error: unknown, kind: "write" | "read"): unknown {
    const retryAfterMs = this.context.electionTimeoutMs;
    if (error instanceof NotLeaderError) {
      if (error.leader === null) {
        const problem = this.context.quorumProblem?.() ?? null;
        return unavailable(
          problem === null
            ? "Unavailable: the registry is electing a leader; retry shortly"
            : `Unavailable: no quorum: ${problem}`,
          retryAfterMs,
          kind === "write" ? false : undefined,
        );
      }
      const data: NotLeaderData = {
        leaderId: error.leader,
        leaderUrl: this.context.clientUrlOf(error.leader),
      };
      return new RpcError(
        NOT_LEADER,
        `Not leader: node ${this.context.raft.status.id} is a follower; send writes to the leader ${error.leader} at ${
          data.leaderUrl ?? "(unknown URL)"
        }`,
        data,
      );
    }
    if (error instanceof RaftUnavailableError) {
      const hint = kind === "read"
        ? ', or pass consistency: "serializable" for a possibly stale answer'
        : "";
      const problem = this.context.quorumProblem?.() ?? null;
      const applied = kind === "write" ? error.applied ?? "unknown" : undefined;
      return unavailable(
        `Unavailable: ${error.message}${hint}${
          problem === null ? "" : ` (no quorum: ${problem})`
        }${
          applied === "unknown"
            ? "; the write may have been applied: check before retrying one that is not idempotent"
            : ""
        }`,
        retryAfterMs,
        applied,
        error.reason,
      );
    }
    return error;
  }

  /** NOT_LEADER (naming the leader) unless this node leads. */
  requireLeader(kind: "write" | "read" = "write"): void {
    const raft = this.context.raft.status;
    if (raft.role !== "leader") {
      throw this.rpcError(new NotLeaderError(raft.leader), kind);
    }
  }

  /** A global binding as an endpoint, with its lease's load. */
  endpoint(binding: Binding): Endpoint {
    return toEndpoint(binding, this.load(binding.leaseId));
  }

  /** The load last reported on `leaseId`, or null. */
  load(leaseId: string | null): number | null {
    return leaseId === null ? null : this.context.leases.load(leaseId);
  }
}

/**
 * UNAVAILABLE (-32006): retry after `retryAfterMs`; for a write, `applied`
 * says whether it was definitely not applied (`false`) or may have been
 * (`"unknown"`); `reason` `"storageFailed"` says this node's disk failed
 * (send the write to another node).
 */
export function unavailable(
  message: string,
  retryAfterMs: number,
  applied?: false | "unknown",
  reason?: UnavailableData["reason"],
): RpcError {
  const data: UnavailableData = { retryAfterMs: Math.round(retryAfterMs) };
  if (applied !== undefined) data.applied = applied;
  if (reason !== undefined) data.reason = reason;
  return new RpcError(UNAVAILABLE, message, data);
}

/** The -32602 error for params the schemas cannot judge alone. */
export function invalid(message: string): RpcError {
  return new RpcError(INVALID_PARAMS, `Invalid params: ${message}`);
}

/** LEASE_NOT_FOUND (-32007) for `leaseId`. */
export function leaseNotFound(leaseId: string): RpcError {
  return new RpcError(
    LEASE_NOT_FOUND,
    `Lease not found: lease ${leaseId} does not exist (never granted, revoked, or expired); grant a new lease and bind again`,
    { leaseId },
  );
}

/** A random lease id: 16 hex digits (64 bits). */
export function newLeaseId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}
