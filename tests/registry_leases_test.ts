/**
 * End-to-end tests of leases, watches and health checks on a 3-node
 * registry of real `deno run` processes on 127.0.0.1: servers killed with
 * SIGKILL leave every node's lookups within their TTL, leases outlive a
 * leader kill, watchers see each change exactly once, health checks catch
 * a stopped process, and self-binding servers bind again after the whole
 * registry restarts.
 *
 * Every test prints the figures it measured (prefixed "measured:").
 */

import assert from "node:assert/strict";
import { LocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import { RpcError } from "../rpc/errors.ts";
import type { Params } from "../rpc/message.ts";
import { waitFor } from "../testing/time.ts";
import { onlyOn, testEngine } from "../testing/engine.ts";
import {
  COMPACTED,
  type CompactedData,
  type LookupResult,
  WATCH_EVENTS_NOTIFICATION,
  type WatchEvent,
  type WatchEventsNotification,
} from "../protocol/registry.ts";
import { connect } from "../stub/client.ts";
import type { WatchUpdate } from "../stub/registry_client/watch.ts";

/** Raft tick of the test clusters, ms (heartbeat = 1 tick). */
const TICK_MS = 50;
/** Election timeout of the test clusters, in ticks (randomized up to twice it). */
const ELECTION_TICKS = 10;
const ELECTION_TIMEOUT_MS = TICK_MS * ELECTION_TICKS;
/** The engine under test (`deno task test:etcd` runs this file on etcd). */
const ENGINE = testEngine();
/**
 * How late etcd may expire a lease past its TTL, beyond a Rafter
 * registry's heartbeat: it rounds TTLs up to whole seconds, and its
 * leader looks for expired leases every 500 ms (etcd's lessor).
 */
function etcdTtlMs(ttlMs: number): number {
  return Math.ceil(ttlMs / 1000) * 1000 + 500;
}

/**
 * Compacts the etcd cluster behind the front at `url` to `revision`
 * (etcd keeps revisions from `revision` on), through etcd's JSON gateway.
 */
async function compactEtcd(url: string, revision: number): Promise<void> {
  const connection = await dial(url);
  let endpoints: string[];
  try {
    const status = await connection.call<{ engine: { endpoints: string[] } }>(
      "registry.status",
    );
    endpoints = status.engine.endpoints;
  } finally {
    connection.close();
  }
  // Through any member that answers (the test may have killed one).
  const failures: string[] = [];
  for (const etcdUrl of endpoints) {
    try {
      const response = await fetch(`${etcdUrl}/v3/kv/compaction`, {
        method: "POST",
        body: JSON.stringify({ revision: String(revision), physical: true }),
        signal: AbortSignal.timeout(5_000),
      });
      const text = await response.text();
      if (response.ok) return;
      failures.push(`${etcdUrl}: ${response.status} ${text}`);
    } catch (error) {
      failures.push(`${etcdUrl}: ${(error as Error).message}`);
    }
  }
  throw new Error(`no etcd member compacted: ${failures.join("; ")}`);
}

/** A connection to one node that records the events of one watch. */
async function watchOn(url: string, prefix: string, fromRevision?: number) {
  const events: { event: WatchEvent; at: number }[] = [];
  const connection: RpcConnection = await dial(url, {
    onNotification: (method: string, params: Params | undefined) => {
      if (method !== WATCH_EVENTS_NOTIFICATION) return;
      const update = params as unknown as WatchEventsNotification;
      const at = Date.now();
      for (const event of update.events) events.push({ event, at });
    },
  });
  await connection.call("registry.watch", { prefix, fromRevision });
  return { connection, events };
}

async function lookupOn(
  url: string,
  name: string,
  options: Record<string, unknown> = {},
): Promise<LookupResult> {
  const connection = await dial(url, { connectTimeoutMs: 1000 });
  try {
    return await connection.call<LookupResult>("registry.lookup", {
      name,
      consistency: "serializable",
      rotate: false,
      ...options,
    }, { timeoutMs: 2000 });
  } finally {
    connection.close();
  }
}

function newCluster(nodeArgs: string[] = []): LocalCluster {
  return new LocalCluster({
    tickMs: TICK_MS,
    electionTicks: ELECTION_TICKS,
    nodeArgs,
  });
}

Deno.test("a server killed with SIGKILL leaves the lookups of every node within TTL + one heartbeat, and each of 3 watchers on different nodes sees one delete for it", async () => {
  const ttlMs = 1500;
  const cluster = newCluster();
  const watchers: Awaited<ReturnType<typeof watchOn>>[] = [];
  try {
    await cluster.startRegistryWithLeader(3);
    await cluster.startHello("hello-1", [
      "--ttl-ms",
      String(ttlMs),
      "--log-keepalives",
    ]);
    await cluster.startHello("hello-2", ["--ttl-ms", String(ttlMs)]);
    // Watch from the revision after both binds, wherever each node is.
    const { revision } = await lookupOn(cluster.registryUrls[0], "hello", {
      consistency: "linearizable",
    });
    for (const url of cluster.registryUrls) {
      watchers.push(await watchOn(url, "hello", revision + 1));
    }
    for (const url of cluster.registryUrls) {
      await waitFor(
        async () =>
          (await lookupOn(url, "hello")).endpoints.map((e) => e.id).sort()
            .join() === "hello-1,hello-2",
        `both servers on ${url}`,
      );
    }
    // Let a few keep-alives go by, then kill hello-1 without warning, at a
    // random point between two keep-alives.
    await new Promise((r) => setTimeout(r, ttlMs + Math.random() * 500));
    const killedAt = Date.now();
    await cluster.kill("hello-1", "SIGKILL");
    const lastAck = Math.max(
      ...cluster.child("hello-1").output.flatMap((line) => {
        const match = /keep-alive acknowledged at (\d+)/.exec(line);
        return match === null ? [] : [Number(match[1])];
      }),
    );
    const goneAt: number[] = [];
    await Promise.all(cluster.registryUrls.map(async (url) => {
      await waitFor(
        async () =>
          !(await lookupOn(url, "hello")).endpoints.some((e) =>
            e.id === "hello-1"
          ),
        `hello-1 to leave ${url}`,
        ttlMs + 5_000,
        20,
      );
      goneAt.push(Date.now());
    }));
    // Gone within TTL + one heartbeat of its last acknowledged keep-alive
    // (plus the expiry's commit, and polling every 20 ms).
    const bound = ENGINE === "etcd"
      ? etcdTtlMs(ttlMs) + 250
      : ttlMs + TICK_MS + 250;
    const sinceAck = goneAt.map((at) => at - lastAck).sort((a, b) => a - b);
    console.log(
      `measured: hello-1 left the lookups of the 3 nodes ${
        sinceAck.join(", ")
      } ms after its last acknowledged keep-alive (${
        killedAt - lastAck
      } ms before its SIGKILL; TTL ${ttlMs} ms, bound ${bound} ms, ${ENGINE})`,
    );
    for (const ms of sinceAck) {
      assert.ok(ms <= bound, `gone after ${ms} ms > ${bound} ms`);
      assert.ok(ms >= ttlMs - TICK_MS, `gone too soon: ${ms} ms`);
    }
    // Every watcher saw exactly one delete for hello-1, because its lease
    // expired, and nothing about hello-2, which is untouched.
    await waitFor(
      () => watchers.every((w) => w.events.length >= 1),
      "every watcher's event",
    );
    await new Promise((r) => setTimeout(r, 300));
    for (const watcher of watchers) {
      const forHello1 = watcher.events.filter((e) =>
        e.event.endpoint.id === "hello-1"
      );
      assert.equal(forHello1.length, 1, JSON.stringify(watcher.events));
      assert.equal(forHello1[0].event.type, "delete");
      assert.equal(forHello1[0].event.reason, "leaseExpired");
      assert.equal(
        watcher.events.filter((e) => e.event.endpoint.id === "hello-2").length,
        0,
        JSON.stringify(watcher.events),
      );
    }
    // The same revision on every node.
    const revisions = new Set(
      watchers.map((w) => w.events[0].event.revision),
    );
    assert.equal(revisions.size, 1);
  } finally {
    for (const watcher of watchers) watcher.connection.close();
    await cluster.stop();
  }
});

Deno.test("the leader killed with SIGKILL while 20 leases are kept alive: none expires; a lease whose server was killed 1 s before expires within TTL + an election timeout + a heartbeat of its last keep-alive", async () => {
  const ttlMs = 2000;
  const cluster = newCluster();
  let keeper: ReturnType<typeof connect> | null = null;
  let observer: ReturnType<typeof connect> | null = null;
  try {
    await cluster.startRegistryWithLeader(3);
    keeper = connect(cluster.registryUrls);
    observer = connect(cluster.registryUrls);
    // 20 leases kept alive by this process, each with one binding.
    const troubles: string[] = [];
    const bindings = await Promise.all(
      Array.from(
        { length: 20 },
        (_, i) =>
          keeper!.bindServer("kept", `tcp://127.0.0.1:${20_000 + i}`, {
            id: `kept-${i}`,
            ttlMs,
            onEvent: (event) => {
              if (event.type === "rebound") troubles.push(`kept-${i} rebound`);
            },
          }),
      ),
    );
    // One real server that logs each acknowledged keep-alive.
    await cluster.startHello("doomed", [
      "--name",
      "kept",
      "--ttl-ms",
      String(ttlMs),
      "--log-keepalives",
    ]);
    const deletes: { event: WatchEvent; at: number }[] = [];
    const watch = observer.watch("kept", {}, (update: WatchUpdate) => {
      if (update.kind !== "events") return;
      for (const event of update.events) {
        if (event.type === "delete") deletes.push({ event, at: Date.now() });
      }
    });
    await waitFor(
      () =>
        cluster.child("doomed").output.some((l) =>
          /keep-alive acknowledged/.test(l)
        ),
      "the doomed server's first keep-alive",
      ttlMs * 2,
    );
    await new Promise((r) => setTimeout(r, 200));
    await cluster.kill("doomed", "SIGKILL");
    const lastAck = Math.max(
      ...cluster.child("doomed").output.flatMap((line) => {
        const match = /keep-alive acknowledged at (\d+)/.exec(line);
        return match === null ? [] : [Number(match[1])];
      }),
    );
    await new Promise((r) => setTimeout(r, 1000));
    const leader = await cluster.waitForLeader();
    const leaderKilledAt = Date.now();
    await cluster.kill(leader, "SIGKILL");
    const newLeader = await cluster.waitForLeader(10_000);
    const electedAfter = Date.now() - leaderKilledAt;
    await waitFor(
      () => deletes.some((d) => d.event.endpoint.id === "doomed"),
      "the doomed server's lease to expire",
      ttlMs * 3 + 5_000,
    );
    const doomed = deletes.find((d) => d.event.endpoint.id === "doomed")!;
    assert.equal(doomed.event.reason, "leaseExpired");
    // The new leader starts from the renewal times the old one reported: the
    // only extra time is the leaderless gap, at most one (randomized)
    // election timeout, plus one heartbeat of lag in those reports.
    // One election timeout is at most twice the base (randomized); an
    // election that takes more than one round (a split vote) leaves the
    // cluster longer without a leader, and that time is not counted either:
    // no server could renew meanwhile.
    const maxElectionMs = Math.max(2 * ELECTION_TIMEOUT_MS, electedAfter);
    // etcd's new leader gives every lease a whole TTL again, plus an
    // election timeout, from its election (etcd's lessor Promote): the
    // lease of a server killed before the leader lives until then (this
    // test measures the difference).
    const bound = ENGINE === "etcd"
      ? leaderKilledAt - lastAck + electedAfter + etcdTtlMs(ttlMs) +
        ELECTION_TIMEOUT_MS + 300
      : ttlMs + maxElectionMs + TICK_MS + 300;
    const took = doomed.at - lastAck;
    console.log(
      `measured: leader ${leader} killed, ${newLeader} led ${electedAfter} ms later; the killed server's lease expired ${took} ms after its last acknowledged keep-alive (TTL ${ttlMs} ms; ${
        ENGINE === "etcd"
          ? `on etcd, bound: the leader's kill + its election + a whole TTL + an election timeout + 800 ms = ${bound} ms`
          : `bound TTL + ${maxElectionMs} ms election + ${TICK_MS} ms heartbeat + 300 ms = ${bound} ms; etcd would wait up to a whole TTL after the election`
      })`,
    );
    assert.ok(took <= bound, `expired ${took} ms after its last keep-alive`);
    assert.ok(took >= ttlMs - 100, `expired too soon: ${took} ms`);
    // The 20 kept leases outlive the fail-over: wait two more TTLs.
    await new Promise((r) => setTimeout(r, 2 * ttlMs));
    assert.deepEqual(
      deletes.filter((d) => d.event.endpoint.id.startsWith("kept-")),
      [],
    );
    assert.deepEqual(troubles, []);
    for (const id of cluster.registry.keys()) {
      if (id === leader) continue;
      const found = await lookupOn(cluster.registry.get(id)!, "kept");
      assert.equal(found.endpoints.length, 20, `on ${id}`);
    }
    for (const binding of bindings) {
      assert.ok(binding.leaseId !== "");
    }
    watch.close();
    await Promise.all(bindings.map((b) => b.close()));
  } finally {
    keeper?.close();
    observer?.close();
    await cluster.stop();
  }
});

Deno.test("a watcher whose node is killed resumes through another node with no gap and no duplicate; a compacted revision gets COMPACTED and the client recovers by re-listing", async () => {
  // A Raft registry keeps the last 50 events; etcd keeps what it was not
  // told to compact (this test compacts it below).
  const cluster = newCluster(
    ENGINE === "raft" ? ["--history-events", "50"] : [],
  );
  let writer: ReturnType<typeof connect> | null = null;
  let reader: ReturnType<typeof connect> | null = null;
  try {
    await cluster.startRegistryWithLeader(3);
    writer = connect(cluster.registryUrls);
    reader = connect(cluster.registryUrls);
    const seen: number[] = [];
    const resets: number[] = [];
    reader.watch("", { fromRevision: 1 }, (update) => {
      if (update.kind === "reset") resets.push(update.revision);
      else for (const event of update.events) seen.push(event.revision);
    });
    let written = 0;
    // The revision of each bind (1, 2, 3… on Raft; etcd's revisions also
    // count its other keys, e.g. the health-check election's).
    const revisions: number[] = [];
    const write = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const result = await writer!.bind("svc", {
          id: `s${revisions.length}`,
          url: `tcp://127.0.0.1:${21_000 + (revisions.length % 1000)}`,
        });
        written = result.revision;
        revisions.push(written);
      }
    };
    await write(30);
    await waitFor(() => seen.length === 30, "30 events", 5_000);
    const watchedNode = reader.watches.url;
    assert.ok(watchedNode !== null);
    const victim = [...cluster.registry].find(([, url]) =>
      url === watchedNode
    )![0];
    // Kill the watcher's node while writes go on.
    const writing = write(40);
    await new Promise((r) => setTimeout(r, 100));
    await cluster.kill(victim, "SIGKILL");
    await writing;
    await waitFor(
      () => seen.length >= revisions.length,
      `${revisions.length} events`,
      10_000,
    );
    const resumedOn = await waitFor(() => reader!.watches.url, "a watch node");
    assert.notEqual(resumedOn, watchedNode);
    assert.deepEqual(seen, revisions);
    if (ENGINE === "raft") {
      assert.deepEqual(seen, Array.from({ length: written }, (_, i) => i + 1));
    }
    assert.deepEqual(resets, []);
    console.log(
      `measured: watcher on ${victim} (killed) resumed through ${resumedOn}; the ${revisions.length} revisions ${
        revisions[0]
      }..${written} of the binds each seen once, in order (${ENGINE})`,
    );
    // The history holds the last 50 events only.
    const survivor = cluster.registryUrls.find((url) => url !== watchedNode)!;
    await waitFor(
      async () => (await lookupOn(survivor, "svc")).revision >= written,
      "the survivor to apply every write",
    );
    const oldest = revisions.at(-50)!;
    if (ENGINE === "etcd") await compactEtcd(survivor, oldest);
    const connection = await dial(survivor);
    try {
      await assert.rejects(
        connection.call("registry.watch", { prefix: "", fromRevision: 1 }),
        (error: unknown) => {
          assert.ok(error instanceof RpcError);
          assert.equal(error.code, COMPACTED);
          const data = error.data as CompactedData;
          if (ENGINE === "raft") assert.equal(data.revision, written);
          else assert.ok(data.revision >= written, JSON.stringify(data));
          assert.equal(data.compactRevision, oldest);
          if (ENGINE === "raft") assert.equal(oldest, written - 49);
          return true;
        },
      );
    } finally {
      connection.close();
    }
    // A client watch from revision 1 re-lists and carries on.
    const late: WatchUpdate[] = [];
    reader.watch("svc", { fromRevision: 1 }, (update) => late.push(update));
    await waitFor(() => late.length > 0, "the late watcher's reset");
    assert.equal(late[0].kind, "reset");
    const reset = late[0] as Extract<WatchUpdate, { kind: "reset" }>;
    if (ENGINE === "raft") assert.equal(reset.revision, written);
    else assert.ok(reset.revision >= written);
    assert.equal(reset.names[0].endpoints?.length, revisions.length);
    await write(1);
    await waitFor(() => late.length > 1, "the event after the reset");
    assert.deepEqual(
      (late[1] as Extract<WatchUpdate, { kind: "events" }>).events.map((e) =>
        e.revision
      ),
      [written],
    );
  } finally {
    writer?.close();
    reader?.close();
    await cluster.stop();
  }
});

