import assert from "node:assert/strict";
import { handleText } from "./dispatcher.ts";
import { withContext } from "./method.ts";
import { shiftableWallClock } from "../../testing/time.ts";

/** A method that answers "done" after `ms`, or fails with its signal's reason. */
const methods = {
  wait: withContext(({ signal }, ms: number) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve("done"), ms);
      signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(signal.reason);
      }, { once: true });
    })
  ),
};

const call = (ms: number, timeoutMs: number) =>
  handleText(
    JSON.stringify({
      jsonrpc: "2.0",
      method: "wait",
      params: [ms],
      id: 1,
      timeoutMs,
    }),
    methods,
  ).then((reply) => JSON.parse(reply!));

Deno.test("a wall clock stepped back an hour does not hold a call past its deadline", async () => {
  const wall = shiftableWallClock();
  try {
    const started = performance.now();
    const reply = call(10_000, 300);
    await new Promise((resolve) => setTimeout(resolve, 50));
    wall.offsetMs = -3_600_000;
    const answer = await reply;
    assert.equal(answer.error?.code, -32003, JSON.stringify(answer));
    const tookMs = performance.now() - started;
    assert.ok(tookMs < 3_000, `answered after ${tookMs} ms`);
  } finally {
    wall.restore();
  }
});
