/**
 * Client memory per endpoint of a cluster map (private to `bench/`): a
 * 1-node registry with three names, one endpoint under `mem/one` and 10k
 * under `mem/shared` (one URL for all, as bench/scale.ts binds them) and
 * `mem/distinct` (a URL each; only the first one listens, and the stub's
 * `firstAvailable()` only calls it); a fresh `bench/_scale_client.ts`
 * process per name and round (3 alternating rounds) fills its map with one
 * call and reports its V8 heap and RSS after two collections. Prints the
 * medians and the extra bytes per endpoint over the 1-endpoint map.
 *
 * ```sh
 * deno run --config deno.dev.json -A bench/_map_memory.ts [--count 10000] [--rounds 3]
 * ```
 *
 * @module
 */

import { benchArgs } from "./_args.ts";
import { alternate, median } from "./report.ts";
import { LocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";

const USAGE =
  "usage: deno run -A bench/_map_memory.ts [--count N] [--rounds N]";
const values = benchArgs(USAGE, {
  // At most 40k: one port each from 20001.
  count: { type: "string", default: "10000" },
  rounds: { type: "string", default: "3" },
});
const count = Number(values.count);
const rounds = Number(values.rounds);

const cluster = new LocalCluster();
try {
  await cluster.startRegistry(1);
  await cluster.waitForLeader();
  const url = cluster.registryUrls[0];
  const writer = await dial(url);
  const bindAll = async (
    name: string,
    n: number,
    urlOf: (i: number) => string,
  ) => {
    for (let first = 0; first < n; first += 500) {
      const batch = Array.from(
        { length: Math.min(500, n - first) },
        (_, k) => ({
          method: "registry.bind",
          params: {
            name,
            endpoint: {
              id: `e${first + k}`,
              url: urlOf(first + k),
              attrs: { version: "1.0" },
              zone: `z${(first + k) % 3}`,
            },
          },
        }),
      );
      const answers = await writer.batch(batch, { timeoutMs: 60_000 });
      const failed = answers.find((a) => !a.ok);
      if (failed !== undefined) throw new Error(JSON.stringify(failed));
    }
  };
  await bindAll("mem/one", 1, () => url);
  await bindAll("mem/shared", count, () => url);
  // Ports 20001.. on 127.0.0.1: never dialed (firstAvailable calls e0).
  await bindAll(
    "mem/distinct",
    count,
    (i) => i === 0 ? url : `tcp://127.0.0.1:${20_000 + i}`,
  );
  writer.close();
  let runs = 0;
  const names = ["mem/one", "mem/shared", "mem/distinct"];
  const results = await alternate(rounds, names, async (name) => {
    const child = `client-${++runs}`;
    await cluster.spawn(child, "bench/_scale_client.ts", [
      "--registry",
      cluster.registryUrls.join(","),
      "--name",
      name,
      "--first-available",
    ]);
    const line = await cluster.waitForLine(child, /^result /, 60_000);
    await cluster.child(child).exited;
    return JSON.parse(line.slice("result ".length)) as {
      rssAfter: number;
      heapAfter: number;
      endpoints: number;
    };
  });
  const [one] = results;
  const heap1 = median(one.map((r) => r.heapAfter));
  const rss1 = median(one.map((r) => r.rssAfter));
  console.log(
    "\n| map | endpoints | V8 heap MiB | RSS MiB | heap B per endpoint | RSS B per endpoint |",
  );
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const [i, name] of names.entries()) {
    const heap = median(results[i].map((r) => r.heapAfter));
    const rss = median(results[i].map((r) => r.rssAfter));
    const n = results[i][0].endpoints;
    const per = (a: number, b: number) =>
      n > 1 ? (((a - b) * 2 ** 20) / (n - 1)).toFixed(0) : "—";
    console.log(
      `| ${name} | ${n} | ${heap.toFixed(2)} | ${rss.toFixed(1)} | ${
        per(heap, heap1)
      } | ${per(rss, rss1)} |`,
    );
  }
} finally {
  await cluster.stop();
}
