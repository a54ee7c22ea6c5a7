/**
 * One chaos run, inside the chaos network's client namespace (started by
 * `run.ts` on the host side with `ip netns exec <client ns> deno run -A
 * _run.ts <options JSON>`, `RAFTER_CHAOS_NET` set): a registry cluster
 * ({@link ChaosCluster}) under the {@link Nemesis} while the
 * {@link Workload}'s clients and watchers record a history; then every
 * fault healed, the history settled and written with the faults to
 * `<out>/history.json` and `<out>/faults.json`. Prints one JSON line, a
 * {@link RunSummary}, last. Exit 0 unless the run itself broke.
 *
 * @module
 */

import { ChaosNetwork } from "./netns.ts";
import { ChaosCluster } from "./cluster.ts";
import { type FaultKind, type FaultRecord, Nemesis } from "./nemesis.ts";
import { Workload } from "./workload.ts";

/** What `_run.ts` is asked to do (its one argument, JSON). */
export interface RunRequest {
  /** Nodes: 3 or 5. */
  size: number;
  /** How long the nemesis injects faults, s. */
  seconds: number;
  seed: number;
  /** Fault kinds to draw from. */
  kinds: FaultKind[];
  /** Quiet time between faults, ms. */
  intervalMs: [number, number];
  /** How long a fault holds, ms. */
  holdMs: [number, number];
  clients: number;
  keys: number;
  /** Folder the history and faults are written to. */
  out: string;
}

/** What `_run.ts` prints last. */
export interface RunSummary {
  operations: number;
  faults: number;
  /** Errors of the workload it did not expect (bad params…): should be none. */
  unexpectedErrors: string[];
  /** Set when the nemesis could not bring the cluster back. */
  nemesisError?: string;
}

if (import.meta.main) {
  const request = JSON.parse(Deno.args[0]) as RunRequest;
  const network = ChaosNetwork.fromEnv();
  const log = (line: string) =>
    console.error(`${(performance.now() / 1000).toFixed(1)} ${line}`);
  const cluster = await ChaosCluster.start({
    network,
    size: request.size,
    // Every node's lines go to run.log too, with the time and its id.
    onOutput: (name, line) => log(`${name}: ${line}`),
  });
  let summary: RunSummary;
  try {
    const workload = new Workload({
      urls: cluster.urls,
      seed: request.seed,
      clients: request.clients,
      keys: request.keys,
    });
    await workload.start();
    const nemesis = new Nemesis(cluster, {
      seed: request.seed,
      kinds: request.kinds,
      intervalMs: request.intervalMs,
      holdMs: request.holdMs,
      durationMs: request.seconds * 1_000,
      onFault: (record, phase) =>
        log(
          `${phase} ${record.kind} ${record.detail}${
            record.error ? ` (error: ${record.error})` : ""
          }`,
        ),
    });
    let faults: FaultRecord[];
    let nemesisError: string | undefined;
    try {
      await nemesis.done();
      faults = await nemesis.stop();
    } catch (error) {
      faults = nemesis.faults;
      nemesisError = error instanceof Error ? error.message : String(error);
      log(`nemesis: ${nemesisError}`);
    }
    log(`faults done (${faults.length}); settling the history`);
    const history = await workload.stop();
    await Deno.writeTextFile(
      `${request.out}/history.json`,
      JSON.stringify(history),
    );
    await Deno.writeTextFile(
      `${request.out}/faults.json`,
      JSON.stringify(faults, null, 1),
    );
    summary = {
      operations: history.operations.length,
      faults: faults.length,
      unexpectedErrors: workload.unexpectedErrors.slice(0, 20),
      ...(nemesisError === undefined ? {} : { nemesisError }),
    };
  } finally {
    await cluster.stop();
  }
  console.log(JSON.stringify(summary));
}
