/**
 * What this node does as it gains, holds and loses leadership: on gaining
 * it, lease timing restarts from the last renewals the old leader reported
 * and health checks start; every tick while it leads, followers get the
 * lease renewals, due checks run, caught-up learners are promoted and
 * expired leases are removed; on losing it, both stop. It also tells the
 * service when the leader is ready (has applied its term's first entry)
 * and wakes requests waiting for the next change of term, role or leader.
 *
 * @module
 */

import type { SoftState } from "../../raft/core.ts";
import type { RaftNode } from "../../raft/node.ts";
import { type ApplyResult, encodeCommand } from "../state.ts";
import {
  type LeaseKeeper,
  type LeaseSync,
  leaseSyncProblem,
} from "../lease_keeper.ts";
import type { HealthChecker } from "../_health_checker.ts";
import type { Membership } from "./membership.ts";
import type { Replica } from "./replica.ts";
import type { LogLine } from "./log.ts";

/** What {@link Leadership} works with. */
interface LeadershipParts {
  readonly id: string;
  /** The Raft node, once started (soft states come before). */
  raft(): RaftNode<ApplyResult> | undefined;
  readonly replica: Replica;
  readonly checker: HealthChecker;
  readonly membership: Membership;
  /** The other members. */
  peers(): string[];
  /** Sends a lease sync to a follower. */
  send(peer: string, sync: LeaseSync): boolean;
  /** Logs a role change (see `roleLogger`). */
  logRole(soft: SoftState): void;
  log: LogLine;
  /**
   * The bootstrap admin token this node would record, and whether to turn
   * auth on with it; null for a node that makes none (it joined).
   */
  bootstrapToken(): BootstrapToken | null;
}

/** What the first leader records with `authBootstrap`. */
export interface BootstrapToken {
  /** The token's public id. */
  readonly tokenId: string;
  /** Its SHA-256 hash. */
  readonly hash: string;
  /** Where its text is. */
  readonly path: string;
  /** Turn auth on in the same step (the node runs with `--auth`). */
  readonly enable: boolean;
}

/** Most leases in one sync message. */
const MAX_SYNC_LEASES = 2_000;

/** Leadership as the registry sees it, and the leader's duties. */
export class Leadership {
  readonly #parts: LeadershipParts;
  #leading = false;
  /**
   * The index of this term's first entry, applied before this node
   * answers keep-alives (so it knows every lease expiry an earlier leader
   * committed).
   */
  #readyIndex = Infinity;
  #lastSoft: SoftState | null = null;
  /** Requests waiting for the next change of term, role or leader. */
  readonly #softWaiters = new Set<() => void>();
  #expiring = false;
  #bootstrapping = false;
  /** Whether this node said whose bootstrap token the cluster uses. */
  #toldBootstrap = false;

  constructor(parts: LeadershipParts) {
    this.#parts = parts;
  }

  /** Whether this node leads and has applied the first entry of its term. */
  ready(): boolean {
    const raft = this.#parts.raft();
    return this.#leading && raft !== undefined &&
      raft.status.appliedIndex >= this.#readyIndex;
  }

  /** The last soft state reported (role, term, leader). */
  get lastSoft(): SoftState | null {
    return this.#lastSoft;
  }

