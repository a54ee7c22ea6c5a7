/**
 * A generic linearizability checker: Wing & Gong's search (1993) with
 * Lowe's improvements (2017), as Porcupine implements them
 * (github.com/anishathalye/porcupine, `checker.go`):
 *
 * - the history is one doubly linked list of call and return entries in
 *   time order; linearizing an operation *lifts* its two entries out of the
 *   list, backtracking *unlifts* them back in place (O(1) each);
 * - just-in-time linearization: only calls before the first remaining
 *   return entry are candidates, and meeting a return entry means its
 *   operation had to be linearized by then: backtrack;
 * - a cache of configurations (the set of linearized operations, the model
 *   state) so that no configuration is explored twice.
 *
 * Two more prunings, each keeping every linearization there is:
 *
 * - a read-only operation (see {@link Model.readOnly}) possible now
 *   without narrowing the set of states is linearized greedily, and not
 *   tried later on backtracking (moving it earlier in any linearization
 *   keeps it one), so concurrent reads cost no branching;
 * - an unknown operation that would change nothing now is left pending
 *   (pending keeps every option, it has no return to meet).
 *
 * Candidates are tried read-only first, then by soonest return (in a
 * replicated system an operation takes effect close to its answer).
 *
 * Nondeterministic models are handled as Porcupine's
 * `NondeterministicModel` is: the search carries the *set* of states the
 * model may be in, and an operation is possible when it leads from at
 * least one of them somewhere.
 *
 * Operations with an unknown outcome (`return: null`, Jepsen's `:info`)
 * have no return entry: they may be linearized at any point after their
 * call, or never; the search succeeds once every operation with a return
 * is linearized.
 *
 * The cache keys a configuration by a 96-bit hash of the set of
 * linearized operations (three independent 32-bit XOR hashes, updated in
 * O(1) per lift) plus the model states' keys. Two distinct sets collide
 * with probability 2^-96 per pair (about 10^-17 for a million cached
 * configurations): a collision could only prune a branch, never accept a
 * wrong history, and a rejected history is re-checked by the shrinker.
 *
 * @module
 */

/** One operation given to {@link checkLinearizable}. */
export interface WglOperation<I, O> {
  /** What was asked. */
  input: I;
  /** What was answered; undefined when the outcome is unknown. */
  output?: O;
  /** Invocation time. */
  call: number;
  /** Completion time; null when the outcome is unknown (pending forever). */
  return: number | null;
}

/**
 * A sequential specification. `step` gives every state the operation can
 * lead to from `state` given its recorded output (`op.output`, undefined
 * when unknown: then every possible output counts); an empty array means
 * the operation is impossible in `state`.
 */
export interface Model<S, I, O> {
  /** The state before any operation. */
  init(): S;
  /** The states `op` may lead to from `state` (empty: impossible). */
  step(state: S, op: WglOperation<I, O>): S[];
  /** A canonical text of the state: equal states, equal keys. */
  key(state: S): string;
  /**
   * Whether `op` never changes a state: every state `step` gives from `s`
   * is `s` or one that `s` may become on its own (a nondeterministic
   * model's spontaneous change, which `step` then gives after every
   * operation, so that the sets of states searched are closed under it).
   * Such an operation, when possible without narrowing the set of states,
   * is linearized greedily, without trying it later (moving it earlier in
   * any linearization keeps it one), which cuts the search from
   * exponential in the number of concurrent reads to linear. Optional:
   * without it nothing is greedy.
   */
  readOnly?(op: WglOperation<I, O>): boolean;
}

/** Limits of one check; past either, the answer is "unknown". */
export interface WglOptions {
  /** Most wall-clock time spent, ms. @default 10_000 */
  maxMs?: number;
  /** Most configurations cached (explored). @default 2_000_000 */
  maxConfigurations?: number;
}

/** What {@link checkLinearizable} found. */
export type WglResult =
  | { ok: true; configurations: number }
  | {
    ok: false;
    configurations: number;
    /** Most operations linearized at once in the search. */
    deepest: number;
    /** A linearization of that many operations (indexes into the input). */
    linearized: number[];
    /**
     * The operation (index into the input) whose return was met, at the
     * deepest point, without its being linearizable by then.
     */
    stuckAt: number;
  }
  | { ok: "unknown"; reason: string; configurations: number };

interface Entry {
  /** Index of the operation in the input. */
  op: number;
  /** Bit position of the operation (rank in call order). */
  bit: number;
  isCall: boolean;
  time: number;
  /** The call's return entry; the return's call entry; null for unknown calls. */
  match: Entry | null;
  prev: Entry | null;
  next: Entry | null;
}

/** A set of model states, with its canonical key. */
interface StateSet<S> {
  states: S[];
  key: string;
}

