/**
 * The backup API: `registry.snapshot` takes a consistent snapshot of the
 * registry on the leader (after a ReadIndex barrier, so it holds every
 * write acknowledged before the call) and holds it in memory;
 * `registry.snapshotChunk` hands it out in chunks, so a snapshot larger
 * than a frame (16 MiB) still travels. `rafter snapshot save` writes it
 * to a file (`registry/snapshot_file.ts`). With auth enforced, admin
 * only: a snapshot holds every binding and the token hashes.
 *
 * @module
 */

import { INTERNAL_ERROR, RpcError } from "../../rpc/errors.ts";
import { method } from "../../rpc/server/method.ts";
import {
  REGISTRY_METHODS,
  type SnapshotResult,
} from "../../protocol/registry.ts";
import { REGISTRY_PARAMS } from "../../protocol/registry_params.ts";
import { bytesToBase64, sha256Hex } from "../snapshot_file.ts";
import { invalid, type MethodTable, type ServiceCore } from "./_core.ts";
import type { Caller } from "./_caller.ts";

const { snapshot, snapshotChunk } = REGISTRY_METHODS;

/** Bytes of payload per chunk: 4 MiB (about 5.6 MiB in base64, under a 16 MiB frame). */
export const SNAPSHOT_CHUNK_BYTES = 4 << 20;

/** How many chunks `bytes` travel in (one at least, for an empty payload). */
function chunkCount(bytes: Uint8Array): number {
  return Math.max(1, Math.ceil(bytes.length / SNAPSHOT_CHUNK_BYTES));
}

/**
 * The snapshots a node holds for fetching: at most `max` (the oldest goes
 * first), each dropped `idleMs` after its last use. Looked at on each call
 * (no timers): an unfetched snapshot lasts until the next call at most.
 */
export class HeldSnapshots {
  readonly #held = new Map<string, { bytes: Uint8Array; usedAt: number }>();
  readonly #max: number;
  readonly #idleMs: number;
  readonly #now: () => number;

  /**
   * @param max most snapshots held at once. Default 2.
   * @param idleMs how long one is held after its last use, ms. Default 60 s.
   * @param now the monotonic clock, ms. Default `performance.now`.
   */
  constructor(
    max = 2,
    idleMs = 60_000,
    now: () => number = () => performance.now(),
  ) {
    this.#max = max;
    this.#idleMs = idleMs;
    this.#now = now;
  }

  /** Holds `bytes`; @returns the id to fetch them by. */
  hold(bytes: Uint8Array): string {
    this.#expire();
    while (this.#held.size >= this.#max) {
      this.#held.delete(this.#held.keys().next().value!);
    }
    const id = [...crypto.getRandomValues(new Uint8Array(16))]
      .map((b) => b.toString(16).padStart(2, "0")).join("");
    this.#held.set(id, { bytes, usedAt: this.#now() });
    return id;
  }

  /** The bytes held as `id`, or undefined; a use. */
  get(id: string): Uint8Array | undefined {
    this.#expire();
    const held = this.#held.get(id);
    if (held === undefined) return undefined;
    held.usedAt = this.#now();
    return held.bytes;
  }

  #expire(): void {
    const now = this.#now();
    for (const [id, { usedAt }] of this.#held) {
      if (now - usedAt > this.#idleMs) this.#held.delete(id);
    }
  }
}

/** The backup methods of one connection: with auth enforced, admin only. */
export function snapshotMethods(
  core: ServiceCore,
  caller: Caller,
  held: HeldSnapshots,
): MethodTable<typeof snapshot | typeof snapshotChunk> {
  const { context } = core;
  return {
    [snapshot]: method(
      REGISTRY_PARAMS[snapshot],
      async (): Promise<SnapshotResult> => {
        caller.need(snapshot, "admin");
        const take = context.takeSnapshot;
        if (take === undefined) {
          throw new RpcError(
            INTERNAL_ERROR,
            "this node cannot take a snapshot of its registry",
          );
        }
        core.requireLeaderReady();
        // Every entry committed before the call is applied here, and this
        // node still leads (Raft dissertation §6.4): the snapshot holds
        // every write acknowledged before it was asked for.
        await core.barrier();
        core.requireLeaderReady();
        const { state } = context;
        const names = state.nameCount;
        const bindings = state.bindingCount;
        const leases = state.leaseCount;
        const taken = take();
        const bytes = new TextEncoder().encode(taken.data);
        const sha256 = await sha256Hex(bytes);
        const snapshotId = held.hold(bytes);
        return {
          snapshotId,
          clusterId: context.clusterId,
          member: context.raft.status.id,
          revision: state.revision,
          index: taken.index,
          term: taken.term,
          bytes: bytes.length,
          chunks: chunkCount(bytes),
          chunkBytes: SNAPSHOT_CHUNK_BYTES,
          sha256,
          names,
          bindings,
          leases,
          takenAt: new Date().toISOString(),
        };
      },
    ),

    [snapshotChunk]: method(
      REGISTRY_PARAMS[snapshotChunk],
      ({ snapshotId, n }) => {
        caller.need(snapshotChunk, "admin");
        const bytes = held.get(snapshotId);
        if (bytes === undefined) {
          throw invalid(
            `snapshot ${
              JSON.stringify(snapshotId)
            } is not held by this node (a snapshot is dropped a minute after its last chunk was fetched, and when leadership moves the new leader has none): take a new one with registry.snapshot (rafter snapshot save)`,
          );
        }
        const chunks = chunkCount(bytes);
        if (n >= chunks) {
          throw invalid(
            `"n" must be a chunk number in 0..${chunks - 1}, not ${n}`,
          );
        }
        const start = n * SNAPSHOT_CHUNK_BYTES;
        return Promise.resolve({
          n,
          data: bytesToBase64(
            bytes.subarray(start, start + SNAPSHOT_CHUNK_BYTES),
          ),
        });
      },
    ),
  };
}
