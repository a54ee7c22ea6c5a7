/**
 * Settling `unknown` operations from the watch streams before the
 * linearizability search, which every pending unknown operation slows
 * (it may take effect at any later point, or never: each one doubles the
 * configurations of every branch the search tries).
 *
 * Used only when the watch streams are trustworthy for it: they cover the
 * whole run (from its start to the highest revision any operation
 * answered) and the watch check found nothing wrong. Then:
 *
 * - an unknown lookup or keep-alive is dropped: it changes nothing and
 *   its answer is unknown, so it constrains nothing;
 * - an unknown bind took effect iff a put with its url (unique per bind)
 *   is on the streams: if not, it is dropped (as a `fail`); if so, it is
 *   kept as `ok`, completed at the earliest time a watcher received that
 *   put (it was applied before);
 * - the unknown unbinds of one endpoint, when the streams show no
 *   `unbound` delete of it that an `ok` unbind does not explain, changed
 *   nothing (none removed anything): they are dropped; when they show
 *   exactly one such delete and one unknown unbind invoked before it was
 *   received, that unbind made it (`ok`, removed 1, completed when the
 *   delete was first received). Several such deletes stay ambiguous (which
 *   unbind made which delete bounds the intervals), so those unbinds stay
 *   unknown.
 *
 * Everything else stays unknown.
 *
 * @module
 */

import type { History, Operation } from "../history.ts";
import { eventKey, type Stream } from "./watch.ts";
import { revisionOf } from "./revisions.ts";

/** What {@link resolveUnknowns} did. */
export interface Resolution {
  /** The operations to check, by history index (dropped ones left out). */
  operations: Operation[];
  /** Why an operation was changed, by history index. */
  notes: Map<number, string>;
  /** Unknown operations settled as applied, and dropped. */
  applied: number;
  dropped: number;
}

/** Whether `stream` covers every revision the history's operations answered. */
export function streamCovers(history: History, stream: Stream): boolean {
  if (!stream.complete) return false;
  let highest = history.startRevision;
  for (const op of history.operations) {
    const revision = revisionOf(op);
    if (revision !== null && revision > highest) highest = revision;
  }
  return stream.to >= highest;
}

/** The history's operations with the unknown ones the streams settle (see the module doc). */
export function resolveUnknowns(history: History, stream: Stream): Resolution {
  const notes = new Map<number, string>();
  let applied = 0;
  let dropped = 0;
  const puts = new Map<string, { revision: number; at: number }>();
  const unboundDeletes = new Map<string, { revision: number; at: number }[]>();
  for (const [revision, events] of stream.events) {
    for (const event of events) {
      const at = stream.receivedAt.get(eventKey(event)) ?? event.at;
      if (event.type === "put") {
        const known = puts.get(event.url);
        if (known === undefined || revision < known.revision) {
          puts.set(event.url, { revision, at });
        }
      } else if (event.reason === "unbound") {
        const key = `${event.name}\n${event.id}`;
        const list = unboundDeletes.get(key);
        if (list === undefined) unboundDeletes.set(key, [{ revision, at }]);
        else list.push({ revision, at });
      }
    }
  }
  // Unbinds by endpoint: the deletes no ok unbind explains.
  const unknownUnbinds = new Map<string, Operation[]>();
  const explained = new Set<string>();
  for (const op of history.operations) {
    if (op.input.f !== "unbind") continue;
    const key = `${op.input.name}\n${op.input.id}`;
    if (op.outcome === "unknown") {
      const list = unknownUnbinds.get(key);
      if (list === undefined) unknownUnbinds.set(key, [op]);
      else list.push(op);
    } else if (
      op.outcome === "ok" && op.output?.f === "unbind" &&
      op.output.removed === 1
    ) {
      explained.add(`${key}\n${op.output.revision}`);
    }
  }
  const unbindFate = new Map<
    Operation,
    { revision: number; at: number } | null
  >();
  for (const [key, ops] of unknownUnbinds) {
    const open = (unboundDeletes.get(key) ?? [])
      .filter((d) => !explained.has(`${key}\n${d.revision}`))
      .sort((a, b) => a.revision - b.revision);
    if (open.length === 0) {
      for (const op of ops) unbindFate.set(op, null);
    } else if (open.length === 1) {
      const before = ops.filter((op) => op.invokedAt <= open[0].at);
      if (before.length === 1) unbindFate.set(before[0], open[0]);
    }
  }

  const operations: Operation[] = [];
  for (const op of history.operations) {
    if (op.outcome !== "unknown") {
      operations.push(op);
      continue;
    }
    const input = op.input;
    if (input.f === "lookup" || input.f === "leaseKeepAlive") {
      dropped++;
      continue;
    }
    if (input.f === "bind") {
      const put = puts.get(input.url);
      if (put === undefined) {
        notes.set(
          op.index,
          "unknown; its url is on no watch stream: taken as not applied",
        );
        dropped++;
        continue;
      }
      applied++;
      notes.set(
        op.index,
        `unknown; its put is on the watch streams at revision ${put.revision}: taken as applied by then`,
      );
      operations.push({
        ...op,
        outcome: "ok",
        completedAt: Math.max(put.at, op.invokedAt),
        output: { f: "bind", revision: put.revision },
      });
      continue;
    }
    if (input.f === "unbind" && unbindFate.has(op)) {
      const fate = unbindFate.get(op)!;
      if (fate === null) {
        notes.set(
          op.index,
          "unknown; the watch streams show no unexplained delete of its endpoint: it removed nothing",
        );
        dropped++;
        continue;
      }
      applied++;
      notes.set(
        op.index,
        `unknown; the watch streams show its delete at revision ${fate.revision}: taken as applied by then`,
      );
      operations.push({
        ...op,
        outcome: "ok",
        completedAt: Math.max(fate.at, op.invokedAt),
        output: { f: "unbind", revision: fate.revision, removed: 1 },
      });
      continue;
    }
    operations.push(op);
  }
  return { operations, notes, applied, dropped };
}
