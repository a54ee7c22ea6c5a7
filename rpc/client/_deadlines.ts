/**
 * The deadlines of one connection's calls, served by a single timer
 * (private: not part of the public API). A timer per call costs a timer
 * object, its insertion and its removal on every call, though nearly every
 * call is answered long before its deadline; here a call costs one push
 * onto a binary min-heap (O(1) when deadlines arrive in order, as they do
 * for calls with the same timeout), and the one timer is re-armed only when
 * a deadline earlier than the armed one arrives or when it fires.
 *
 * Entries of calls that settled otherwise stay in the heap until they reach
 * its top or the heap is compacted (when it holds more than twice the
 * waiting calls, plus 64), so settling a call costs nothing here. When no
 * call waits ({@link Deadlines.idle}), the timer is kept but unreferenced
 * (it no longer keeps the process alive), so one call after another
 * (sequential calls) does not create and cancel a timer each: it fires at
 * most once per timeout, and finds nothing to do.
 *
 * @module
 */

/** Largest delay `setTimeout` honours (about 24.8 days), in ms. */
const MAX_TIMER_MS = 2_147_483_647;

/** Heap entries never compacted away below this size. */
const COMPACT_SLACK = 64;

/** Something with a deadline. */
export interface Timed {
  /** The deadline, a `performance.now()` time in ms. */
  readonly at: number;
}

/** Something whose deadline is set by {@link Deadlines.addAfterTurn}. */
export interface Delayed extends Timed {
  /** Set to the end of the turn plus {@link timeoutMs}. */
  at: number;
  /** How long after the turn that added it it expires, in ms. */
  readonly timeoutMs: number;
}

/**
 * A min-heap of {@link Timed} items by deadline, and the one timer that
 * expires them.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { Deadlines } from "./_deadlines.ts";
 * const waiting = new Set<{ at: number }>();
 * const deadlines = new Deadlines<{ at: number }>({
 *   isLive: (item) => waiting.has(item),
 *   live: () => waiting.size,
 *   expire: (item) => waiting.delete(item),
 * });
 * const item = { at: performance.now() + 5 };
 * waiting.add(item);
 * deadlines.add(item);
 * await new Promise((resolve) => setTimeout(resolve, 30));
 * assert.equal(waiting.size, 0); // it expired
 * ```
 */
export class Deadlines<T extends Timed> {
  readonly #isLive: (item: T) => boolean;
  readonly #live: () => number;
  readonly #expire: (item: T) => void;
  #heap: T[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The deadline the timer is armed for (Infinity: not armed). */
  #armedAt = Infinity;
  /** Whether the armed timer keeps the process alive. */
  #referenced = true;
  /** Items of this turn, not yet given their deadline. */
  #fresh: (T & Delayed)[] = [];

  /**
   * @param hooks.isLive Whether an item still waits (a settled one is dropped).
   * @param hooks.live How many items may still wait (an upper bound is fine).
   * @param hooks.expire Called once for each live item whose deadline passed.
   */
  constructor(hooks: {
    isLive(item: T): boolean;
    live(): number;
    expire(item: T): void;
  }) {
    this.#isLive = hooks.isLive;
    this.#live = hooks.live;
    this.#expire = hooks.expire;
  }

  /** How many entries the heap holds (live or not). */
  get size(): number {
    return this.#heap.length;
  }

