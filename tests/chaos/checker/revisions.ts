/**
 * Checks of revisions and leases across names:
 *
 * - **Real time**: an `ok` operation invoked after another `ok` one
 *   completed never carries a smaller revision (serializable lookups are
 *   left out: they may be stale).
 * - **Lookup contents**: every `ok` lookup's endpoints (linearizable or
 *   serializable) equal the state of its name at the lookup's revision as
 *   rebuilt from the watch streams: a serializable lookup may be stale,
 *   but must show a real past state. And no lookup shows the url of a
 *   bind invoked after the lookup completed (a read from the future).
 * - **Leases**: an expiry of lease L (a `leaseExpired` delete received,
 *   or a keep-alive or bind answered LEASE_NOT_FOUND with no revoke of L
 *   invoked before) must not be seen earlier than `ttlMs` after the
 *   invocation of the last successful keep-alive or grant of L that
 *   completed before it, minus a tolerance: a lease kept alive is never
 *   expired.
 *
 * @module
 */

import type { History, Operation } from "../history.ts";
import { formatOperation } from "./shrink.ts";
import { type CheckResult, Findings } from "./violation.ts";
import { endpointsOf, type Stream } from "./watch.ts";
import { sameEndpoints } from "./registry_model.ts";

/** Settings of {@link checkRevisions} and {@link checkLeases}. */
export interface RevisionOptions {
  /** Slack for an early expiry, ms. @default 250 */
  leaseToleranceMs?: number;
}

/** The revision an `ok` operation answered, if it carries one. */
export function revisionOf(op: Operation): number | null {
  if (op.outcome !== "ok" || op.output === undefined) return null;
  const output = op.output as { revision?: number };
  return typeof output.revision === "number" ? output.revision : null;
}

/** Real-time order of revisions and the contents of lookups. */
export function checkRevisions(history: History, stream: Stream): CheckResult {
  const findings = new Findings("revisions");
  // Real time: sweep invocations in order, with the highest revision of
  // the operations completed before each.
  const ordered = history.operations.filter((op) =>
    revisionOf(op) !== null && op.completedAt !== null &&
    !(op.input.f === "lookup" && op.input.consistency === "serializable")
  );
  const byCompletion = [...ordered].sort((a, b) =>
    a.completedAt! - b.completedAt!
  );
  const byInvocation = [...ordered].sort((a, b) => a.invokedAt - b.invokedAt);
  let done = 0;
  let highest: Operation | null = null;
  for (const op of byInvocation) {
    while (
      done < byCompletion.length &&
      byCompletion[done].completedAt! < op.invokedAt
    ) {
      const finished = byCompletion[done++];
      if (highest === null || revisionOf(finished)! > revisionOf(highest)!) {
        highest = finished;
      }
    }
    if (highest !== null && revisionOf(op)! < revisionOf(highest)!) {
      findings.add(
        "backwards",
        `revision went backwards: #${op.index} answered revision ${
          revisionOf(op)
        } though #${highest.index}, completed before it was invoked, answered ${
          revisionOf(highest)
        }`,
        {
          name: op.input.name,
          operations: [highest.index, op.index],
          lines: [formatOperation(highest), formatOperation(op)],
        },
      );
    }
  }

  // Lookup contents, and reads from the future.
  const binds = new Map<string, Operation>();
  for (const op of history.operations) {
    if (op.input.f === "bind") binds.set(op.input.url, op);
  }
  let unchecked = 0;
  for (const op of history.operations) {
    if (
      op.input.f !== "lookup" || op.outcome !== "ok" ||
      op.output?.f !== "lookup"
    ) continue;
    const output = op.output;
    for (const endpoint of output.endpoints) {
      const bind = binds.get(endpoint.url);
      if (bind !== undefined && bind.invokedAt > op.completedAt!) {
        findings.add(
          "future-read",
          `lookup #${op.index} saw ${endpoint.id}=${endpoint.url}, written by a bind invoked after the lookup completed`,
          {
            name: op.input.name,
            operations: [op.index, bind.index],
            lines: [formatOperation(op), formatOperation(bind)],
          },
        );
      }
    }
    const state = stream.stateAt(op.input.name, output.revision);
    if (state === null) {
      unchecked++;
      continue;
    }
    const want = {
      endpoints: endpointsOf(state).map((e) =>
        [e.id, e.url, e.leaseId] as const
      ),
      leases: [],
    };
    if (!sameEndpoints(want, output.endpoints)) {
      const seen = new Set(
        output.endpoints.map((e) => `${e.id}=${e.url}/${e.leaseId ?? "none"}`),
      );
      const there = new Set(
        want.endpoints.map(([id, url, lease]) =>
          `${id}=${url}/${lease ?? "none"}`
        ),
      );
      const missing = [...there].filter((e) => !seen.has(e));
      const extra = [...seen].filter((e) => !there.has(e));
      findings.add(
        "lookup-contents",
        `lookup #${op.index} (${op.input.consistency}) answered revision ${output.revision}, but its endpoints are not the state of ${op.input.name} at that revision (missing: ${
          missing.join(", ") || "none"
        }; extra: ${extra.join(", ") || "none"})`,
        {
          name: op.input.name,
          operations: [op.index],
          lines: [
            formatOperation(op),
            `state at revision ${output.revision} per the watch streams: [${
              [...there].join(", ")
            }]`,
          ],
        },
      );
    }
  }
  if (unchecked > 0) {
    findings.note(
      `${unchecked} lookups not compared with the watch streams (their revision is outside ${stream.from}..${stream.to}, the range the streams cover${
        stream.complete
          ? ""
          : "; the streams do not reach back to the run's start"
      })`,
    );
  }
  return findings.result();
}