Deno.test("a watcher whose node is stopped with SIGSTOP moves to another node within a ping interval and misses nothing", async () => {
  const cluster = newCluster();
  let writer: ReturnType<typeof connect> | null = null;
  let reader: ReturnType<typeof connect> | null = null;
  try {
    await cluster.startRegistryWithLeader(3);
    writer = connect(cluster.registryUrls);
    reader = connect(cluster.registryUrls);
    const seen: number[] = [];
    reader.watch("", { fromRevision: 1 }, (update) => {
      if (update.kind === "events") {
        for (const event of update.events) seen.push(event.revision);
      }
    });
    const revisions: number[] = [];
    const write = async () => {
      revisions.push(
        (await writer!.bind("p", {
          id: `p${revisions.length}`,
          url: `tcp://127.0.0.1:${24_000 + revisions.length}`,
        })).revision,
      );
    };
    for (let i = 0; i < 5; i++) await write();
    await waitFor(() => seen.length === 5, "5 events");
    const frozenUrl = reader.watches.url!;
    const frozen = [...cluster.registry].find(([, url]) =>
      url === frozenUrl
    )![0];
    cluster.pause(frozen);
    const pausedAt = Date.now();
    // Writes go on through the others (a new leader if it led).
    for (let i = 0; i < 5; i++) await write();
    // (On etcd a front's watch stream may sit on the frozen member: it
    // notices by gRPC pings, every 10 s, then resumes on another.)
    await waitFor(
      () => seen.length === revisions.length,
      `${revisions.length} events`,
      ENGINE === "etcd" ? 20_000 : 10_000,
    );
    const movedAfter = Date.now() - pausedAt;
    assert.deepEqual(seen, revisions);
    assert.notEqual(reader.watches.url, frozenUrl);
    cluster.resume(frozen);
    console.log(
      `measured: watch node ${frozen} stopped with SIGSTOP; the watcher had every event through ${reader.watches.url} ${movedAfter} ms later (ping every 1000 ms)`,
    );
  } finally {
    writer?.close();
    reader?.close();
    await cluster.stop();
  }
});