  /** Adds an item; it expires at `item.at` unless it has settled by then. */
  add(item: T): void {
    const heap = this.#heap;
    if (heap.length > 2 * this.#live() + COMPACT_SLACK) this.#compact();
    heap.push(item);
    siftUp(heap, heap.length - 1);
    if (item.at < this.#armedAt) this.#arm(item.at);
    else if (!this.#referenced) this.#reference(true);
  }

  /**
   * Adds an item whose deadline is `item.timeoutMs` after the end of the
   * current turn (the synchronous code running now and the microtasks
   * queued before this call): the turn's items share one clock reading
   * instead of one each (`performance.now()` is a call into the runtime).
   * A deadline counts from no earlier than the add, so it never expires
   * early; it may count from up to the rest of the turn later, no later
   * than the turn's requests are written.
   */
  addAfterTurn(item: T & Delayed): void {
    if (this.#fresh.push(item) === 1) queueMicrotask(this.#stamp);
  }

  /** Gives this turn's items their deadlines, with one clock reading. */
  readonly #stamp = (): void => {
    const fresh = this.#fresh;
    if (fresh.length === 0) return;
    const now = performance.now();
    for (const item of fresh) {
      if (!this.#isLive(item)) continue;
      item.at = now + item.timeoutMs;
      this.add(item);
    }
    fresh.length = 0;
  };

  /**
   * Nothing waits any more: forgets every item; the timer stays armed but
   * unreferenced (stopped where a runtime cannot unreference timers).
   */
  idle(): void {
    this.#fresh.length = 0;
    this.#heap.length = 0;
    if (this.#timer !== undefined && !this.#reference(false)) this.#disarm();
  }

  /** Forgets every item and stops the timer. */
  clear(): void {
    this.#fresh.length = 0;
    this.#heap = [];
    this.#disarm();
  }

  #arm(at: number): void {
    this.#disarm();
    this.#armedAt = at;
    const delay = Math.min(Math.max(0, at - performance.now()), MAX_TIMER_MS);
    this.#timer = setTimeout(() => this.#fire(), delay);
    this.#referenced = true;
  }

  #disarm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#armedAt = Infinity;
  }

  /**
   * References the timer (it keeps the process alive) or not: a Node-style
   * timer object's `ref()`/`unref()`, or Deno's `refTimer`/`unrefTimer` for
   * a numeric id. False when neither exists.
   */
  #reference(on: boolean): boolean {
    const timer = this.#timer as unknown;
    if (typeof timer === "object" && timer !== null) {
      const node = timer as { ref?(): void; unref?(): void };
      if (typeof node.ref !== "function" || typeof node.unref !== "function") {
        return false;
      }
      if (on) node.ref();
      else node.unref();
    } else {
      const deno = (globalThis as {
        Deno?: { refTimer?(id: number): void; unrefTimer?(id: number): void };
      }).Deno;
      if (
        typeof timer !== "number" || deno?.refTimer === undefined ||
        deno.unrefTimer === undefined
      ) {
        return false;
      }
      if (on) deno.refTimer(timer);
      else deno.unrefTimer(timer);
    }
    this.#referenced = on;
    return true;
  }

  #fire(): void {
    this.#timer = undefined;
    this.#armedAt = Infinity;
    this.#referenced = true;
    const heap = this.#heap;
    const now = performance.now();
    const expired: T[] = [];
    while (heap.length > 0 && (heap[0].at <= now || !this.#isLive(heap[0]))) {
      const item = pop(heap);
      if (this.#isLive(item)) expired.push(item);
    }
    // Expire after popping: an expiry may add or settle items.
    for (const item of expired) {
      if (this.#isLive(item)) this.#expire(item);
    }
    // A timer may fire a little before its deadline by this clock: the
    // item not yet due is armed again (never expired early).
    const next = this.#heap[0];
    if (next !== undefined && next.at < this.#armedAt) this.#arm(next.at);
  }

  #compact(): void {
    const live = this.#heap.filter((item) => this.#isLive(item));
    for (let i = (live.length >> 1) - 1; i >= 0; i--) siftDown(live, i);
    this.#heap = live;
  }
}

function siftUp<T extends Timed>(heap: T[], index: number): void {
  const item = heap[index];
  while (index > 0) {
    const parent = (index - 1) >> 1;
    if (heap[parent].at <= item.at) break;
    heap[index] = heap[parent];
    index = parent;
  }
  heap[index] = item;
}

function siftDown<T extends Timed>(heap: T[], index: number): void {
  const item = heap[index];
  const length = heap.length;
  for (;;) {
    let child = 2 * index + 1;
    if (child >= length) break;
    if (child + 1 < length && heap[child + 1].at < heap[child].at) child++;
    if (heap[child].at >= item.at) break;
    heap[index] = heap[child];
    index = child;
  }
  heap[index] = item;
}

function pop<T extends Timed>(heap: T[]): T {
  const top = heap[0];
  const last = heap.pop()!;
  if (heap.length > 0) {
    heap[0] = last;
    siftDown(heap, 0);
  }
  return top;
}
