/**
 * `deno task bench:engines`: the registry API on its two engines side by
 * side, through the shipped client: a 3-node Rafter registry (Raft) and a
 * front over a 3-member etcd cluster (`--engine etcd`), both fsync on,
 * heartbeat 100 ms, election timeout 1000 ms. Rounds alternate A B A B;
 * each row is the median over the rounds of sequential bind, linearizable
 * lookup and watch delivery (bind until the watch's event arrives)
 * latencies, with the etcd/Raft ratio.
 *
 * ```sh
 * deno task bench:engines            # 3 rounds
 * deno task bench:engines --rounds 5
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { LocalCluster } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";
import { EtcdCluster, etcdFrontArgs, findEtcd } from "../testing/etcd.ts";
import { waitFor } from "../testing/time.ts";
import { connect, type RafterClient } from "../stub/client.ts";
import type { WatchEvent } from "../protocol/registry.ts";

const USAGE = `usage: deno task bench:engines [--rounds N] [--ops N]

  --rounds N   rounds, alternating the engines (default 3)
  --ops N      sequential binds and lookups per round (default 200; watch: 100 at most)`;
let parsed;
try {
  parsed = parseArgs({
    options: {
      rounds: { type: "string", default: "3" },
      ops: { type: "string", default: "200" },
      help: { type: "boolean", default: false },
    },
  });
} catch (error) {
  console.error(`error: ${(error as Error).message}\n${USAGE}`);
  Deno.exit(2);
}
const { values } = parsed;
if (values.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const ROUNDS = Number(values.rounds);
const OPS = Number(values.ops);
if (
  !Number.isInteger(ROUNDS) || ROUNDS < 1 || !Number.isInteger(OPS) || OPS < 1
) {
  console.error(`error: --rounds and --ops take positive integers\n${USAGE}`);
  Deno.exit(2);
}

const etcdBinary = await findEtcd((line) => console.error(line));
if ("skipped" in etcdBinary) {
  console.log(`bench/engines.ts: skipped: ${etcdBinary.skipped}`);
  Deno.exit(0);
}

function quantile(samples: number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

const median = (xs: number[]) => quantile(xs, 0.5);

/** One round on a registry at `urls`: p50 and p99 of each operation, ms. */
async function round(
  urls: string[],
  tag: string,
): Promise<Record<string, number[]>> {
  const client: RafterClient = connect(urls);
  const events: WatchEvent[] = [];
  try {
    const start = (await client.lookup(`bench/${tag}/none`)).revision;
    const watch = client.watch(
      `bench/${tag}/w`,
      { fromRevision: start + 1 },
      (u) => {
        if (u.kind === "events") events.push(...u.events);
      },
    );
    const bind: number[] = [];
    for (let i = 0; i < OPS; i++) {
      const t = performance.now();
      await client.bind(`bench/${tag}/b`, {
        id: `e${i}`,
        url: `tcp://127.0.0.1:${10_000 + i}`,
      });
      bind.push(performance.now() - t);
    }
    const lookup: number[] = [];
    for (let i = 0; i < OPS; i++) {
      const t = performance.now();
      await client.lookup(`bench/${tag}/b`);
      lookup.push(performance.now() - t);
    }
    const delivered: number[] = [];
    for (let i = 0; i < Math.min(OPS, 100); i++) {
      const seen = events.length;
      const t = performance.now();
      await client.bind(`bench/${tag}/w`, {
        id: `w${i}`,
        url: `tcp://127.0.0.1:${20_000 + i}`,
      });
      await waitFor(() => events.length > seen, "the watch event", 10_000, 0);
      delivered.push(performance.now() - t);
    }
    watch.close();
    return {
      bind: [quantile(bind, 0.5), quantile(bind, 0.99)],
      lookup: [quantile(lookup, 0.5), quantile(lookup, 0.99)],
      watch: [quantile(delivered, 0.5), quantile(delivered, 0.99)],
    };
  } finally {
    client.close();
  }
}

const raft = new LocalCluster({ // engine pinned: this compares the two
  engine: "raft",
  tickMs: 100,
  electionTicks: 10,
});
const etcd = new EtcdCluster(etcdBinary.path, {
  heartbeatMs: 100,
  electionMs: 1_000,
});
let front: Deno.ChildProcess | undefined;
try {
  await raft.startRegistryWithLeader(3);
  await etcd.start(3);
  const [port] = freePorts(1);
  front = new Deno.Command(Deno.execPath(), {
    args: etcdFrontArgs(etcd.clientUrls, `127.0.0.1:${port}`),
    stdout: "null",
    stderr: "null",
  }).spawn();
  const frontUrl = `tcp://127.0.0.1:${port}`;
  const probe = connect([frontUrl]);
  await waitFor(
    () => probe.lookup("x").then(() => true, () => false),
    "the front",
    30_000,
    100,
  );
  probe.close();
  const results: Record<string, Record<string, number[][]>> = {
    raft: {},
    etcd: {},
  };
  for (let r = 0; r < ROUNDS; r++) {
    for (
      const [engine, urls] of [["raft", raft.registryUrls], ["etcd", [
        frontUrl,
      ]]] as const
    ) {
      const got = await round([...urls], `${engine}${r}`);
      for (const [op, pair] of Object.entries(got)) {
        (results[engine][op] ??= []).push(pair);
      }
    }
  }
  console.log(
    `\n## Registry engines: Raft (3 Rafter nodes) vs a front over etcd ${etcdBinary.version} (3 members)\n`,
  );
  console.log(
    `${ROUNDS} rounds A B A B, ${OPS} sequential ops per round; medians over the rounds, ms\n`,
  );
  console.log(
    "| operation | Raft p50 | etcd p50 | etcd/Raft | Raft p99 | etcd p99 | etcd/Raft |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const op of ["bind", "lookup", "watch"]) {
    const p = (engine: string, i: number) =>
      median(results[engine][op].map((pair) => pair[i]));
    const row = [p("raft", 0), p("etcd", 0), p("raft", 1), p("etcd", 1)];
    console.log(
      `| ${
        op === "watch"
          ? "bind → watch event"
          : op === "lookup"
          ? "linearizable lookup"
          : "bind"
      } | ${row[0].toFixed(2)} | ${row[1].toFixed(2)} | ${
        (row[1] / row[0]).toFixed(2)
      }× | ${row[2].toFixed(2)} | ${row[3].toFixed(2)} | ${
        (row[3] / row[2]).toFixed(2)
      }× |`,
    );
  }
} finally {
  front?.kill("SIGTERM");
  await front?.status;
  await raft.stop();
  await etcd.stop();
}