/**
 * Whether `operations` are linearizable with respect to `model`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkLinearizable, type Model } from "./wgl.ts";
 * // A register: write x, or read what it holds.
 * type In = { f: "w"; v: number } | { f: "r" };
 * const register: Model<number, In, number> = {
 *   init: () => 0,
 *   step: (s, op) =>
 *     op.input.f === "w"
 *       ? [op.input.v]
 *       : op.output === undefined || op.output === s ? [s] : [],
 *   key: (s) => String(s),
 * };
 * const concurrent = [
 *   { input: { f: "w", v: 1 } as In, call: 0, return: 10 },
 *   { input: { f: "r" } as In, output: 1, call: 1, return: 2 },
 * ];
 * assert.equal(checkLinearizable(register, concurrent).ok, true);
 * const stale = [
 *   { input: { f: "w", v: 1 } as In, call: 0, return: 1 },
 *   { input: { f: "r" } as In, output: 0, call: 2, return: 3 },
 * ];
 * assert.equal(checkLinearizable(register, stale).ok, false);
 * ```
 */
export function checkLinearizable<S, I, O>(
  model: Model<S, I, O>,
  operations: readonly WglOperation<I, O>[],
  options: WglOptions = {},
): WglResult {
  const maxMs = options.maxMs ?? 10_000;
  const maxConfigurations = options.maxConfigurations ?? 2_000_000;
  const started = performance.now();
  const n = operations.length;
  if (n === 0) return { ok: true, configurations: 0 };

  // Bits in call order, so that the hash words are cheap to pick.
  const byCall = [...operations.keys()].sort((a, b) =>
    operations[a].call - operations[b].call || a - b
  );
  const events: Entry[] = [];
  let returnsLeft = 0;
  byCall.forEach((op, bit) => {
    const operation = operations[op];
    const call: Entry = {
      op,
      bit,
      isCall: true,
      time: operation.call,
      match: null,
      prev: null,
      next: null,
    };
    events.push(call);
    if (operation.return !== null) {
      if (!(operation.return >= operation.call)) {
        throw new RangeError(
          `operation ${op} returns (${operation.return}) before its call (${operation.call})`,
        );
      }
      const ret: Entry = {
        op,
        bit,
        isCall: false,
        time: operation.return,
        match: call,
        prev: null,
        next: null,
      };
      call.match = ret;
      events.push(ret);
      returnsLeft++;
    }
  });
  // Time order; at equal times calls first (the operations overlap).
  events.sort((a, b) =>
    a.time - b.time || (a.isCall === b.isCall ? 0 : a.isCall ? -1 : 1) ||
    a.bit - b.bit
  );
  const head: Entry = {
    op: -1,
    bit: -1,
    isCall: false,
    time: -Infinity,
    match: null,
    prev: null,
    next: null,
  };
  let last = head;
  for (const entry of events) {
    last.next = entry;
    entry.prev = last;
    last = entry;
  }

  const hashes = randomWords(n * 3);
  const bits = new Uint8Array(n);
  let h0 = 0, h1 = 0, h2 = 0;
  const toggle = (bit: number) => {
    bits[bit] ^= 1;
    h0 ^= hashes[bit * 3];
    h1 ^= hashes[bit * 3 + 1];
    h2 ^= hashes[bit * 3 + 2];
  };
  const cache = new Set<string>();

  const initial = model.init();
  let state: StateSet<S> = { states: [initial], key: model.key(initial) };
  /** Linearized calls; `forced`: greedy, with no alternative to try. */
  const stack: {
    entry: Entry;
    state: StateSet<S>;
    forced: boolean;
    /** The candidates of the configuration it was pushed from, and how many were tried. */
    candidates: { list: Entry[]; blocking: Entry | null };
    tried: number;
  }[] = [];
  let deepest = 0;
  let deepestPending = false;
  let linearizedAtDeepest: number[] = [];
  let stuckAt = -1;
  let iterations = 0;

  // Read-only operations are tried first (greedy when they narrow
  // nothing: no branch), then the others by soonest return (in a
  // replicated system an operation takes effect close to its answer).
  const readOnly = new Uint8Array(n);
  if (model.readOnly !== undefined) {
    for (const entry of events) {
      if (entry.isCall && model.readOnly(operations[entry.op])) {
        readOnly[entry.bit] = 1;
      }
    }
  }
  /** The calls before the first remaining return, in the order to try them. */
  const candidatesNow = (): { list: Entry[]; blocking: Entry | null } => {
    const list: Entry[] = [];
    let entry = head.next;
    while (entry !== null && entry.isCall) {
      list.push(entry);
      entry = entry.next;
    }
    list.sort((a, b) =>
      readOnly[b.bit] - readOnly[a.bit] ||
      (a.match?.time ?? Infinity) - (b.match?.time ?? Infinity) ||
      a.time - b.time || a.bit - b.bit
    );
    return { list, blocking: entry };
  };

  let current = candidatesNow();
  let tried = 0;
  while (returnsLeft > 0) {
    if ((++iterations & 1023) === 0 && performance.now() - started > maxMs) {
      return {
        ok: "unknown",
        reason:
          `gave up after ${maxMs} ms (${cache.size} configurations explored)`,
        configurations: cache.size,
      };
    }
    let advanced = false;
    let dead = false;
    while (tried < current.list.length) {
      const entry = current.list[tried++];
      const operation = operations[entry.op];
      const next = stepSet(model, state, operation);
      if (next === null) continue;
      // An unknown operation that would change nothing here stays pending:
      // that keeps every option linearizing it now would (it has no
      // return to meet), and more.
      if (entry.match === null && next.key === state.key) continue;
      toggle(entry.bit);
      const key = `${h0},${h1},${h2}|${next.key}`;
      const forced = readOnly[entry.bit] === 1 && next.key === state.key;
      if (cache.has(key)) {
        toggle(entry.bit);
        // A greedy step explored already and failed: so does this configuration.
        if (forced) {
          dead = true;
          break;
        }
        continue;
      }
      cache.add(key);
      if (cache.size > maxConfigurations) {
        return {
          ok: "unknown",
          reason: `gave up after ${maxConfigurations} configurations`,
          configurations: cache.size,
        };
      }
      stack.push({ entry, state, forced, candidates: current, tried });
      state = next;
      lift(entry);
      if (entry.match !== null) returnsLeft--;
      if (stack.length > deepest) {
        deepest = stack.length;
        deepestPending = true;
      }
      advanced = true;
      break;
    }
    if (advanced) {
      current = candidatesNow();
      tried = 0;
      continue;
    }
    void dead;
    // No candidate left: the first return's operation was not linearized in time.
    if (deepestPending || (stuckAt === -1 && stack.length === deepest)) {
      deepestPending = false;
      linearizedAtDeepest = stack.map((frame) => frame.entry.op);
      stuckAt = current.blocking === null ? -1 : current.blocking.op;
    }
    let frame;
    do {
      frame = stack.pop();
      if (frame === undefined) {
        return {
          ok: false,
          configurations: cache.size,
          deepest,
          linearized: linearizedAtDeepest,
          stuckAt,
        };
      }
      toggle(frame.entry.bit);
      unlift(frame.entry);
      if (frame.entry.match !== null) returnsLeft++;
      state = frame.state;
    } while (frame.forced);
    current = frame.candidates;
    tried = frame.tried;
  }
  return { ok: true, configurations: cache.size };
}