Deno.test("attribute queries match exactly on every node; a local binding is seen only on its node and is gone after its restart; lookups rotate", async () => {
  const cluster = newCluster();
  let client: ReturnType<typeof connect> | null = null;
  try {
    await cluster.startRegistryWithLeader(3);
    client = connect(cluster.registryUrls);
    await client.bind("db?version=1.0&team=blue", {
      id: "a",
      url: "tcp://127.0.0.1:22001",
    });
    await client.bind("db?version=2.0&team=blue", {
      id: "b",
      url: "tcp://127.0.0.1:22002",
    });
    const { revision } = await client.bind("db", {
      id: "c",
      url: "tcp://127.0.0.1:22003",
      attrs: { version: "1.0" },
    });
    const [n1, n2, n3] = cluster.registryUrls;
    await client.lookup("db"); // a linearizable read: every node has the binds
    for (const url of cluster.registryUrls) {
      await waitFor(
        async () => (await lookupOn(url, "db")).revision >= revision,
        `${url} at revision ${revision}`,
      );
      const ids = async (name: string) =>
        (await lookupOn(url, name)).endpoints.map((e) => e.id);
      assert.deepEqual(await ids("db?version=1.0"), ["a", "c"]);
      assert.deepEqual(await ids("db?team=blue"), ["a", "b"]);
      assert.deepEqual(await ids("db?version=2.0&team=blue"), ["b"]);
      assert.deepEqual(await ids("db?team=red"), []);
    }
    // A local binding on n2.
    const lease = await client.registry.grantLease(10_000);
    const bindLocal = () =>
      client!.bind(
        "cache",
        { id: "local-1", url: "tcp://127.0.0.1:22010" },
        {
          scope: "local",
          leaseId: lease.id,
          node: n2,
        },
      );
    if (ENGINE === "etcd") {
      // A front keeps nothing of its own: it says so, and what to use.
      await assert.rejects(bindLocal(), (error: unknown) => {
        assert.ok(error instanceof RpcError, String(error));
        assert.equal(error.code, -32601);
        assert.match(error.message, /local-scope bind .*--engine etcd/);
        return true;
      });
    } else {
      await bindLocal();
      assert.deepEqual(
        (await lookupOn(n2, "cache")).endpoints.map((e) => [e.id, e.scope]),
        [["local-1", "local"]],
      );
      assert.deepEqual((await lookupOn(n1, "cache")).endpoints, []);
      assert.deepEqual((await lookupOn(n3, "cache")).endpoints, []);
      const n2id = [...cluster.registry].find(([, url]) => url === n2)![0];
      await cluster.kill(n2id, "SIGTERM");
      await cluster.startNode(n2id);
      assert.deepEqual((await lookupOn(n2, "cache")).endpoints, []);
    }
    // Rotation: each lookup on a node starts one further.
    const firsts: string[] = [];
    for (let i = 0; i < 3; i++) {
      firsts.push((await lookupOn(n1, "db", { rotate: true })).endpoints[0].id);
    }
    assert.deepEqual([...firsts].sort(), ["a", "b", "c"]);
    console.log(
      `measured: rotated first endpoints on ${n1}: ${firsts.join(", ")}`,
    );
  } finally {
    client?.close();
    await cluster.stop();
  }
});