  /**
   * Resolves at the next change of this node's term, role or leader, or
   * after `timeoutMs`, whichever comes first.
   */
  nextSoftState(timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        this.#softWaiters.delete(done);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.#softWaiters.add(done);
    });
  }

  /** The Raft node's new soft state: gains or loses leadership. */
  onSoftState(soft: SoftState): void {
    const raft = this.#parts.raft();
    if (raft === undefined) {
      // Reported before RaftNode.start returned: handle it once it has.
      queueMicrotask(() => this.onSoftState(soft));
      return;
    }
    const { replica: { leases, state }, checker, log, id } = this.#parts;
    this.#lastSoft = soft;
    for (const wake of [...this.#softWaiters]) wake();
    this.#parts.logRole(soft);
    if (soft.role === "leader" && !this.#leading) {
      this.#leading = true;
      this.#readyIndex = raft.status.lastIndex;
      const gap = leases.becomeLeader();
      if (leases.size > 0) {
        log(
          `${id}: timing ${leases.size} lease(s) from the last renewals the old leader reported; ${
            Math.round(gap)
          } ms without a leader are not counted against them`,
        );
      }
      checker.update(state.checkedBindings());
      checker.start();
    } else if (soft.role !== "leader" && this.#leading) {
      this.#leading = false;
      this.#readyIndex = Infinity;
      leases.stopLeading();
      checker.stop();
    }
  }

  /**
   * A follower hears the lease renewals of its leader (`registry.leaseSync`,
   * of the current term), so it can time the leases if it leads next.
   */
  onLeaseSync(params: unknown, from: string): void {
    const raft = this.#parts.raft();
    if (raft === undefined || leaseSyncProblem(params) !== null) return;
    const status = raft.status;
    const sync = params as LeaseSync;
    if (
      status.role !== "leader" && sync.term === status.term &&
      from === status.leader
    ) {
      this.#parts.replica.leases.absorb(sync);
    }
  }

  /**
   * Every tick: the leader's duties; and a pre-candidate's line again (its
   * term stays put, so no new soft state says that its unreachable peers
   * changed; the logger rate-limits).
   */
  tick(): void {
    this.#leaderTick();
    this.#tellUnusedToken();
    const soft = this.#lastSoft;
    if (soft?.preCandidate) this.#parts.logRole(soft);
  }

  /**
   * What the leader does every tick: credit a stall, send followers the
   * lease renewals (every tick, even when empty, so they know when they
   * last heard a leader; with a rolling slice of all leases), run the due
   * health checks, promote caught-up learners, and expire the leases
   * whose TTL passed.
   */
  #leaderTick(): void {
    const raft = this.#parts.raft();
    if (!this.#leading || raft === undefined) return;
    const { replica: { leases }, checker } = this.#parts;
    leases.tickLeader();
    const sync = leases.sync(raft.status.term);
    for (const part of split(sync)) {
      for (const peer of this.#parts.peers()) this.#parts.send(peer, part);
    }
    checker.tick();
    this.#parts.membership.promoteCaughtUp(raft);
    if (!this.#expiring && this.ready()) this.#expireDue(raft, leases);
    if (!this.#bootstrapping && this.ready()) this.#bootstrapAuth(raft);
  }

  /**
   * Once the cluster's bootstrap token is recorded, a member whose own
   * token file is not it (another member led first) says so, once: that
   * file is no admin token of this cluster.
   */
  #tellUnusedToken(): void {
    const { state } = this.#parts.replica;
    if (this.#toldBootstrap || !state.bootstrapped) return;
    this.#toldBootstrap = true;
    const token = this.#parts.bootstrapToken();
    if (token === null || state.token(token.tokenId) !== undefined) return;
    this.#parts.log(
      `${this.#parts.id}: the cluster recorded another member's bootstrap admin token (that of its first leader); ${token.path} is not a token of this cluster: use the first leader's file, and remove this one`,
      "warn",
    );
  }

  /**
   * The cluster's first leader records the bootstrap admin token (once:
   * the state ignores a second `authBootstrap`, so two leaders in a row,
   * or a proposal retried, make one token).
   */
  #bootstrapAuth(raft: RaftNode<ApplyResult>): void {
    if (this.#parts.replica.state.bootstrapped) return;
    const token = this.#parts.bootstrapToken();
    if (token === null) return;
    this.#bootstrapping = true;
    raft.propose(
      encodeCommand({
        op: "authBootstrap",
        tokenId: token.tokenId,
        hash: token.hash,
        enable: token.enable,
        createdAt: Date.now(),
      }),
      { timeoutMs: 3_000 },
    ).then((result) => {
      if (result.ok && result.value.token?.tokenId === token.tokenId) {
        this.#parts.log(
          `${this.#parts.id}: recorded the bootstrap admin token ${token.tokenId} (in ${token.path})${
            token.enable ? "; auth is on" : ""
          }`,
        );
      }
    }).catch(() => {
      // Not committed: the next tick proposes it again.
    }).finally(() => {
      this.#bootstrapping = false;
    });
  }

  /**
   * Expires the leases whose TTL passed: after confirming it still leads
   * (a ReadIndex round), the leader proposes their expiry as one entry.
   */
  #expireDue(raft: RaftNode<ApplyResult>, leases: LeaseKeeper): void {
    const due = leases.due();
    if (due.length === 0) return;
    const term = raft.status.term;
    this.#expiring = true;
    leases.markExpiring(due);
    raft.readBarrier({ timeoutMs: 2_000 })
      .then(() => {
        // Still the leader of the same term: no other leader can have
        // taken keep-alives for these leases in the meantime.
        if (!this.#leading || raft.status.term !== term) {
          throw new Error("leadership changed");
        }
        this.#parts.log(
          `${this.#parts.id}: lease(s) ${
            due.join(", ")
          } expired; removing their bindings`,
        );
        return raft.propose(encodeCommand({ op: "leaseExpire", ids: due }), {
          timeoutMs: 3_000,
        });
      })
      .catch(() => {
        // Not committed: the next tick times them again.
      })
      .finally(() => {
        leases.unmarkExpiring(due);
        this.#expiring = false;
      });
  }
}

/** A sync in parts of at most {@link MAX_SYNC_LEASES} leases. */
function split(sync: LeaseSync): LeaseSync[] {
  if (sync.renewed.length <= MAX_SYNC_LEASES) return [sync];
  const parts: LeaseSync[] = [];
  for (let i = 0; i < sync.renewed.length; i += MAX_SYNC_LEASES) {
    parts.push({
      term: sync.term,
      renewed: sync.renewed.slice(i, i + MAX_SYNC_LEASES),
    });
  }
  return parts;
}