/** The states `op` leads to from any of `set`, or null when none. */
function stepSet<S, I, O>(
  model: Model<S, I, O>,
  set: StateSet<S>,
  op: WglOperation<I, O>,
): StateSet<S> | null {
  if (set.states.length === 1) {
    const next = model.step(set.states[0], op);
    if (next.length === 0) return null;
    if (next.length === 1) return { states: next, key: model.key(next[0]) };
    return dedupe(model, next);
  }
  const all: S[] = [];
  for (const state of set.states) {
    for (const next of model.step(state, op)) all.push(next);
  }
  return all.length === 0 ? null : dedupe(model, all);
}

function dedupe<S, I, O>(model: Model<S, I, O>, states: S[]): StateSet<S> {
  const byKey = new Map<string, S>();
  for (const state of states) byKey.set(model.key(state), state);
  const keys = [...byKey.keys()].sort();
  return {
    states: keys.map((key) => byKey.get(key)!),
    key: keys.length === 1 ? keys[0] : keys.join("\u0000"),
  };
}

function lift(entry: Entry): void {
  entry.prev!.next = entry.next;
  if (entry.next !== null) entry.next.prev = entry.prev;
  const match = entry.match;
  if (match !== null) {
    match.prev!.next = match.next;
    if (match.next !== null) match.next.prev = match.prev;
  }
}

function unlift(entry: Entry): void {
  const match = entry.match;
  if (match !== null) {
    match.prev!.next = match;
    if (match.next !== null) match.next.prev = match;
  }
  entry.prev!.next = entry;
  if (entry.next !== null) entry.next.prev = entry;
}

/** Deterministic pseudo-random 32-bit words (xorshift32). */
function randomWords(count: number): Uint32Array {
  const words = new Uint32Array(count);
  let x = 0x9e3779b9;
  for (let i = 0; i < count; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x >>> 0;
  }
  return words;
}
