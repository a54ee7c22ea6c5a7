import assert from "node:assert/strict";
import { Deadlines } from "./_deadlines.ts";
import { delay } from "../../testing/time.ts";

interface Item {
  at: number;
  name: string;
}

/** A heap whose live items are those in `waiting`; expiries are recorded. */
function harness() {
  const waiting = new Set<Item>();
  const expired: { name: string; late: number }[] = [];
  const deadlines = new Deadlines<Item>({
    isLive: (item) => waiting.has(item),
    live: () => waiting.size,
    expire: (item) => {
      waiting.delete(item);
      expired.push({ name: item.name, late: performance.now() - item.at });
    },
  });
  const add = (name: string, inMs: number) => {
    const item = { at: performance.now() + inMs, name };
    waiting.add(item);
    deadlines.add(item);
    return item;
  };
  return { waiting, expired, deadlines, add };
}

Deno.test("deadlines: items expire in deadline order and never before their deadline", async () => {
  const { expired, add } = harness();
  add("c", 60);
  add("a", 10);
  add("b", 30);
  for (let i = 0; i < 100 && expired.length < 3; i++) await delay(10);
  assert.deepEqual(expired.map((e) => e.name), ["a", "b", "c"]);
  for (const { late } of expired) {
    assert.ok(late >= 0, `expired ${-late} ms early`);
  }
});

Deno.test("deadlines: an earlier deadline added after a later one is not held back by it", async () => {
  const { expired, add, deadlines } = harness();
  add("late", 5_000);
  const start = performance.now();
  add("early", 20);
  for (let i = 0; i < 100 && expired.length < 1; i++) await delay(5);
  assert.deepEqual(expired.map((e) => e.name), ["early"]);
  assert.ok(performance.now() - start < 2_000);
  deadlines.clear();
});

Deno.test("deadlines: a settled item never expires, and clear() stops the timer", async () => {
  const { waiting, expired, add, deadlines } = harness();
  const settled = add("settled", 10);
  add("other", 10);
  waiting.delete(settled);
  await delay(40);
  assert.deepEqual(expired.map((e) => e.name), ["other"]);
  add("cleared", 10);
  deadlines.clear();
  await delay(30);
  assert.deepEqual(expired.map((e) => e.name), ["other"]);
  assert.equal(deadlines.size, 0);
});

Deno.test("deadlines: settled entries are compacted away, the heap stays within 2× the live items + 64", () => {
  const { waiting, add, deadlines } = harness();
  for (let i = 0; i < 10_000; i++) {
    const item = add(`call ${i}`, 60_000);
    if (i % 100 !== 0) waiting.delete(item); // answered at once
  }
  assert.ok(
    deadlines.size <= 2 * waiting.size + 64 + 1,
    `${deadlines.size} entries for ${waiting.size} live items`,
  );
  deadlines.clear();
});

Deno.test("deadlines: after idle() the kept timer expires nothing, and a later item still expires at its own deadline", async () => {
  const { waiting, expired, add, deadlines } = harness();
  const first = add("first", 10);
  waiting.delete(first); // answered
  deadlines.idle();
  assert.equal(deadlines.size, 0);
  await delay(5);
  add("second", 40); // later than the kept timer's deadline
  await delay(20); // the kept timer has fired by now
  assert.equal(expired.length, 0);
  for (let i = 0; i < 100 && expired.length < 1; i++) await delay(5);
  assert.deepEqual(expired.map((e) => e.name), ["second"]);
  assert.ok(expired[0].late >= 0);
});

Deno.test("deadlines: an idle heap's timer does not keep the process alive", async () => {
  const script = `
    import { Deadlines } from ${
    JSON.stringify(new URL("./_deadlines.ts", import.meta.url).href)
  };
    const deadlines = new Deadlines({ isLive: () => false, live: () => 0, expire: () => {} });
    deadlines.add({ at: performance.now() + 60_000 });
    deadlines.idle();
  `;
  const start = performance.now();
  const { code } = await new Deno.Command(Deno.execPath(), {
    args: ["eval", script],
    stdout: "null",
    stderr: "inherit",
  }).output();
  assert.equal(code, 0);
  assert.ok(performance.now() - start < 30_000);
});

Deno.test("deadlines: items added in one turn count from its end, share one clock reading, and never expire early", async () => {
  const waiting = new Set<{ at: number; timeoutMs: number }>();
  const expired: { at: number; late: number }[] = [];
  const deadlines = new Deadlines<{ at: number; timeoutMs: number }>({
    isLive: (item) => waiting.has(item),
    live: () => waiting.size,
    expire: (item) => {
      waiting.delete(item);
      expired.push({ at: item.at, late: performance.now() - item.at });
    },
  });
  const before = performance.now();
  const items = [20, 10, 30].map((timeoutMs) => ({ at: Infinity, timeoutMs }));
  const settled = { at: Infinity, timeoutMs: 5 };
  for (const item of [...items, settled]) {
    waiting.add(item);
    deadlines.addAfterTurn(item);
  }
  // Not stamped within the turn; settled before its end: never in the heap.
  assert.deepEqual(items.map((item) => item.at), [
    Infinity,
    Infinity,
    Infinity,
  ]);
  waiting.delete(settled);
  await Promise.resolve();
  const stamp = items[0].at - items[0].timeoutMs;
  assert.ok(stamp >= before, "a deadline counted from before its add");
  assert.deepEqual(
    items.map((item) => item.at - stamp),
    [20, 10, 30],
    "one clock reading for the turn",
  );
  assert.equal(deadlines.size, 3);
  assert.equal(settled.at, Infinity);
  for (let i = 0; i < 100 && expired.length < 3; i++) await delay(10);
  assert.deepEqual(
    expired.map((e) => e.at),
    [10, 20, 30].map((ms) => stamp + ms),
  );
  for (const { late } of expired) {
    assert.ok(late >= 0, `expired ${-late} ms early`);
  }
});

Deno.test("deadlines: idle() drops the items of the turn not yet stamped", async () => {
  const waiting = new Set<{ at: number; timeoutMs: number }>();
  const deadlines = new Deadlines<{ at: number; timeoutMs: number }>({
    isLive: (item) => waiting.has(item),
    live: () => waiting.size,
    expire: () => assert.fail("nothing may expire"),
  });
  const item = { at: Infinity, timeoutMs: 5 };
  waiting.add(item);
  deadlines.addAfterTurn(item);
  deadlines.idle();
  await Promise.resolve();
  assert.equal(item.at, Infinity);
  assert.equal(deadlines.size, 0);
  deadlines.clear();
});
