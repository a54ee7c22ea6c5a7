/**
 * How the example servers wait to be stopped: SIGTERM or SIGINT, or, with
 * `watchStdin` (the test harness's `--watch-stdin`), the end of standard
 * input (the process that started them went away).
 *
 * @module
 */

/**
 * Resolves on SIGTERM or SIGINT, or at the end of stdin when `watchStdin`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { untilStopped } from "./until_stopped.ts";
 * assert.equal(typeof untilStopped, "function"); // await untilStopped(false) in a server
 * ```
 */
export function untilStopped(watchStdin: boolean): Promise<void> {
  const stop = Promise.withResolvers<void>();
  Deno.addSignalListener("SIGTERM", () => stop.resolve());
  Deno.addSignalListener("SIGINT", () => stop.resolve());
  if (watchStdin) {
    (async () => {
      for await (const _ of Deno.stdin.readable) { /* until EOF */ }
      stop.resolve();
    })();
  }
  return stop.promise;
}
