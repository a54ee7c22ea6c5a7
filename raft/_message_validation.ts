/**
 * Checks Raft messages received from the network before they reach the
 * core, so a faulty or hostile peer cannot corrupt a node's state.
 *
 * @module
 */

import type { Entry, Message } from "./types.ts";

const TYPES = new Set([
  "vote",
  "voteResponse",
  "preVote",
  "preVoteResponse",
  "append",
  "appendResponse",
  "readIndex",
  "readIndexResponse",
  "timeoutNow",
  "installSnapshot",
  "installSnapshotResponse",
]);

/**
 * Returns `value` as a {@link Message} after checking every field the core
 * reads.
 *
 * @throws {TypeError} naming the first field that is missing or of the wrong
 * type.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseMessage } from "./_message_validation.ts";
 * const message = parseMessage({
 *   type: "voteResponse", from: "n2", to: "n1", term: 3, granted: true,
 * });
 * assert.equal(message.type, "voteResponse");
 * ```
 */
export function parseMessage(value: unknown): Message {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new TypeError("a Raft message must be an object");
  }
  const m = value as Record<string, unknown>;
  if (typeof m.type !== "string" || !TYPES.has(m.type)) {
    throw new TypeError(`unknown Raft message type ${JSON.stringify(m.type)}`);
  }
  requireString(m, "from");
  requireString(m, "to");
  requireCount(m, "term");
  switch (m.type) {
    case "vote":
    case "preVote":
      requireCount(m, "lastLogIndex");
      requireCount(m, "lastLogTerm");
      requireAtMostTerm(m, "lastLogTerm");
      if (m.type === "vote" && "transfer" in m && m.transfer !== undefined) {
        if (m.transfer !== true) {
          throw new TypeError(
            'Raft message field "transfer" must be true when present',
          );
        }
      }
      break;
    case "voteResponse":
    case "preVoteResponse":
      requireBoolean(m, "granted");
      break;
    case "append":
      requireCount(m, "prevLogIndex");
      requireCount(m, "prevLogTerm");
      requireCount(m, "commit");
      requireAtMostTerm(m, "prevLogTerm");
      optionalString(m, "context");
      requireEntries(
        m.entries,
        m.prevLogIndex as number,
        m.prevLogTerm as number,
        m.term as number,
      );
      break;
    case "appendResponse":
      requireBoolean(m, "success");
      requireCount(m, "index");
      requireCount(m, "conflictTerm");
      requireCount(m, "conflictIndex");
      requireAtMostTerm(m, "conflictTerm");
      optionalString(m, "context");
      break;
    case "installSnapshot": {
      const point = m.snapshot as Record<string, unknown>;
      if (typeof point !== "object" || point === null || Array.isArray(point)) {
        throw new TypeError(
          'Raft message field "snapshot" must be an object { index, term }',
        );
      }
      requireCount(point, "index", "snapshot.index");
      requireCount(point, "term", "snapshot.term");
      if ((point.index === 0) !== (point.term === 0)) {
        throw new TypeError(
          'Raft message fields "snapshot.index" and "snapshot.term" must both be 0 or both be > 0',
        );
      }
      if ((point.term as number) > (m.term as number)) {
        throw new TypeError(
          `Raft message field "snapshot.term" must not exceed "term" (${m.term})`,
        );
      }
      requireCount(m, "offset");
      requireString(m, "data");
      requireBoolean(m, "done");
      requireConfiguration(m);
      break;
    }
    case "installSnapshotResponse":
      requireCount(m, "snapshotIndex");
      requireCount(m, "offset");
      requireBoolean(m, "success");
      break;
    case "readIndex":
      requireString(m, "context");
      break;
    case "readIndexResponse":
      requireString(m, "context");
      requireCount(m, "index");
      break;
    case "timeoutNow":
      // from, to and term are all it carries.
      break;
  }
  return m as unknown as Message;
}

/**
 * An InstallSnapshot's `configuration`: an object with `voters` (at least
 * one) and `learners`, arrays of non-empty strings, no node in both. Other
 * fields are left as they are (the configuration is an opaque value).
 */
function requireConfiguration(m: Record<string, unknown>): void {
  const config = m.configuration as Record<string, unknown>;
  const ids = (list: unknown): list is string[] =>
    Array.isArray(list) &&
    list.every((id) => typeof id === "string" && id !== "");
  if (
    typeof config !== "object" || config === null || Array.isArray(config) ||
    !ids(config.voters) || !ids(config.learners) ||
    config.voters.length === 0 ||
    config.voters.some((id) => (config.learners as string[]).includes(id))
  ) {
    throw new TypeError(
      'Raft message field "configuration" must be an object { voters: [ids, at least one], learners: [ids] } with no node in both',
    );
  }
}

function requireString(m: Record<string, unknown>, field: string): void {
  if (typeof m[field] !== "string") {
    throw new TypeError(`Raft message field "${field}" must be a string`);
  }
}

function optionalString(m: Record<string, unknown>, field: string): void {
  if (field in m && m[field] !== undefined) requireString(m, field);
}

function requireBoolean(m: Record<string, unknown>, field: string): void {
  if (typeof m[field] !== "boolean") {
    throw new TypeError(`Raft message field "${field}" must be a boolean`);
  }
}

function requireCount(
  m: Record<string, unknown>,
  field: string,
  name = field,
): void {
  const v = m[field];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new TypeError(
      `Raft message field "${name}" must be a non-negative integer`,
    );
  }
}

/** A log entry's term never exceeds the term of the node that sent it. */
function requireAtMostTerm(m: Record<string, unknown>, field: string): void {
  if ((m[field] as number) > (m.term as number)) {
    throw new TypeError(
      `Raft message field "${field}" must not exceed "term" (${m.term})`,
    );
  }
}

/**
 * Entries must follow `prevLogIndex` without gaps, with terms that never
 * decrease (starting from `prevLogTerm`, at least 1) and never exceed the
 * message's term: the shape of every leader's log.
 */
function requireEntries(
  value: unknown,
  prevLogIndex: number,
  prevLogTerm: number,
  term: number,
): void {
  if (!Array.isArray(value)) {
    throw new TypeError('Raft message field "entries" must be an array');
  }
  let previousTerm = Math.max(prevLogTerm, 1);
  value.forEach((entry: Partial<Entry>, i) => {
    if (
      typeof entry !== "object" || entry === null ||
      entry.index !== prevLogIndex + 1 + i ||
      typeof entry.term !== "number" || !Number.isSafeInteger(entry.term) ||
      entry.term < previousTerm || entry.term > term ||
      typeof entry.data !== "string" ||
      (entry.type !== undefined && entry.type !== "config")
    ) {
      throw new TypeError(
        `Raft message entry ${i} must be { index: ${
          prevLogIndex + 1 + i
        }, term: ${previousTerm}..${term}, data: string, type?: "config" }`,
      );
    }
    previousTerm = entry.term;
  });
}
