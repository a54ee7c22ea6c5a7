/**
 * Rejoin after a partition (issue 17): a 3-node registry in a chaos
 * network (`tests/chaos/netns.ts`: network namespaces and iptables inside
 * them, as root), a light writer binding meanwhile; one follower is cut
 * off every other node (not from the client) for each partition length,
 * then healed. Prints, per length, how long after the heal that node's
 * `registry.status` names the current leader (the one leading in the
 * highest term), and how long until its commit index reaches the
 * leader's (read just before). Issue 17's measurement before the fix:
 * 4.4 s after 10 s, 26.2 s after 30 s; the target is within 3 s.
 *
 * A script, not a test: it asserts nothing about speed.
 *
 * ```sh
 * deno task bench:rejoin                               # as root: 10 s and 30 s partitions
 * deno task bench:rejoin --seconds 3,10,30 --rounds 2
 * ```
 *
 * It runs itself again inside the network's client namespace (the host
 * has no route to the nodes); the network is removed at the end, and on
 * Ctrl-C.
 *
 * @module
 */

import { benchArgs, usageError } from "./_args.ts";
import {
  CHAOS_NET_ENV,
  ChaosNetwork,
  chaosNetworkSupport,
  createChaosNetwork,
} from "../tests/chaos/netns.ts";
import { ChaosCluster } from "../tests/chaos/cluster.ts";
import { connect } from "../mod.ts";

const USAGE = `usage: deno task bench:rejoin [options]   (as root)

  --seconds LIST   partition lengths, seconds, comma-separated (default 10,30)
  --rounds N       partitions of each length (default 1)
  --tick-ms N      the nodes' Raft tick (default 50)
  --election-ticks N
                   their election timeout in ticks (default 10)
  --limit-s N      give up waiting for a node after N s (default 60)`;

const values = benchArgs(USAGE, {
  seconds: { type: "string", default: "10,30" },
  rounds: { type: "string", default: "1" },
  "tick-ms": { type: "string", default: "50" },
  "election-ticks": { type: "string", default: "10" },
  "limit-s": { type: "string", default: "60" },
});
const lengths = String(values.seconds).split(",").map(Number);
const rounds = Number(values.rounds);
const tickMs = Number(values["tick-ms"]);
const electionTicks = Number(values["election-ticks"]);
const limitMs = Number(values["limit-s"]) * 1_000;
if (lengths.some((s) => !(s > 0))) {
  usageError(`--seconds ${values.seconds}: give positive numbers`, USAGE);
}
if (!Number.isInteger(rounds) || rounds < 1) {
  usageError(`--rounds ${values.rounds}: give a whole number >= 1`, USAGE);
}
if (!(tickMs > 0)) {
  usageError(`--tick-ms ${values["tick-ms"]}: give a positive number`, USAGE);
}
if (!(electionTicks >= 2)) {
  usageError(
    `--election-ticks ${values["election-ticks"]}: give 2 or more`,
    USAGE,
  );
}
if (!(limitMs > 0)) {
  usageError(`--limit-s ${values["limit-s"]}: give a positive number`, USAGE);
}

/** One partition's figures. */
interface Row {
  seconds: number;
  node: string;
  /** ms after the heal until the node names the current leader; null if never within the limit. */
  leaderMs: number | null;
  /** ms after the heal until its commit index reaches the leader's. */
  caughtUpMs: number | null;
  /** Whether leadership changed over the partition and heal. */
  leaderChanged: boolean;
}

if (Deno.env.get(CHAOS_NET_ENV) === undefined) {
  await host();
} else {
  await driver();
}

/** On the host: makes the network, runs the driver inside it, prints its table. */
async function host(): Promise<void> {
  const support = await chaosNetworkSupport();
  if (!support.ok) {
    console.error(`bench/rejoin.ts: ${support.reason}`);
    Deno.exit(1);
  }
  const network = await createChaosNetwork({ nodes: ["n1", "n2", "n3"] });
  try {
    const out = await network.clientCommand(
      new URL(import.meta.url),
      Deno.args,
      { stdout: "inherit", stderr: "inherit" },
    ).output();
    if (out.code !== 0) {
      console.error(`bench/rejoin.ts: the driver exited with ${out.code}`);
    }
  } finally {
    await network.destroy();
  }
}

