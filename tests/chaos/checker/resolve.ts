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
 * - the unknown unbinds of one endpoint and the `unbound` deletes of it
 *   that no `ok` unbind explains: an unbind that made a delete was
 *   invoked before the delete was received, so an unbind no such delete
 *   can come from removed nothing (dropped), and a delete only one unbind
 *   can come from is that unbind's (`ok`, removed 1, completed when the
 *   delete was first received), repeatedly; what stays ambiguous (which
 *   unbind made which delete bounds the intervals) stays unknown.
 *
 * - an unknown grant (of an id no other grant uses) took effect iff
 *   something shows its lease existed (an `ok` bind, keep-alive or revoke
 *   of it, an "exists" answer, a lookup or an event showing an endpoint
 *   on it): if so it is kept as `ok`, completed by the earliest such
 *   sign; if not, it is dropped (if it happened, nothing could tell);
 * - an unknown revoke (of a lease no other revoke names) made the
 *   `leaseRevoked` deletes of that lease no `ok` revoke explains (kept as
 *   `ok`, completed by their first receipt); with none it is dropped: if
 *   it happened, it removed a lease with no binding, which the model's
 *   expiry (possible at any moment) explains as well.
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
  // Leases: a grant or revoke id used by one such operation only, so
  // that what shows the lease (or its end) is about that operation.
  const grantCounts = new Map<string, number>();
  const revokeCounts = new Map<string, number>();
  /** The earliest time each lease is shown to exist. */
  const leaseSeenAt = new Map<string, number>();
  const seenLease = (leaseId: string, at: number) => {
    const known = leaseSeenAt.get(leaseId);
    if (known === undefined || at < known) leaseSeenAt.set(leaseId, at);
  };
  /** Revokes' deletes that no ok revoke explains, by lease. */
  const revokedDeletes = new Map<string, { revision: number; at: number }>();
  const okRevokes = new Set<string>();
  for (const op of history.operations) {
    const input = op.input;
    if (input.f === "leaseGrant" && op.outcome !== "fail") {
      grantCounts.set(input.leaseId, (grantCounts.get(input.leaseId) ?? 0) + 1);
    }
    if (input.f === "leaseRevoke" && op.outcome !== "fail") {
      revokeCounts.set(
        input.leaseId,
        (revokeCounts.get(input.leaseId) ?? 0) + 1,
      );
      if (
        op.outcome === "ok" && op.output?.f === "leaseRevoke" &&
        op.output.leaseNotFound !== true
      ) {
        okRevokes.add(`${input.leaseId}\n${op.output.revision}`);
      }
    }
    if (op.outcome !== "ok" || op.output === undefined) continue;
    const output = op.output;
    if (
      input.f === "bind" && input.leaseId !== null && output.f === "bind" &&
        output.leaseNotFound !== true ||
      input.f === "leaseKeepAlive" && output.f === "leaseKeepAlive" &&
        output.leaseNotFound !== true ||
      input.f === "leaseRevoke" && output.f === "leaseRevoke" &&
        output.leaseNotFound !== true ||
      input.f === "leaseGrant" && output.f === "leaseGrant" &&
        output.exists === true
    ) {
      seenLease((input as { leaseId: string }).leaseId, op.completedAt!);
    }
    if (input.f === "lookup" && output.f === "lookup") {
      for (const e of output.endpoints) {
        if (e.leaseId !== null) seenLease(e.leaseId, op.completedAt!);
      }
    }
  }
  for (const [revision, events] of stream.events) {
    for (const event of events) {
      if (event.leaseId === null) continue;
      const at = stream.receivedAt.get(eventKey(event)) ?? event.at;
      seenLease(event.leaseId, at);
      if (
        event.reason === "leaseRevoked" &&
        !okRevokes.has(`${event.leaseId}\n${revision}`) &&
        !revokedDeletes.has(event.leaseId)
      ) {
        revokedDeletes.set(event.leaseId, { revision, at });
      }
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
    // An unbind that made a delete was invoked before the delete was
    // received. Settle what is forced: an unbind no open delete can be
    // from removed nothing; a delete only one unbind can be from is its.
    let pending = [...ops];
    let deletes = [...open];
    for (let changed = true; changed;) {
      changed = false;
      for (const op of pending) {
        if (!deletes.some((d) => op.invokedAt <= d.at)) {
          unbindFate.set(op, null);
          changed = true;
        }
      }
      pending = pending.filter((op) => !unbindFate.has(op));
      for (const d of deletes) {
        const from = pending.filter((op) => op.invokedAt <= d.at);
        if (from.length === 1) {
          unbindFate.set(from[0], d);
          pending = pending.filter((op) => op !== from[0]);
          deletes = deletes.filter((other) => other !== d);
          changed = true;
          break;
        }
      }
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
    if (input.f === "leaseGrant" && grantCounts.get(input.leaseId) === 1) {
      const seenAt = leaseSeenAt.get(input.leaseId);
      if (seenAt === undefined) {
        notes.set(
          op.index,
          "unknown; nothing shows its lease ever existed: taken as not applied",
        );
        dropped++;
        continue;
      }
      applied++;
      notes.set(
        op.index,
        `unknown; its lease is seen to exist @${seenAt}: taken as applied by then`,
      );
      operations.push({
        ...op,
        outcome: "ok",
        completedAt: Math.max(seenAt, op.invokedAt),
        output: {
          f: "leaseGrant",
          revision: history.startRevision,
          ttlMs: input.ttlMs,
        },
      });
      continue;
    }
    if (input.f === "leaseRevoke" && revokeCounts.get(input.leaseId) === 1) {
      const revoked = revokedDeletes.get(input.leaseId);
      if (revoked === undefined) {
        notes.set(
          op.index,
          "unknown; no delete of its lease's bindings is on the watch streams: taken as an expiry, if anything",
        );
        dropped++;
        continue;
      }
      applied++;
      notes.set(
        op.index,
        `unknown; its deletes are on the watch streams at revision ${revoked.revision}: taken as applied by then`,
      );
      operations.push({
        ...op,
        outcome: "ok",
        completedAt: Math.max(revoked.at, op.invokedAt),
        output: { f: "leaseRevoke", revision: revoked.revision },
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