Deno.test("a health-checked server stopped with SIGSTOP is marked unhealthy on every node and comes back after SIGCONT", async () => {
  const cluster = newCluster();
  try {
    await cluster.startRegistryWithLeader(3);
    await cluster.startHello("checked", [
      "--ttl-ms",
      "20000",
      "--check",
      "ping",
      "--check-interval-ms",
      "300",
    ]);
    const stateOn = async (url: string) =>
      (await lookupOn(url, "hello", { includeUnhealthy: true })).endpoints[0]
        ?.state;
    for (const url of cluster.registryUrls) {
      await waitFor(
        async () => (await stateOn(url)) === "serving",
        `serving on ${url}`,
      );
    }
    const pausedAt = Date.now();
    cluster.pause("checked");
    for (const url of cluster.registryUrls) {
      await waitFor(
        async () => (await stateOn(url)) === "unhealthy",
        `unhealthy on ${url}`,
        10_000,
        50,
      );
      assert.deepEqual((await lookupOn(url, "hello")).endpoints, []);
    }
    const unhealthyAfter = Date.now() - pausedAt;
    const resumedAt = Date.now();
    cluster.resume("checked");
    for (const url of cluster.registryUrls) {
      await waitFor(
        async () => (await stateOn(url)) === "serving",
        `serving on ${url}`,
        10_000,
        50,
      );
    }
    console.log(
      `measured: SIGSTOP → unhealthy on all 3 nodes after ${unhealthyAfter} ms (probes every 300 ms, 2 failures); SIGCONT → serving after ${
        Date.now() - resumedAt
      } ms`,
    );
  } finally {
    await cluster.stop();
  }
});

