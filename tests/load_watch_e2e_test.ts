/**
 * End-to-end test of fresh load (issue 19): a load a server reports with
 * its keep-alives reaches a client's cluster map through its registry
 * watch, without a lookup, whether the watch is on the leader (which took
 * the keep-alive) or on a follower (which hears the load with the
 * leader's next heartbeat), on a 3-node registry of real processes.
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { waitFor } from "../testing/time.ts";
import { serve } from "../adapter/deno/serve.ts";
import { connect } from "../stub/client.ts";
import type { Distributor } from "../stub/distributors/distributor.ts";

Deno.test("a load change reaches a watching client on the leader and on a follower without a lookup", async () => {
  const cluster = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  const server = serve({
    hostname: "127.0.0.1",
    port: 0,
    methods: { hello: () => "hi" },
  });
  const clients: ReturnType<typeof connect>[] = [];
  try {
    await cluster.startRegistry(3);
    const leader = await cluster.waitForLeader();
    const serverClient = connect(cluster.registryUrls);
    clients.push(serverClient);
    let load = 1;
    const binding = await serverClient.bindServer("loadwatch", server, {
      id: "s1",
      ttlMs: 1_500, // a keep-alive every 500 ms
      load: () => load,
    });
    // Wait until the first report is in on every node (a follower hears
    // it with a later heartbeat of the leader; a lookup there shows it).
    for (const [id, url] of cluster.registry) {
      const probe = connect([url]);
      clients.push(probe);
      await waitFor(
        async () => (await probe.lookup("loadwatch")).endpoints[0]?.load === 1,
        `the first load report on ${id}`,
        10_000,
      );
    }
    const watchers = [...cluster.registry].map(([id, url]) => {
      const seen: (number | null)[] = [];
      const distributor: Distributor = {
        choose: (endpoints) => {
          seen.push(endpoints[0].load);
          return endpoints[0];
        },
      };
      const client = connect([url]);
      clients.push(client);
      let lookups = 0;
      const lookup = client.registry.lookup.bind(client.registry);
      client.registry.lookup = (...args) => {
        lookups++;
        return lookup(...args);
      };
      const stub = client.stub<{ hello(): string }>("loadwatch", {
        distributor,
      });
      return { id, client, stub, seen, lookups: () => lookups };
    });
    for (const w of watchers) {
      assert.equal(await w.stub.hello(), "hi");
      assert.deepEqual(w.seen, [1]);
      await waitFor(
        () => w.client.mapAge("loadwatch")?.watched === true,
        "the map's watch",
      );
    }
    // The watches are open (a watch event would now reach them): change
    // the load and call until each client's candidates show it.
    await new Promise((r) => setTimeout(r, 300));
    const changedAt = performance.now();
    load = 42;
    for (const w of watchers) {
      await waitFor(
        async () => {
          await w.stub.hello();
          return w.seen.at(-1) === 42;
        },
        `node ${w.id}'s watcher to see load 42`,
        10_000,
      );
      assert.equal(w.lookups(), 1, `${w.id}: one lookup, the first call's`);
      console.log(
        `measured: load 42 reached the watcher on ${w.id} (${
          w.id === leader ? "leader" : "follower"
        }) ${(performance.now() - changedAt).toFixed(0)} ms after the change`,
      );
    }
    await binding.close();
  } finally {
    for (const client of clients) client.close();
    await server.close();
    await cluster.stop();
  }
});
