/**
 * Federation under a real partition, run by `federation_e2e_test.ts`
 * inside the client namespace of a chaos network of 6 nodes: cluster `a`
 * on n1–n3, cluster `b` on n4–n6 (each its own 3-node registry, told of
 * the other), an exec server bound only in `b` (in n4's namespace). A
 * client of `a` finds it as `exec@b` and through a fail-over stub; then
 * `b` is partitioned away (from `a`'s nodes and from the client): `a`'s
 * writes and lookups go on, `exec@b` is reported unreachable, a server
 * started in `a` takes the fail-over stub's calls; healed, `exec@b`
 * answers again. Prints `result {…}`; exits 0 when every step held.
 *
 * @module
 */

import { LocalCluster } from "../../testing/cluster.ts";
import { connect } from "../../stub/client.ts";
import { waitFor } from "../../testing/time.ts";
import { ChaosNetwork } from "./netns.ts";

interface Exec {
  exec(callId: string): { server: string; callId: string };
}

const network = ChaosNetwork.fromEnv();
/** Cluster → its registry node ids and servers → the network node each runs in. */
const placement: Record<string, Record<string, string>> = {
  a: { n1: "n1", n2: "n2", n3: "n3", a1: "n1" },
  b: { n1: "n4", n2: "n5", n3: "n6", x1: "n4" },
};
const log: string[] = [];
const make = (cluster: string) =>
  new LocalCluster({
    tickMs: 50,
    electionTicks: 10,
    wrapperOf: (name) => network.execIn(placement[cluster][name]),
    hostOf: (id) => network.addressOf(placement[cluster][id]),
    onOutput: (name, line) => log.push(`${cluster}/${name}: ${line}`),
  });
const a = make("a");
const b = make("b");
const steps: Record<string, unknown> = {};
let code = 1;
let client: ReturnType<typeof connect> | undefined;
try {
  a.planRegistry(3);
  b.planRegistry(3);
  const args = (self: string, other: string, urls: string[]) => [
    "--insecure",
    "--domain",
    "acme",
    "--cluster-name",
    self,
    "--siblings",
    `${other}=${urls.join("|")}`,
  ];
  await Promise.all([
    ...["n1", "n2", "n3"].map((id) =>
      a.startNode(id, { args: args("a", "b", b.registryUrls) })
    ),
    ...["n1", "n2", "n3"].map((id) =>
      b.startNode(id, { args: args("b", "a", a.registryUrls) })
    ),
  ]);
  await Promise.all([a.waitForLeader(), b.waitForLeader()]);
  await b.startExecServer("x1", 2_000, ["--host", network.addressOf("n4")]);

  client = connect(a.registryUrls);
  const inB = client.stub<Exec>("exec@b", { idempotent: true });
  const anywhere = client.stub<Exec>("exec", {
    failover: true,
    idempotent: true,
  });
  steps.named = (await inB.exec("c1")).server;
  steps.failover = (await anywhere.exec("c2")).server;

  // b partitioned away: from a's nodes and from the client.
  await network.partition([["n1", "n2", "n3"], ["n4", "n5", "n6"]]);
  for (const id of ["n4", "n5", "n6"]) await network.cutClient(id);
  const started = performance.now();
  await client.bind("local", {
    id: "l1",
    url: `tcp://${network.addressOf("n1")}:9`,
  });
  steps.localLookup = (await client.lookup("local")).endpoints.map((e) => e.id);
  steps.localWriteAndLookupMs = Math.round(performance.now() - started);
  steps.named_cutOff = await inB.$with({ deadlineMs: 1_500 }).exec("c3").then(
    (r) => `answered by ${r.server}`,
    (e: Error) => `failed: ${e.message.slice(0, 160)}`,
  );
  const x1 = client.endpointStates("exec@b").find((s) => s.id === "x1");
  steps.reported = x1 === undefined ? "absent" : `${x1.state} (${x1.reason})`;
  await a.startExecServer("a1", 2_000, ["--host", network.addressOf("n1")]);
  await waitFor(
    async () => (await anywhere.exec("c4")).server === "a1",
    "the fail-over stub to use a1",
    20_000,
  );
  steps.failover_cutOff = "a1";

  await network.heal();
  await waitFor(
    async () =>
      (await inB.$with({ deadlineMs: 2_000 }).exec("c5").catch(() => null))
        ?.server === "x1",
    "exec@b to answer again",
    30_000,
  );
  steps.named_healed = "x1";
  const ok = steps.named === "x1" && steps.failover === "x1" &&
    JSON.stringify(steps.localLookup) === '["l1"]' &&
    String(steps.named_cutOff).startsWith("failed") &&
    x1 !== undefined && x1.state !== "serving";
  code = ok ? 0 : 1;
} catch (error) {
  steps.error = (error as Error).stack;
} finally {
  console.log(`result ${JSON.stringify(steps)}`);
  if (code !== 0) console.log(log.slice(-150).join("\n"));
  client?.close();
  await network.heal().catch(() => {});
  await Promise.all([a.stop(), b.stop()]).catch(() => {});
}
Deno.exit(code);
