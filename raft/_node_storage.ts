/**
 * The Deno node's {@link RaftStorage}: the write-ahead log and the snapshot
 * files (private to `node.ts`, apart for its tests).
 *
 * @module
 */

import type { RaftStorage, StorageWrite } from "./driver.ts";
import type { SnapshotStore } from "./snapshot_store.ts";
import type { HardState } from "./types.ts";
import type { Wal } from "./wal.ts";

/** {@link nodeStorage}'s storage, and what stopping must still write. */
export interface NodeStorage extends RaftStorage {
  /**
   * Appends the hard state a commit-only write left in memory, if any
   * (without an fdatasync: the log's close syncs it), so a clean restart
   * starts from the newest commit index. Call before closing the log.
   */
  flush(): Promise<void>;
}

/**
 * Called once a snapshot's file is durable and the log compacted to it:
 * whether it came from the leader, its index, the file's size (bytes) and
 * the time of saving and compacting (ms, monotonic clock).
 */
export type SnapshotSavedHook = (
  saved: { received: boolean; index: number; bytes: number; ms: number },
) => void;

/**
 * The write-ahead log and the snapshot files as a {@link RaftStorage}: a
 * snapshot is saved (its file fsynced and renamed into place) before the
 * log is marked as starting after `compactTo`; done once all is fsynced.
 *
 * A write that only moves the commit index (`mustSync: false`: no
 * entries, no snapshot, term and vote unchanged) is done at once and
 * written nowhere yet: the commit index is volatile state (Raft paper
 * Figure 2), which a restarted node learns again from the leader, so
 * nothing waits on a disk write for it (before, the leader's apply of a
 * just-committed entry, and a follower's next append, waited for a write
 * of it). The hard state rides along with the next write (or
 * {@link NodeStorage.flush}); the log's commit index therefore lags by at
 * most that one write, which only makes a restart apply a little less
 * before it hears from a leader.
 */
export function nodeStorage(
  wal: Wal,
  snapshots: SnapshotStore,
  onSnapshotSaved?: SnapshotSavedHook,
): NodeStorage {
  /** A commit-only hard state not written yet. */
  let lagging: HardState | undefined;
  const write = async (w: StorageWrite): Promise<void> => {
    if (w.snapshot !== undefined) {
      const started = performance.now();
      const { index, term, data, configuration } = w.snapshot;
      const bytes = await snapshots.save({
        index,
        term,
        meta: { configuration },
        data,
      });
      await wal.compact(w.compactTo ?? { index, term }, {
        discardAfter: w.discardLog === true,
      });
      onSnapshotSaved?.({
        received: w.received === true,
        index,
        bytes,
        ms: performance.now() - started,
      });
    }
    if (w.entries.length > 0 || w.hardState !== undefined) {
      await wal.append({
        hardState: w.hardState,
        entries: w.entries,
        sync: w.mustSync !== false,
      });
    }
  };
  return {
    persist(w, done) {
      if (
        w.mustSync === false && w.entries.length === 0 &&
        w.snapshot === undefined && w.hardState !== undefined
      ) {
        lagging = w.hardState;
        done();
        return;
      }
      // A newer hard state replaces the lagging one (same term and vote).
      const hardState = w.hardState ?? lagging;
      lagging = undefined;
      write(hardState === w.hardState ? w : { ...w, hardState }).then(
        () => done(),
        (error) => done(error ?? new Error("storage failed")),
      );
    },
    async flush() {
      const hardState = lagging;
      lagging = undefined;
      if (hardState !== undefined) {
        await wal.append({ hardState, entries: [], sync: false });
      }
    },
  };
}