/** A lease kept alive is never expired (see the module doc). */
export function checkLeases(
  history: History,
  stream: Stream,
  options: RevisionOptions = {},
): CheckResult {
  const findings = new Findings("leases");
  const tolerance = options.leaseToleranceMs ?? 250;
  /** Successful renewals (grant, keep-alive) and revokes of each lease. */
  const renewals = new Map<string, Operation[]>();
  const revokes = new Map<string, Operation[]>();
  const ttls = new Map<string, number>();
  const evidence: {
    leaseId: string;
    at: number;
    what: string;
    op?: Operation;
  }[] = [];
  for (const op of history.operations) {
    const input = op.input;
    if (input.f === "leaseGrant") {
      ttls.set(input.leaseId, input.ttlMs);
      if (
        op.outcome === "ok" && op.output?.f === "leaseGrant" &&
        op.output.exists !== true
      ) {
        push(renewals, input.leaseId, op);
      }
    } else if (
      input.f === "leaseKeepAlive" && op.outcome === "ok" &&
      op.output?.f === "leaseKeepAlive"
    ) {
      if (op.output.leaseNotFound === true) {
        evidence.push({
          leaseId: input.leaseId,
          at: op.completedAt!,
          what: `keep-alive #${op.index} answered LEASE_NOT_FOUND`,
          op,
        });
      } else push(renewals, input.leaseId, op);
    } else if (input.f === "leaseRevoke" && op.outcome !== "fail") {
      push(revokes, input.leaseId, op);
    } else if (
      input.f === "bind" && input.leaseId !== null && op.outcome === "ok" &&
      op.output?.f === "bind" && op.output.leaseNotFound === true
    ) {
      evidence.push({
        leaseId: input.leaseId,
        at: op.completedAt!,
        what: `bind #${op.index} answered LEASE_NOT_FOUND`,
        op,
      });
    }
  }
  for (const events of stream.events.values()) {
    for (const event of events) {
      if (
        event.type === "delete" && event.reason === "leaseExpired" &&
        event.leaseId !== null
      ) {
        evidence.push({
          leaseId: event.leaseId,
          at: event.at,
          what:
            `an expiry delete of ${event.name} ${event.id} at revision ${event.revision}, received`,
        });
      }
    }
  }
  for (const { leaseId, at, what, op } of evidence) {
    const ttl = ttls.get(leaseId);
    if (ttl === undefined) continue;
    if ((revokes.get(leaseId) ?? []).some((r) => r.invokedAt <= at)) continue;
    let last: Operation | null = null;
    for (const renewal of renewals.get(leaseId) ?? []) {
      if (
        renewal.completedAt! <= at &&
        (last === null || renewal.invokedAt > last.invokedAt)
      ) last = renewal;
    }
    if (last === null) continue;
    const due = last.invokedAt + ttl - tolerance;
    if (at < due) {
      findings.add(
        "early-expiry",
        `lease ${leaseId} (ttl ${ttl} ms) expired early: ${what} @${
          round(at)
        }, ${
          round(at - last.invokedAt)
        } ms after the invocation of #${last.index}, which renewed it`,
        {
          name: last.input.name,
          operations: op === undefined ? [last.index] : [last.index, op.index],
          lines: [
            formatOperation(last),
            ...(op === undefined ? [] : [formatOperation(op)]),
          ],
        },
      );
    }
  }
  return findings.result();
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
