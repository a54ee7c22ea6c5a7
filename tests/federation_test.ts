/**
 * Federated registry clusters on real processes: clusters `a` and `b` of
 * domain `acme`, each 3 registry nodes (its own consensus group), each
 * told of the other (`--domain`, `--cluster-name`, `--siblings`). A
 * service bound only in `b` is found from a client of `a` as `exec@b`,
 * and by a fail-over stub while `a` has none; with `b` cut off (its
 * nodes and server SIGSTOPped), `a`'s lookups and writes go on, `b`'s
 * endpoints are reported unreachable, and a server started in `a` takes
 * the fail-over stub's calls; after `b` is back, `exec@b` answers again.
 *
 * @module
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { connect } from "../stub/client.ts";
import type { WatchUpdate } from "../stub/registry_client/watch.ts";
import { waitFor } from "../testing/time.ts";

interface Exec {
  exec(callId: string): { server: string; callId: string };
}

Deno.test("federation: a service only in cluster b is found from a, by name@b and by fail-over; b cut off leaves a's lookups and writes alone and reports b unreachable; b back, it answers again", async () => {
  const a = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  const b = new LocalCluster({ tickMs: 50, electionTicks: 10 });
  let client: ReturnType<typeof connect> | undefined;
  const paused: string[] = [];
  try {
    a.planRegistry(3);
    b.planRegistry(3);
    const federation = (self: string, other: string, urls: string[]) => [
      "--domain",
      "acme",
      "--cluster-name",
      self,
      "--siblings",
      `${other}=${urls.join("|")}`,
    ];
    await Promise.all([
      ...[...a.registry.keys()].map((id) =>
        a.startNode(id, { args: federation("a", "b", b.registryUrls) })
      ),
      ...[...b.registry.keys()].map((id) =>
        b.startNode(id, { args: federation("b", "a", a.registryUrls) })
      ),
    ]);
    await Promise.all([a.waitForLeader(), b.waitForLeader()]);
    await b.startExecServer("x1", 2_000);

    client = connect(a.registryUrls);
    // The domain comes from a's registry.
    assert.deepEqual(await client.clusters(), { b: b.registryUrls });
    const status = await client.registry.status();
    assert.deepEqual(status.federation, {
      domain: "acme",
      cluster: "a",
      siblings: { b: b.registryUrls },
    });

    // A watch can name b too: exec@b is watched through b's registry
    // (listed first, then b's changes); a's own "exec" sees none of them.
    const watchedInB: string[] = [];
    const watchedInA: string[] = [];
    const describe = (update: WatchUpdate) =>
      update.kind === "reset"
        ? `reset ${
          update.names.flatMap((n) => (n.endpoints ?? []).map((e) => e.id))
            .join(",")
        }`
        : update.events.map((e) => `${e.type} ${e.name}/${e.endpoint.id}`)
          .join(",");
    const watchB = client.watch("exec@b", { list: true }, (update) => {
      watchedInB.push(describe(update));
    });
    const watchA = client.watch("exec", { list: true }, (update) => {
      watchedInA.push(describe(update));
    });
    await waitFor(
      () => watchedInB.length > 0 && watchedInA.length > 0,
      "both listings",
    );
    assert.deepEqual(watchedInB, ["reset x1"]);
    const bClient = connect(b.registryUrls);
    try {
      await bClient.bind("exec", { id: "x9", url: "tcp://127.0.0.1:9309" });
      await bClient.unbind("exec", "x9");
    } finally {
      bClient.close();
    }
    await waitFor(
      () => watchedInB.join(";").includes("delete exec/x9"),
      "b's changes through exec@b",
    );
    assert.deepEqual(watchedInB, ["reset x1", "put exec/x9", "delete exec/x9"]);
    assert.deepEqual(watchedInA, ["reset "]);
    watchB.close();
    watchA.close();
    console.log(`measured: watch exec@b from a saw ${watchedInB.join("; ")}`);

    // Named: exec@b is b's "exec".
    const inB = client.stub<Exec>("exec@b", { idempotent: true });
    assert.equal((await inB.exec("c1")).server, "x1");
    // A lookup, and the CLI's, of exec@b: b's registry answers.
    assert.deepEqual(
      (await client.lookup("exec@b")).endpoints.map((e) => e.id),
      ["x1"],
    );
    const cli = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "cli/main.ts",
        "--registry",
        a.registryUrls.join(","),
        "lookup",
        "exec@b",
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(cli.code, 0, new TextDecoder().decode(cli.stderr));
    assert.match(new TextDecoder().decode(cli.stdout), /^x1\s/m);
    // Fail-over: a has no "exec", so b's.
    const anywhere = client.stub<Exec>("exec", {
      failover: true,
      idempotent: true,
    });
    assert.equal((await anywhere.exec("c2")).server, "x1");
    // exec@a is a's own "exec" (none).
    await assert.rejects(
      client.stub<Exec>("exec@a").exec("c3"),
      /nothing is bound under "exec@a"/,
    );

    // b cut off: its nodes and its server stop answering.
    for (const id of [...b.registry.keys(), "x1"]) {
      b.pause(id);
      paused.push(id);
    }
    const started = performance.now();
    await client.bind("local", { id: "l1", url: "tcp://127.0.0.1:9" });
    const found = await client.lookup("local");
    const localMs = performance.now() - started;
    assert.deepEqual(found.endpoints.map((e) => e.id), ["l1"]);
    // b's endpoints: unreachable.
    await assert.rejects(
      inB.$with({ deadlineMs: 1_500 }).exec("c4"),
      (error: Error) =>
        /x1|127\.0\.0\.1/.test(error.message) &&
        /no answer|did not get an answer|Deadline/.test(error.message),
    );
    // A lookup of b's name says it was b's registry that did not answer.
    await assert.rejects(
      client.lookup("exec@b", { deadlineMs: 1_500 }),
      /in sibling cluster b, whose registry/,
    );
    const states = client.endpointStates("exec@b");
    assert.ok(
      states.some((s) => s.id === "x1" && s.state !== "serving"),
      JSON.stringify(states),
    );
    // A server in a takes the fail-over stub's calls.
    await a.startExecServer("a1", 2_000);
    await waitFor(
      async () => (await anywhere.exec("c5")).server === "a1",
      "the fail-over stub to use a1",
      20_000,
    );
    console.log(
      `measured: with b cut off, a bound and looked up in ${
        localMs.toFixed(0)
      } ms; exec@b reported ${states.find((s) => s.id === "x1")?.state} (${
        states.find((s) => s.id === "x1")?.reason
      })`,
    );

    // b back.
    for (const id of paused.splice(0)) b.resume(id);
    await waitFor(
      async () =>
        (await inB.$with({ deadlineMs: 2_000 }).exec("c6").catch(() => null))
          ?.server === "x1",
      "exec@b to answer again",
      30_000,
    );
  } finally {
    for (const id of paused) b.resume(id);
    client?.close();
    await Promise.all([a.stop(), b.stop()]);
  }
});
