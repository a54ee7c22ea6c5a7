/**
 * Checks of the watch logs of a chaos run, and the state of every name at
 * every revision as the watch streams tell it.
 *
 * Within one watch log: each session (from an `open` record) delivers
 * revisions in order, none older than its `fromRevision`, no event twice;
 * a resumed session starts no later than the revision after the last one
 * seen (else the revisions between are lost); a revision delivered again
 * (a session resumed from an older revision) has the same events.
 *
 * No gap: every write of the run is under the watched prefix and the
 * revision moves only when a binding changes, so every revision from a
 * watcher's first `fromRevision` to the last revision it saw must have
 * reached it.
 *
 * Agreement: watchers that saw a revision saw the same events for it.
 *
 * Against the history: every put names (by its url, unique per bind) the
 * bind that made it, which must be `ok` or `unknown` and match it; every
 * `unbound` delete has an `ok` unbind (removed 1) at its revision or an
 * `unknown` one; every `leaseRevoked` delete an `ok` revoke at its
 * revision or an `unknown` one; a `fail` operation's effect showing up is
 * a write reported not applied that was. And every `ok` write, at its
 * revision: a bind's endpoint is there with its url, an unbind's or a
 * revoke's endpoints are gone (so an acknowledged write is never lost).
 *
 * @module
 */

import type {
  History,
  Operation,
  SeenEndpoint,
  WatchRecord,
} from "../history.ts";
import { formatOperation } from "./shrink.ts";
import { type CheckResult, Findings } from "./violation.ts";

/** A watch event, as the checker keeps it. */
export type WatchEventRecord = Extract<WatchRecord, { kind: "event" }>;

/** One name's endpoints: id → [url, leaseId]. */
export type Endpoints = ReadonlyMap<string, readonly [string, string | null]>;

/**
 * The merged watch streams: the events of every revision, and the state
 * of each name at each revision rebuilt from them.
 */
export class Stream {
  /** Events by revision (from the first watcher that saw it). */
  readonly events = new Map<number, WatchEventRecord[]>();
  /** The earliest time any watcher received each event ({@link eventKey}). */
  readonly receivedAt = new Map<string, number>();
  /** First revision whose state is known (the run's start). */
  readonly from: number;
  /** Last revision up to which every revision is known, or `from` when none. */
  readonly to: number;
  /** Whether states can be rebuilt (the streams reach back to the start). */
  readonly complete: boolean;
  readonly #states = new Map<
    string,
    { revision: number; endpoints: Endpoints }[]
  >();

  constructor(
    startRevision: number,
    events: Map<number, WatchEventRecord[]>,
    first: number | null,
  ) {
    this.from = startRevision;
    this.events = events;
    this.complete = first !== null && first <= startRevision + 1;
    let to = startRevision;
    if (this.complete) {
      while (events.has(to + 1)) to++;
    }
    this.to = to;
  }

  /** Records a name's state from `revision` on (called in revision order). */
  setState(name: string, revision: number, endpoints: Endpoints): void {
    let list = this.#states.get(name);
    if (list === undefined) this.#states.set(name, list = []);
    list.push({ revision, endpoints });
  }

  /** The endpoints of `name` at `revision`, or null when the streams do not tell. */
  stateAt(name: string, revision: number): Endpoints | null {
    if (!this.complete || revision < this.from || revision > this.to) {
      return null;
    }
    const list = this.#states.get(name) ?? [];
    let low = 0;
    let high = list.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (list[middle].revision <= revision) low = middle + 1;
      else high = middle;
    }
    return low === 0 ? new Map() : list[low - 1].endpoints;
  }
}

/** What {@link checkWatches} returns. */
export interface WatchCheck {
  result: CheckResult;
  stream: Stream;
}