Deno.test("bindServer binds again by itself after all 3 registry nodes are restarted, from their data and from empty data", async () => {
  const cluster = newCluster();
  try {
    await cluster.startRegistryWithLeader(3);
    await cluster.startHello("self", ["--ttl-ms", "3000"]);
    const leaseOf = async () => {
      for (const url of cluster.registryUrls) {
        try {
          return (await lookupOn(url, "hello")).endpoints[0]?.leaseId ?? null;
        } catch {
          // That node is not up yet.
        }
      }
      return null;
    };
    // (A follower may apply the bind a moment after the leader.)
    const first = await waitFor(leaseOf, "the server's lease");
    // All three killed and restarted from their data folders: the lease is
    // in the log, and the server keeps it alive again.
    for (const id of cluster.registry.keys()) await cluster.kill(id, "SIGKILL");
    let downAt = Date.now();
    await new Promise((r) => setTimeout(r, 1000));
    for (const id of cluster.registry.keys()) await cluster.startNode(id);
    await cluster.waitForLeader(15_000);
    await new Promise((r) => setTimeout(r, 4000)); // longer than the TTL
    assert.equal(await leaseOf(), first);
    const keptAfter = Date.now() - downAt;
    // Killed again and restarted with empty data folders: a new registry
    // knows no lease, so the server binds again with a new one.
    for (const id of cluster.registry.keys()) await cluster.kill(id, "SIGKILL");
    downAt = Date.now();
    for (const id of cluster.registry.keys()) {
      await Deno.remove(await cluster.dataDirOf(id), { recursive: true });
    }
    for (const id of cluster.registry.keys()) await cluster.startNode(id);
    await cluster.waitForLeader(15_000);
    const second = await waitFor(
      async () => {
        const lease = await leaseOf();
        return lease !== null && lease !== first ? lease : null;
      },
      "the server to bind again",
      15_000,
      100,
    );
    await cluster.waitForLine("self", /bound again with lease/, 1000);
    console.log(
      `measured: restart from data kept lease ${first} (checked ${keptAfter} ms after the kill); from empty data the server bound again with lease ${second} ${
        Date.now() - downAt
      } ms after the kill`,
    );
  } finally {
    await cluster.stop();
  }
});

