/**
 * `deno task demo`: runs the failover scenario on real processes and prints
 * one line per second, then a summary line. Exits 1 if any call failed,
 * 130 when interrupted; every process it started is stopped either way.
 *
 * @module
 */

import { runScenario, summaryLine } from "./scenario.ts";

const controller = new AbortController();
const onSignal = () => {
  console.log("interrupted: stopping every process the demo started…");
  controller.abort();
};
Deno.addSignalListener("SIGINT", onSignal);
Deno.addSignalListener("SIGTERM", onSignal);

const result = await runScenario({
  log: (line) => console.log(line),
  signal: controller.signal,
});
console.log(summaryLine(result));
for (const failure of result.failures) console.log(`  failure: ${failure}`);
Deno.removeSignalListener("SIGINT", onSignal);
Deno.removeSignalListener("SIGTERM", onSignal);
Deno.exit(!result.completed ? 130 : result.failed === 0 ? 0 : 1);