/** The check of the watch logs of `history` (see the module doc). */
export function checkWatches(history: History): WatchCheck {
  const findings = new Findings("watch");
  const perWatcher: Map<number, WatchEventRecord[]>[] = [];
  let first: number | null = null;
  for (const log of history.watches) {
    const revisions = checkLog(log.watcher, log.prefix, log.records, findings);
    perWatcher.push(revisions.events);
    if (revisions.start !== null) {
      first = first === null
        ? revisions.start
        : Math.min(first, revisions.start);
    }
  }
  if (history.watches.length === 0) {
    findings.note(
      "no watch log: the watch checks and the state rebuilt from them were skipped",
      true,
    );
  }

  // Agreement, and the merged stream.
  const merged = new Map<number, WatchEventRecord[]>();
  const mergedFrom = new Map<number, number>();
  perWatcher.forEach((events, w) => {
    const watcher = history.watches[w].watcher;
    for (const [revision, list] of events) {
      const known = merged.get(revision);
      if (known === undefined) {
        merged.set(revision, list);
        mergedFrom.set(revision, watcher);
        continue;
      }
      const a = known.map(eventKey).sort();
      const b = list.map(eventKey).sort();
      if (a.join("\n") !== b.join("\n")) {
        findings.add(
          "disagreement",
          `watchers ${
            mergedFrom.get(revision)
          } and ${watcher} disagree on revision ${revision}`,
          {
            lines: [
              `watcher ${mergedFrom.get(revision)}: ${
                a.map(short).join("; ") || "(nothing)"
              }`,
              `watcher ${watcher}: ${b.map(short).join("; ") || "(nothing)"}`,
            ],
          },
        );
        if (list.length > known.length) merged.set(revision, list);
      }
    }
  });
  const stream = new Stream(history.startRevision, merged, first);
  for (const events of perWatcher) {
    for (const list of events.values()) {
      for (const event of list) {
        const key = eventKey(event);
        const known = stream.receivedAt.get(key);
        if (known === undefined || event.at < known) {
          stream.receivedAt.set(key, event.at);
        }
      }
    }
  }
  if (history.watches.length > 0 && !stream.complete) {
    findings.note(
      `the watch streams start at revision ${first}, after the run's start (${history.startRevision}): states were not rebuilt`,
      true,
    );
  }
  if (stream.complete) rebuild(history, stream, findings);
  againstHistory(history, stream, findings);
  return { result: findings.result(), stream };
}

/** Checks one log; returns the events it saw by revision (first delivery). */
function checkLog(
  watcher: number,
  prefix: string,
  records: readonly WatchRecord[],
  findings: Findings,
): { events: Map<number, WatchEventRecord[]>; start: number | null } {
  const events = new Map<number, WatchEventRecord[]>();
  let start: number | null = null;
  let lastSeen = -Infinity;
  let sessionFrom = -Infinity;
  let sessionLast = -Infinity;
  let sessionKeys = new Set<string>();
  /** Revisions of this session, and their events, to compare with earlier deliveries. */
  let session = new Map<number, WatchEventRecord[]>();
  const endSession = () => {
    for (const [revision, list] of session) {
      const earlier = events.get(revision);
      if (earlier === undefined) {
        events.set(revision, list);
        continue;
      }
      const a = earlier.map(eventKey).sort().join("\n");
      const b = list.map(eventKey).sort().join("\n");
      if (a !== b) {
        findings.add(
          "redelivery-differs",
          `watcher ${watcher}: revision ${revision} delivered again after a resume with other events`,
          {
            lines: [
              `first: ${a.split("\n").map(short).join("; ")}`,
              `again: ${b.split("\n").map(short).join("; ")}`,
            ],
          },
        );
      }
    }
    session = new Map();
  };
  for (const record of records) {
    if (record.kind === "close") continue;
    if (record.kind === "open") {
      endSession();
      if (start === null) {
        start = record.fromRevision;
        lastSeen = record.fromRevision - 1;
      } else if (record.fromRevision > lastSeen + 1) {
        findings.add(
          "gap",
          `watcher ${watcher} resumed from revision ${record.fromRevision} @${record.at} after seeing up to ${lastSeen}: revisions ${
            lastSeen + 1
          }..${record.fromRevision - 1} were skipped`,
        );
        lastSeen = record.fromRevision - 1;
      }
      sessionFrom = record.fromRevision;
      sessionLast = -Infinity;
      sessionKeys = new Set();
      continue;
    }
    if (start === null) {
      findings.add(
        "malformed",
        `watcher ${watcher}: an event @${record.at} before any open record`,
      );
      continue;
    }
    const key = eventKey(record);
    if (!record.name.startsWith(prefix)) {
      findings.add(
        "outside-prefix",
        `watcher ${watcher} got an event of ${record.name}, outside its prefix ${prefix}`,
        { lines: [short(key)] },
      );
    }
    if (record.revision < sessionFrom) {
      findings.add(
        "older-than-from",
        `watcher ${watcher} got revision ${record.revision} @${record.at} in a watch from revision ${sessionFrom}`,
        { lines: [short(key)] },
      );
      continue;
    }
    if (record.revision < sessionLast) {
      findings.add(
        "backwards",
        `watcher ${watcher}: revision ${record.revision} @${record.at} came after revision ${sessionLast}`,
        { lines: [short(key)] },
      );
      continue;
    }
    if (sessionKeys.has(key)) {
      findings.add(
        "duplicate",
        `watcher ${watcher} got the same event twice @${record.at}`,
        { lines: [short(key)] },
      );
      continue;
    }
    sessionKeys.add(key);
    sessionLast = record.revision;
    lastSeen = Math.max(lastSeen, record.revision);
    let list = session.get(record.revision);
    if (list === undefined) session.set(record.revision, list = []);
    list.push(record);
  }
  endSession();
  if (start !== null) {
    let missingFrom: number | null = null;
    const flush = (to: number) => {
      if (missingFrom === null) return;
      findings.add(
        "gap",
        missingFrom === to
          ? `watcher ${watcher} never got revision ${to} (between its start ${start} and the last revision it saw, ${lastSeen}): a dropped event`
          : `watcher ${watcher} never got revisions ${missingFrom}..${to} (between its start ${start} and the last revision it saw, ${lastSeen}): dropped events`,
      );
      missingFrom = null;
    };
    for (let revision = start; revision <= lastSeen; revision++) {
      if (events.has(revision)) flush(revision - 1);
      else if (missingFrom === null) missingFrom = revision;
    }
    flush(lastSeen);
  }
  return { events, start };
}

