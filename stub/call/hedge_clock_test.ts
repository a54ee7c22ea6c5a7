import assert from "node:assert/strict";
import { HedgeClock } from "./hedge_clock.ts";

Deno.test("the hedge clock wakes armed calls in turn with one timer, and clears it when the last one ends", async () => {
  const clock = new HedgeClock();
  const woken: string[] = [];
  const first = new Promise((wake) => clock.arm(5, wake)).then((v) =>
    woken.push(`first ${v}`)
  );
  const second = new Promise((wake) => clock.arm(20, wake)).then((v) =>
    woken.push(`second ${v}`)
  );
  // A call that answered before its delay: waking it later does nothing.
  let answered: (value: unknown) => void = () => {};
  const third = new Promise((wake) => {
    answered = wake;
    clock.arm(10, wake);
  });
  answered("answer");
  assert.equal(await third, "answer");
  clock.ended();
  await first;
  assert.deepEqual(woken, ["first hedge"]);
  clock.ended();
  await second;
  assert.deepEqual(woken, ["first hedge", "second hedge"]);
  clock.ended();
  // None armed: no timer left (the test's sanitizer would fail on one).
  const late = new Promise((wake) => clock.arm(10_000, wake));
  clock.ended();
  const outcome = await Promise.race([
    late,
    new Promise((r) => setTimeout(r, 30, "not woken")),
  ]);
  assert.equal(outcome, "not woken");
});