Deno.test(
  "Rafter over etcd 12528/15247: a leader stalled with SIGSTOP for longer than a lease's TTL never expires it, neither a single node nor a deposed leader of three",
  onlyOn(
    "raft",
    "etcd's own lease bugs 12528/15247 (a stalled leader expires kept-alive leases), which the Raft engine fixes",
  ),
  async () => {
    const ttlMs = 1500;
    for (const size of [1, 3]) {
      const cluster = newCluster();
      let client: ReturnType<typeof connect> | null = null;
      try {
        const leader = await cluster.startRegistryWithLeader(size);
        client = connect(cluster.registryUrls);
        const deletes: WatchEvent[] = [];
        const troubles: string[] = [];
        const watch = client.watch("stall", {}, (update) => {
          if (update.kind !== "events") return;
          deletes.push(...update.events.filter((e) => e.type === "delete"));
        });
        const binding = await client.bindServer(
          "stall",
          "tcp://127.0.0.1:23001",
          {
            id: "kept",
            ttlMs,
            onEvent: (event) => {
              if (event.type === "rebound") troubles.push(event.why);
            },
          },
        );
        await new Promise((r) => setTimeout(r, 500));
        // Frozen for twice the TTL: keep-alives sent meanwhile wait in its
        // socket (one node), or go to a new leader (three nodes).
        cluster.pause(leader);
        await new Promise((r) => setTimeout(r, 2 * ttlMs));
        cluster.resume(leader);
        await cluster.waitForLeader(10_000);
        await new Promise((r) => setTimeout(r, 2 * ttlMs));
        assert.deepEqual(
          deletes,
          [],
          `${size} node(s): ${JSON.stringify(deletes)}`,
        );
        assert.deepEqual(troubles, [], `${size} node(s): ${troubles}`);
        const found = await client.lookup("stall");
        assert.deepEqual(found.endpoints.map((e) => e.id), ["kept"]);
        assert.equal(found.endpoints[0].leaseId, binding.leaseId);
        console.log(
          `measured: ${size}-node registry, leader ${leader} stopped for ${
            2 * ttlMs
          } ms (TTL ${ttlMs} ms): the lease kept alive survived, no delete, no re-bind`,
        );
        watch.close();
        await binding.close();
      } finally {
        client?.close();
        await cluster.stop();
      }
    }
  },
);