/** Replays the merged stream into per-name states; deletes must delete what is there. */
function rebuild(history: History, stream: Stream, findings: Findings): void {
  const names = new Map<
    string,
    Map<string, readonly [string, string | null]>
  >();
  for (let revision = stream.from + 1; revision <= stream.to; revision++) {
    const changed = new Set<string>();
    for (const event of stream.events.get(revision)!) {
      let endpoints = names.get(event.name);
      if (endpoints === undefined) names.set(event.name, endpoints = new Map());
      if (!changed.has(event.name)) {
        endpoints = new Map(endpoints);
        names.set(event.name, endpoints);
        changed.add(event.name);
      }
      const bound = endpoints.get(event.id);
      if (event.type === "put") {
        endpoints.set(event.id, [event.url, event.leaseId]);
        continue;
      }
      if (
        bound === undefined || bound[0] !== event.url ||
        bound[1] !== event.leaseId
      ) {
        findings.add(
          "bad-delete",
          `revision ${revision} deletes ${event.name} ${event.id} url=${event.url}, but ${
            bound === undefined
              ? "nothing was bound there"
              : `${bound[0]} (lease ${bound[1] ?? "none"}) was`
          }`,
          { name: event.name },
        );
      }
      endpoints.delete(event.id);
    }
    for (const name of changed) {
      stream.setState(name, revision, names.get(name)!);
    }
  }
  void history;
}

