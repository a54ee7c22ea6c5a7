/**
 * Segment files of the write-ahead log (private to `raft/`): naming, listing,
 * and the errors of a missing or foreign file in the log folder.
 *
 * A segment is named `<sequence>-<firstIndex>.wal`, both 16 lowercase hex
 * digits, so that names sort in write order and show the index of the first
 * entry the segment was started for (the log's last index + 1 when it was
 * created; a later conflict truncation may write a lower index into it).
 *
 * @module
 */

/** A segment file in the log folder. */
export interface SegmentInfo {
  /** Sequence number, 1 for the first segment ever written; consecutive. */
  seq: number;
  /** Log index the segment was started for. */
  firstIndex: number;
  /** Full path of the file. */
  path: string;
}

const SEGMENT_NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.wal$/;

/** The file name of a segment, e.g. `0000000000000001-0000000000000001.wal`. */
export function segmentName(seq: number, firstIndex: number): string {
  return `${hex16(seq)}-${hex16(firstIndex)}.wal`;
}

function hex16(n: number): string {
  return n.toString(16).padStart(16, "0");
}

/**
 * Lists the segments of `dir` in sequence order. Temp files (`*.tmp`, left
 * by a crash during a legacy import) are removed.
 *
 * @throws {Error} If the folder holds a file that is not a segment (the log
 *   folder must hold only segments), naming it.
 */
export async function listSegments(dir: string): Promise<SegmentInfo[]> {
  const out: SegmentInfo[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isFile && entry.name.endsWith(".wal.tmp")) {
      await Deno.remove(path);
      continue;
    }
    const m = entry.isFile ? SEGMENT_NAME.exec(entry.name) : null;
    if (m === null) {
      throw new Error(
        `write-ahead log folder ${dir} holds ${path}, which is not a log segment ` +
          `(<16 hex digits>-<16 hex digits>.wal); the folder must hold only the log's segments: ` +
          `move that file elsewhere, or pass a folder of its own`,
      );
    }
    out.push({
      seq: parseInt(m[1], 16),
      firstIndex: parseInt(m[2], 16),
      path,
    });
  }
  out.sort((a, b) => a.seq - b.seq);
  return out;
}
