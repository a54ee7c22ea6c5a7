import assert from "node:assert/strict";
import { RetryBudget } from "./retry_budget.ts";

Deno.test("a budget allows percentCanRetry retries per call plus the reserve, over its window", () => {
  let now = 0;
  const budget = new RetryBudget({
    ttlMs: 10_000,
    minRetriesPerSecond: 1,
    percentCanRetry: 0.1,
    now: () => now,
  });
  // The reserve: 1 per second over 10 s.
  let retries = 0;
  while (budget.tryWithdraw() && retries < 1_000) retries++;
  assert.equal(retries, 10);
  // 100 calls add 10 more.
  for (let i = 0; i < 100; i++) budget.deposit();
  retries = 0;
  while (budget.tryWithdraw() && retries < 1_000) retries++;
  assert.equal(retries, 10);
  // Once the window has passed, the reserve is back.
  now = 10_001;
  assert.ok(budget.tryWithdraw());
});

Deno.test("with no reserve, a failing load is retried at most percentCanRetry of its calls", () => {
  const budget = new RetryBudget({
    minRetriesPerSecond: 0,
    percentCanRetry: 0.2,
  });
  let retries = 0;
  for (let call = 0; call < 1_000; call++) {
    budget.deposit();
    // Every call fails and wants 4 retries.
    for (let i = 0; i < 4; i++) if (budget.tryWithdraw()) retries++;
  }
  assert.equal(retries, 200);
});

Deno.test("bad budget settings are refused", () => {
  assert.throws(() => new RetryBudget({ ttlMs: 0 }), RangeError);
  assert.throws(() => new RetryBudget({ minRetriesPerSecond: -1 }), RangeError);
  assert.throws(() => new RetryBudget({ percentCanRetry: -0.1 }), RangeError);
});