/** Every event explained by an operation, every acknowledged write in the stream. */
function againstHistory(
  history: History,
  stream: Stream,
  findings: Findings,
): void {
  const bindsByUrl = new Map<string, Operation>();
  const unbinds = new Map<string, Operation[]>();
  const revokes = new Map<string, Operation[]>();
  for (const op of history.operations) {
    const input = op.input;
    if (input.f === "bind") bindsByUrl.set(input.url, op);
    else if (input.f === "unbind") {
      push(unbinds, `${input.name}\n${input.id}`, op);
    } else if (input.f === "leaseRevoke") push(revokes, input.leaseId, op);
  }
  const putsByUrl = new Map<string, number[]>();
  for (const [revision, events] of stream.events) {
    for (const event of events) {
      if (event.type === "put") {
        push(putsByUrl, event.url, revision);
        const op = bindsByUrl.get(event.url);
        if (op === undefined) {
          findings.add(
            "unexplained",
            `revision ${revision} puts ${event.name} ${event.id} url=${event.url}, which no bind of the history carries`,
            { name: event.name },
          );
          continue;
        }
        const input = op.input as Extract<Operation["input"], { f: "bind" }>;
        if (op.invokedAt > event.at) {
          findings.add(
            "unexplained",
            `revision ${revision} puts ${event.name} ${event.id} url=${event.url}, received @${event.at}, before its bind was invoked`,
            {
              name: event.name,
              operations: [op.index],
              lines: [formatOperation(op)],
            },
          );
        } else if (
          input.name !== event.name || input.id !== event.id ||
          input.leaseId !== event.leaseId
        ) {
          findings.add(
            "unexplained",
            `revision ${revision} puts ${event.name} ${event.id} lease=${
              event.leaseId ?? "none"
            } with the url of another bind`,
            {
              name: event.name,
              operations: [op.index],
              lines: [formatOperation(op)],
            },
          );
        } else if (op.outcome === "fail") {
          findings.add(
            "fail-took-effect",
            `a bind recorded as not applied (fail) took effect at revision ${revision}`,
            {
              name: event.name,
              operations: [op.index],
              lines: [formatOperation(op)],
            },
          );
        } else if (
          op.outcome === "ok" && op.output?.f === "bind" &&
          !("revision" in op.output)
        ) {
          findings.add(
            "fail-took-effect",
            `a bind answered ${
              op.output.idInUse === true ? "ID_IN_USE" : "LEASE_NOT_FOUND"
            } took effect at revision ${revision}`,
            {
              name: event.name,
              operations: [op.index],
              lines: [formatOperation(op)],
            },
          );
        }
        continue;
      }
      if (event.reason === "leaseExpired") continue;
      const candidates = event.reason === "unbound"
        ? unbinds.get(`${event.name}\n${event.id}`) ?? []
        : event.reason === "leaseRevoked"
        ? revokes.get(event.leaseId ?? "") ?? []
        : [];
      if (event.reason === undefined) {
        findings.add(
          "unexplained",
          `revision ${revision} deletes ${event.name} ${event.id} with no reason`,
          { name: event.name },
        );
        continue;
      }
      const explained = candidates.some((op) =>
        op.outcome === "unknown" && op.invokedAt <= event.at ||
        op.outcome === "ok" && op.output !== undefined &&
          "revision" in op.output &&
          op.output.revision === revision &&
          (op.output.f !== "unbind" || op.output.removed === 1)
      );
      if (explained) continue;
      const failed = candidates.filter((op) => op.outcome === "fail");
      if (failed.length > 0) {
        findings.add(
          "fail-took-effect",
          `revision ${revision} deletes ${event.name} ${event.id} (${event.reason}), and only operations recorded as not applied (fail) could have`,
          {
            name: event.name,
            operations: failed.map((op) => op.index),
            lines: failed.map((op) => formatOperation(op)),
          },
        );
      } else {
        findings.add(
          "unexplained",
          `revision ${revision} deletes ${event.name} ${event.id} (${event.reason}), which no operation of the history explains`,
          {
            name: event.name,
            operations: candidates.map((op) => op.index),
            lines: candidates.map((op) => formatOperation(op)),
          },
        );
      }
    }
  }
  if (!stream.complete) return;
  // Every acknowledged write, at its revision.
  for (const op of history.operations) {
    if (op.outcome !== "ok" || op.output === undefined) continue;
    const output = op.output;
    if (!("revision" in output) || output.revision === undefined) continue;
    const revision = output.revision;
    const input = op.input;
    if (input.f === "lookup" || input.f === "leaseGrant") continue;
    const state = stream.stateAt(input.name, revision);
    if (state === null) continue;
    if (input.f === "bind") {
      const bound = state.get(input.id);
      if (bound === undefined || bound[0] !== input.url) {
        const puts = putsByUrl.get(input.url) ?? [];
        findings.add(
          "lost-write",
          puts.length === 0
            ? `an acknowledged bind (revision ${revision}) never appeared on the watch streams`
            : `an acknowledged bind answered revision ${revision}, but at that revision ${input.name} ${input.id} is ${
              bound === undefined ? "not bound" : bound[0]
            } (its put is at revision ${puts.join(", ")})`,
          {
            name: input.name,
            operations: [op.index],
            lines: [formatOperation(op)],
          },
        );
      }
    } else if (input.f === "unbind") {
      if (state.has(input.id)) {
        findings.add(
          "lost-write",
          `an acknowledged unbind (removed=${
            (output as { removed: number }).removed
          }) answered revision ${revision}, but ${input.name} ${input.id} is still bound at that revision`,
          {
            name: input.name,
            operations: [op.index],
            lines: [formatOperation(op)],
          },
        );
      }
    } else if (input.f === "leaseRevoke") {
      const left = [...state].filter(([, [, lease]]) =>
        lease === input.leaseId
      );
      if (left.length > 0) {
        findings.add(
          "lost-write",
          `an acknowledged revoke of ${input.leaseId} answered revision ${revision}, but ${
            left.map(([id]) => id).join(", ")
          } still carry that lease at that revision`,
          {
            name: input.name,
            operations: [op.index],
            lines: [formatOperation(op)],
          },
        );
      }
    }
  }
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

/** The identity of an event (without its receipt time). */
export function eventKey(event: WatchEventRecord): string {
  return [
    event.revision,
    event.type,
    event.name,
    event.id,
    event.url,
    event.leaseId ?? "",
    event.reason ?? "",
  ].join("\u0001");
}

function short(key: string): string {
  const [revision, type, name, id, url, lease, reason] = key.split("\u0001");
  return `rev ${revision} ${type} ${name} ${id} url=${url}${
    lease === "" ? "" : ` lease=${lease}`
  }${reason === "" ? "" : ` (${reason})`}`;
}

/** Endpoints as a lookup shows them, from a rebuilt state (sorted by id). */
export function endpointsOf(state: Endpoints): SeenEndpoint[] {
  return [...state].map(([id, [url, leaseId]]) => ({ id, url, leaseId }))
    .sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}