/** Inside the client namespace: the cluster, the writer, the partitions. */
async function driver(): Promise<void> {
  const network = ChaosNetwork.fromEnv();
  const cluster = await ChaosCluster.start({
    network,
    tickMs,
    electionTicks,
  });
  const client = connect(cluster.urls, { deadlineMs: 10_000 });
  let writing = true;
  let binds = 0;
  const writer = (async () => {
    for (let n = 0; writing; n++) {
      await client.bind("rejoin", {
        id: `e${n % 500}`,
        url: `tcp://10.0.0.1:${1000 + n % 500}`,
      }).then(() => binds++, () => {});
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const rows: Row[] = [];
  try {
    for (const seconds of lengths) {
      for (let round = 0; round < rounds; round++) {
        const row = await measure(network, cluster, seconds);
        rows.push(row);
        console.error(
          `${seconds} s partition of ${row.node}: knew the leader ${
            fmt(row.leaderMs)
          } and caught up ${fmt(row.caughtUpMs)} after the heal`,
        );
      }
    }
  } finally {
    writing = false;
    await writer;
    client.close();
    await cluster.stop();
  }
  console.log(
    [
      `rejoin after a partition: 3 nodes in network namespaces, tick ${tickMs} ms, election timeout ${
        tickMs * electionTicks
      } ms, a bind every 20 ms (${binds} acknowledged); a follower cut off every other node by iptables, then healed. Times after the heal; "-" = not within ${
        limitMs / 1000
      } s.`,
      "",
      "Issue 17's target: within 3 s of the heal, whatever the partition's length (before its fixes: 4.4 s after 10 s, 26.2 s after 30 s).",
      "",
      "| partition | node | knows the leader | caught up | leader changed |",
      "|---:|---|---:|---:|---|",
      ...rows.map((r) =>
        `| ${r.seconds} s | ${r.node} | ${fmt(r.leaderMs)} | ${
          fmt(r.caughtUpMs)
        } | ${r.leaderChanged ? "yes" : "no"} |`
      ),
    ].join("\n"),
  );
}

function fmt(ms: number | null): string {
  return ms === null ? "-" : `${(ms / 1000).toFixed(2)} s`;
}

/** Isolates a follower for `seconds`, heals, and times its rejoin. */
async function measure(
  network: ChaosNetwork,
  cluster: ChaosCluster,
  seconds: number,
): Promise<Row> {
  const before = await cluster.waitHealthy(30_000);
  const node = cluster.ids.find((id) => id !== before)!;
  await network.isolate(node);
  await new Promise((r) => setTimeout(r, seconds * 1_000));
  await network.heal();
  const healedAt = performance.now();
  let leaderMs: number | null = null;
  let caughtUpMs: number | null = null;
  let leader: string | null = null;
  while (performance.now() - healedAt < limitMs && caughtUpMs === null) {
    // The leader's view first, then the node's: under writes the
    // leader's commit index moves on while the node is asked.
    leader = await cluster.leader(1_000);
    const leaderStatus = leader === null
      ? null
      : await cluster.status(leader, 1_000);
    const own = await cluster.status(node, 1_000);
    const now = performance.now() - healedAt;
    if (
      leaderStatus?.role === "leader" && own !== null &&
      own.leader === leader && own.term === leaderStatus.term
    ) {
      leaderMs ??= now;
      if (own.commitIndex >= leaderStatus.commitIndex) caughtUpMs = now;
    }
    if (caughtUpMs === null) await new Promise((r) => setTimeout(r, 25));
  }
  return {
    seconds,
    node,
    leaderMs,
    caughtUpMs,
    leaderChanged: leader !== before,
  };
}
