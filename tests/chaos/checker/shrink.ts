/**
 * Shrinking a non-linearizable history to a small failing sub-history,
 * and printing it as readable lines.
 *
 * Removing an operation from a history is not sound in general: a write
 * removed can leave a read that it explained unexplained, and the
 * "violation" shown is then one the history never had. So the shrinker
 * only *relaxes* the history, in steps each of which keeps "the witness
 * fails ⇒ the history fails":
 *
 * - a read-only operation (one that never changes the model's state) is
 *   removed: that only drops a constraint;
 * - any other operation is made `unknown` (it may have happened at any
 *   time after its call, with any answer, or never): a weaker claim than
 *   the one recorded;
 * - an `unknown` operation invoked after every remaining definite one
 *   completed is removed: nothing left can observe it.
 *
 * Greedy, ddmin-style: first the shortest failing prefix (by invocation),
 * then chunks of definite operations relaxed, halving the chunk size down
 * to single operations, until no single relaxation keeps it failing (the
 * witness is then 1-minimal) or the time budget runs out.
 *
 * @module
 */

import type { Operation } from "../history.ts";
import { checkLinearizable, type Model, type WglOperation } from "./wgl.ts";

/** Settings of {@link shrink}. */
export interface ShrinkOptions<I, O> {
  /** Whether an operation never changes the model's state (removable). */
  readOnly?: (op: WglOperation<I, O>) => boolean;
  /** Total time budget, ms. @default 5_000 */
  maxMs?: number;
  /** Budget of each check, ms. @default 1_000 */
  checkMs?: number;
}

/** What {@link shrink} kept. */
export interface ShrinkResult {
  /** Indexes (into the input) of the operations kept as recorded. */
  definite: number[];
  /** Indexes of the operations kept as `unknown` (relaxed, or unknown already). */
  relaxed: number[];
  /** Whether no single further relaxation fails (false: out of time). */
  minimal: boolean;
  /** Linearizability checks run. */
  checks: number;
}

const DEFINITE = 0;
const RELAXED = 1;
const REMOVED = 2;

/**
 * A small failing witness of `operations`, which must not be
 * linearizable under `model`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { shrink } from "./shrink.ts";
 * import type { Model } from "./wgl.ts";
 * type In = { f: "w"; v: number } | { f: "r" };
 * const register: Model<number, In, number> = {
 *   init: () => 0,
 *   step: (s, op) =>
 *     op.input.f === "w"
 *       ? [op.input.v]
 *       : op.output === undefined || op.output === s ? [s] : [],
 *   key: String,
 * };
 * const ops = [
 *   { input: { f: "w", v: 1 } as In, call: 0, return: 1 },
 *   { input: { f: "r" } as In, output: 1, call: 2, return: 3 },
 *   { input: { f: "r" } as In, output: 0, call: 4, return: 5 }, // stale
 *   { input: { f: "w", v: 2 } as In, call: 6, return: 7 },
 * ];
 * const witness = shrink(register, ops, { readOnly: (op) => op.input.f === "r" });
 * assert.deepEqual(witness.definite, [0, 2]);
 * ```
 */
