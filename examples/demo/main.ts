/**
 * `deno task demo`: runs the failover scenario on real processes and prints
 * one line per second, then a summary line. Exits 1 if any call failed,
 * 130 when interrupted; every process it started is stopped either way.
 *
 * @module
 */

import { runScenario, summaryLine } from "./scenario.ts";
import { versionLine } from "../../internal/version.ts";

const USAGE = `usage: deno task demo [-- --secure]

Starts 3 registry nodes and 2 hello servers as processes on 127.0.0.1, calls
hello.greet continuously for about 12 s while it kills a hello server and the
registry leader with SIGKILL, binds a third server and restarts the killed
node, and prints a line per second and a summary. Exits 0 if no call failed,
1 if one did, 130 when interrupted (every process it started is stopped).

  --secure the same story with TLS on every link (certificates from a
           throw-away CA, peer mutual TLS with member certificates) and
           tokens on (--auth on every node; the servers bind with a
           bind:hello token, the clients call with a read:hello one)
  --help   show this text
  --version, -V
           print Rafter's and the runtime's versions`;

if (Deno.args.includes("--help") || Deno.args.includes("-h")) {
  console.log(USAGE);
  Deno.exit(0);
}
if (Deno.args.includes("--version") || Deno.args.includes("-V")) {
  console.log(versionLine());
  Deno.exit(0);
}
// `deno task demo -- --secure` passes the "--" on.
const unexpected = Deno.args.filter((arg) =>
  arg !== "--secure" && arg !== "--"
);
if (unexpected.length > 0) {
  console.error(
    `demo: unexpected ${JSON.stringify(unexpected[0])}\n\n${USAGE}`,
  );
  Deno.exit(2);
}

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
  secure: Deno.args.includes("--secure"),
});
console.log(summaryLine(result));
for (const failure of result.failures) console.log(`  failure: ${failure}`);
Deno.removeSignalListener("SIGINT", onSignal);
Deno.removeSignalListener("SIGTERM", onSignal);
Deno.exit(!result.completed ? 130 : result.failed === 0 ? 0 : 1);
