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
 * - any other operation keeps its interval but not its answer (it took
 *   effect between its call and its return, with any answer), and then is
 *   made `unknown` (it may have happened at any time after its call, with
 *   any answer, or never): each a weaker claim than the one before;
 * - an `unknown` operation invoked after every remaining definite one
 *   completed is removed: nothing left can observe it.
 *
 * Greedy, ddmin-style: first the shortest failing prefix (by invocation),
 * then chunks of definite operations relaxed, halving the chunk size down
 * to single operations, until no single relaxation keeps it failing (the
 * witness is then 1-minimal in its definite operations) or the time
 * budget runs out; last, as time allows, operations whose answer is
 * ignored are made unknown (each unknown operation makes the checks
 * dearer, so this comes last).
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
  /** Budget of each check, ms (undecided counts as not failing). @default 250 */
  checkMs?: number;
}

/** What {@link shrink} kept. */
export interface ShrinkResult {
  /** Indexes (into the input) of the operations kept as recorded. */
  definite: number[];
  /** Indexes of the operations kept in their interval, with any answer. */
  ignored: number[];
  /** Indexes of the operations kept as `unknown` (relaxed, or unknown already). */
  relaxed: number[];
  /** Whether no single further relaxation fails (false: out of time). */
  minimal: boolean;
  /** Linearizability checks run. */
  checks: number;
}

const DEFINITE = 0;
/** Unknown: at any time after its call, or never. */
const RELAXED = 1;
const REMOVED = 2;
/** Within its interval, with any answer. */
const IGNORED = 3;

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
 * // The stale read, and the write it missed (which had to happen by then).
 * assert.deepEqual(witness.definite, [2]);
 * assert.deepEqual(witness.ignored, [0]);
 * assert.deepEqual(witness.relaxed, []);
 * ```
 */
export function shrink<S, I, O>(
  model: Model<S, I, O>,
  operations: readonly WglOperation<I, O>[],
  options: ShrinkOptions<I, O> = {},
): ShrinkResult {
  const readOnly = options.readOnly ?? (() => false);
  let deadline = performance.now() + (options.maxMs ?? 5_000);
  const checkMs = options.checkMs ?? 250;
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

  /** `which` relaxed one step (`toUnknown`: straight to unknown). */
  const relax = (
    from: Uint8Array,
    which: Iterable<number>,
    toUnknown = false,
  ): Uint8Array => {
    const next = from.slice();
    for (const i of which) {
      if (next[i] === DEFINITE && readOnly(operations[i])) next[i] = REMOVED;
      else if (next[i] === DEFINITE) next[i] = toUnknown ? RELAXED : IGNORED;
      else if (next[i] === IGNORED) next[i] = RELAXED;
    }
    // Unknown operations invoked after every timed one completed.
    let lastReturn = -Infinity;
    for (let i = 0; i < n; i++) {
      if (next[i] === DEFINITE || next[i] === IGNORED) {
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
      const { input, call } = operations[i];
      if (candidate[i] === DEFINITE) ops.push(operations[i]);
      else if (candidate[i] === RELAXED) {
        ops.push({ input, call, return: null });
      } else if (candidate[i] === IGNORED) {
        ops.push({ input, call, return: operations[i].return });
      }
    }
    const left = Math.max(10, deadline - performance.now());
    return checkLinearizable(model, ops, { maxMs: Math.min(checkMs, left) })
      .ok === false;
  };

  // The shortest failing prefix (relaxing every later operation).
  let low = 1;
  let high = n;
  while (low < high && performance.now() < deadline) {
    const middle = (low + high) >>> 1;
    const candidate = relax(status, byCall.slice(middle), true);
    if (fails(candidate)) high = middle;
    else low = middle + 1;
  }
  const cut = relax(status, byCall.slice(high), true);
  if (high < n && fails(cut)) status = cut;

  // Chunks of definite operations, halving down to one: the read-only
  // ones first (removing them adds no unknown operation, so each check
  // stays cheap), then all.
  const chunks = (level: number, which: (i: number) => boolean): boolean => {
    let size = Math.max(1, Math.floor(byCall.filter(which).length / 2));
    while (performance.now() < deadline) {
      const definite = byCall.filter((i) => status[i] === level && which(i));
      let changed = false;
      for (let start = 0; start < definite.length; start += size) {
        if (performance.now() >= deadline) break;
        const candidate = relax(status, definite.slice(start, start + size));
        if (fails(candidate)) {
          status = candidate;
          changed = true;
        }
      }
      if (size === 1 && !changed && performance.now() < deadline) return true;
      if (!changed || size > 1) size = Math.max(1, Math.floor(size / 2));
    }
    return false;
  };
  chunks(DEFINITE, (i) => readOnly(operations[i]));
  const minimal = chunks(DEFINITE, () => true);
  // Then answers ignored made unknown (dearer checks: best effort, in at
  // most a fifth of the budget).
  deadline = Math.min(
    deadline,
    performance.now() + (options.maxMs ?? 5_000) / 5,
  );
  chunks(IGNORED, () => true);
  const definite: number[] = [];
  const ignored: number[] = [];
  const relaxed: number[] = [];
  for (const i of byCall) {
    if (status[i] === DEFINITE) definite.push(i);
    else if (status[i] === IGNORED) ignored.push(i);
    else if (status[i] === RELAXED) relaxed.push(i);
  }
  return { definite, ignored, relaxed, minimal, checks };
}

/**
 * One history operation as a line:
 * `p3 invoke bind chaos/k1 e4 url=… lease=k1-l2 @1234.5 → ok rev 88 @1240.1`.
 * `how` says what a witness keeps of it: all of it (`definite`), its
 * interval only (`ignored`: its answer is left out), or only that it may
 * have happened after its call (`unknown`).
 */
export function formatOperation(
  op: Operation,
  how: "definite" | "ignored" | "unknown" = "definite",
): string {
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
  if (how === "unknown" && op.outcome === "ok") {
    return `${head} → (taken as unknown; recorded: ${outputText(op)} @${
      time(op.completedAt!)
    })`;
  }
  if (how === "ignored" && op.outcome === "ok") {
    return `${head} → ${outputText(op)} @${
      time(op.completedAt!)
    } (its answer is not needed)`;
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
        : output.idInUse === true
        ? "ok idInUse"
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