export function shrink<S, I, O>(
  model: Model<S, I, O>,
  operations: readonly WglOperation<I, O>[],
  options: ShrinkOptions<I, O> = {},
): ShrinkResult {
  const readOnly = options.readOnly ?? (() => false);
  const deadline = performance.now() + (options.maxMs ?? 5_000);
  const checkMs = options.checkMs ?? 1_000;
  const n = operations.length;
  const byCall = [...operations.keys()].sort((a, b) =>
    operations[a].call - operations[b].call || a - b
  );
  let status: Uint8Array = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    if (operations[i].return === null) {
      status[i] = readOnly(operations[i]) ? REMOVED : RELAXED;
    }
  }
  let checks = 0;

  const relax = (from: Uint8Array, which: Iterable<number>): Uint8Array => {
    const next = from.slice();
    for (const i of which) {
      if (next[i] === DEFINITE) {
        next[i] = readOnly(operations[i]) ? REMOVED : RELAXED;
      }
    }
    // Unknown operations invoked after every definite one completed.
    let lastReturn = -Infinity;
    for (let i = 0; i < n; i++) {
      if (next[i] === DEFINITE) {
        lastReturn = Math.max(lastReturn, operations[i].return!);
      }
    }
    for (let i = 0; i < n; i++) {
      if (next[i] === RELAXED && operations[i].call > lastReturn) {
        next[i] = REMOVED;
      }
    }
    return next;
  };
  const fails = (candidate: Uint8Array): boolean => {
    checks++;
    const ops: WglOperation<I, O>[] = [];
    for (let i = 0; i < n; i++) {
      if (candidate[i] === DEFINITE) ops.push(operations[i]);
      else if (candidate[i] === RELAXED) {
        ops.push({
          input: operations[i].input,
          call: operations[i].call,
          return: null,
        });
      }
    }
    return checkLinearizable(model, ops, { maxMs: checkMs }).ok === false;
  };

  // The shortest failing prefix (relaxing every later operation).
  let low = 1;
  let high = n;
  while (low < high && performance.now() < deadline) {
    const middle = (low + high) >>> 1;
    const candidate = relax(status, byCall.slice(middle));
    if (fails(candidate)) high = middle;
    else low = middle + 1;
  }
  const cut = relax(status, byCall.slice(high));
  if (high < n && fails(cut)) status = cut;

  // Chunks of definite operations, halving down to one.
  let minimal = false;
  let size = Math.max(1, Math.floor(count(status, DEFINITE) / 2));
  while (performance.now() < deadline) {
    const definite = byCall.filter((i) => status[i] === DEFINITE);
    let changed = false;
    for (let start = 0; start < definite.length; start += size) {
      if (performance.now() >= deadline) break;
      const candidate = relax(status, definite.slice(start, start + size));
      if (fails(candidate)) {
        status = candidate;
        changed = true;
      }
    }
    if (size === 1 && !changed && performance.now() < deadline) {
      minimal = true;
      break;
    }
    if (!changed || size > 1) size = Math.max(1, Math.floor(size / 2));
  }
  const definite: number[] = [];
  const relaxed: number[] = [];
  for (const i of byCall) {
    if (status[i] === DEFINITE) definite.push(i);
    else if (status[i] === RELAXED) relaxed.push(i);
  }
  return { definite, relaxed, minimal, checks };
}

function count(status: Uint8Array, value: number): number {
  let total = 0;
  for (const s of status) if (s === value) total++;
  return total;
}

/**
 * One history operation as a line:
 * `p3 invoke bind chaos/k1 e4 url=… lease=k1-l2 @1234.5 → ok rev 88 @1240.1`.
 * `relaxed` marks an operation the witness keeps as unknown.
 */
export function formatOperation(op: Operation, relaxed = false): string {
  const input = op.input;
  let what: string;
  switch (input.f) {
    case "bind":
      what = `bind ${input.name} ${input.id} url=${input.url} lease=${
        input.leaseId ?? "none"
      }`;
      break;
    case "unbind":
      what = `unbind ${input.name} ${input.id}`;
      break;
    case "lookup":
      what = `lookup ${input.name}${
        input.consistency === "serializable" ? " (serializable)" : ""
      }`;
      break;
    case "leaseGrant":
      what = `leaseGrant ${input.leaseId} ttl=${input.ttlMs}`;
      break;
    case "leaseKeepAlive":
      what = `leaseKeepAlive ${input.leaseId}`;
      break;
    case "leaseRevoke":
      what = `leaseRevoke ${input.leaseId}`;
      break;
  }
  const head = `#${op.index} p${op.process} invoke ${what} @${
    time(op.invokedAt)
  }`;
  if (relaxed && op.outcome === "ok") {
    return `${head} → (taken as unknown; recorded: ${outputText(op)})`;
  }
  if (op.outcome !== "ok") {
    return `${head} → ${op.outcome}${
      op.error === undefined
        ? ""
        : ` (${op.error.code ?? "-"}: ${op.error.message})`
    }${op.completedAt === null ? "" : ` @${time(op.completedAt)}`}`;
  }
  return `${head} → ${outputText(op)} @${time(op.completedAt!)}`;
}

/** The answer of an `ok` operation, short. */
export function outputText(op: Operation): string {
  const output = op.output;
  if (output === undefined) return "ok (no output recorded)";
  switch (output.f) {
    case "bind":
      return output.leaseNotFound === true
        ? "ok leaseNotFound"
        : `ok rev ${output.revision}`;
    case "unbind":
      return `ok rev ${output.revision} removed=${output.removed}`;
    case "lookup":
      return `ok rev ${output.revision} [${
        output.endpoints.map((e) =>
          `${e.id}=${e.url}${e.leaseId === null ? "" : `/${e.leaseId}`}`
        ).join(", ")
      }]`;
    case "leaseGrant":
      return output.exists === true
        ? "ok exists"
        : `ok rev ${output.revision} ttl=${output.ttlMs}`;
    case "leaseKeepAlive":
      return output.leaseNotFound === true
        ? "ok leaseNotFound"
        : `ok ttl=${output.ttlMs}`;
    case "leaseRevoke":
      return output.leaseNotFound === true
        ? "ok leaseNotFound"
        : `ok rev ${output.revision}`;
  }
}

function time(ms: number): string {
  return (Math.round(ms * 10) / 10).toString();
}
