/**
 * `--metrics-listen`: every node of a real 3-node cluster serves
 * Prometheus metrics, and the counters move as the load does: binds are
 * counted on the leader, lookups on the nodes that served them, and a
 * SIGKILL of the leader shows as a higher term and a leader change on the
 * survivors. The client port times each call by method and counts its
 * bytes, every node times its pings to each peer, and with a small
 * `--snapshot-entries` every node takes a snapshot and reports its size,
 * and a node restarted after the leader compacted past it counts the
 * snapshot it installs.
 * Real processes, real HTTP scrapes, values parsed from the text format.
 *
 * @module
 */

import assert from "node:assert/strict";
import { withLocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";

/** One sample: metric name, labels, value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text format (0.0.4) into samples; throws on a bad line. */
function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(match !== null, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    const pairs = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g;
    for (const pair of (match[2] ?? "").matchAll(pairs)) {
      labels[pair[1]] = pair[2].replace(
        /\\(.)/g,
        (_, c) => c === "n" ? "\n" : c,
      );
    }
    const value = Number(match[3].replace("+Inf", "Infinity"));
    assert.ok(!Number.isNaN(value), `not a number: ${line}`);
    samples.push({ name: match[1], labels, value });
  }
  return samples;
}

/** The value of `name` whose labels include `labels`, or 0 when absent. */
function valueOf(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number {
  const found = samples.filter((s) =>
    s.name === name &&
    Object.entries(labels).every(([k, v]) => s.labels[k] === v)
  );
  return found.reduce((sum, s) => sum + s.value, 0);
}

async function scrape(url: string): Promise<Sample[]> {
  const response = await fetch(url);
  assert.equal(response.status, 200);
  assert.match(
    response.headers.get("content-type") ?? "",
    /^text\/plain; version=0\.0\.4/,
  );
  return parseMetrics(await response.text());
}

/** Polls `check` on fresh scrapes of `url` until it holds (ceiling 20 s). */
async function scrapeUntil(
  url: string,
  check: (samples: Sample[]) => boolean,
  what: string,
): Promise<Sample[]> {
  const deadline = Date.now() + 20_000;
  let samples: Sample[] = [];
  while (Date.now() < deadline) {
    samples = await scrape(url);
    if (check(samples)) return samples;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(
    `${what} within 20 s; last scrape:\n${
      samples.map((s) => `${s.name}${JSON.stringify(s.labels)} ${s.value}`)
        .join("\n")
    }`,
  );
}

Deno.test("--metrics-listen: counters on every node move with binds, lookups, snapshots, pings and a leader's SIGKILL", async () => {
  await withLocalCluster({
    nodeArgs: ["--metrics-listen", "127.0.0.1:0", "--snapshot-entries", "50"],
  }, async (cluster) => {
    const leader = await cluster.startRegistryWithLeader(3, 20_000);
    const ids = [...cluster.registry.keys()];
    const metricsUrl = new Map<string, string>();
    for (const id of ids) {
      const line = await cluster.waitForLine(
        id,
        /metrics on http:\/\//,
        20_000,
      );
      metricsUrl.set(id, /metrics on (http:\/\/\S+)/.exec(line)![1]);
    }

    // Before the load: every node labels its samples with its id, names
    // one role, and agrees on the term.
    const before = new Map<string, Sample[]>();
    for (const id of ids) {
      const samples = await scrape(metricsUrl.get(id)!);
      before.set(id, samples);
      assert.ok(samples.every((s) => s.labels.node === id), id);
      assert.equal(valueOf(samples, "rafter_raft_role"), 1, id);
      assert.equal(
        valueOf(samples, "rafter_raft_role", { role: "leader" }),
        id === leader ? 1 : 0,
        id,
      );
      assert.ok(valueOf(samples, "process_resident_memory_bytes") > 0);
      assert.ok(valueOf(samples, "rafter_raft_term") >= 1);
    }
    const other = new URL(metricsUrl.get(leader)!);
    other.pathname = "/other";
    const notFound = await fetch(other);
    await notFound.body?.cancel();
    assert.equal(notFound.status, 404);

    // The load: 5 binds on the leader, 3 serializable lookups on one
    // follower and 4 linearizable ones on the leader.
    const follower = ids.find((id) => id !== leader)!;
    const binds = 5;
    const leaderConn = await dial(cluster.registry.get(leader)!);
    const followerConn = await dial(cluster.registry.get(follower)!);
    try {
      for (let i = 0; i < binds; i++) {
        await leaderConn.call("registry.bind", {
          name: "svc",
          endpoint: { id: `e${i}`, url: `tcp://127.0.0.1:${9000 + i}` },
        });
      }
      for (let i = 0; i < 3; i++) {
        await followerConn.call("registry.lookup", {
          name: "svc",
          consistency: "serializable",
        });
      }
      for (let i = 0; i < 4; i++) {
        await leaderConn.call("registry.lookup", { name: "svc" });
      }
      const onLeader = await scrape(metricsUrl.get(leader)!);
      const was = before.get(leader)!;
      // The client port's latency histogram counts each call by method.
      const durations = "rafter_rpc_call_duration_seconds_count";
      const bind = { method: "registry.bind" };
      const lookup = { method: "registry.lookup" };
      assert.equal(
        valueOf(onLeader, durations, bind) - valueOf(was, durations, bind),
        binds,
      );
      assert.equal(
        valueOf(onLeader, durations, lookup) - valueOf(was, durations, lookup),
        4,
      );
      assert.equal(
        valueOf(onLeader, "rafter_rpc_call_duration_seconds_bucket", {
          ...bind,
          le: "+Inf",
        }),
        valueOf(onLeader, durations, bind),
      );
      assert.ok(
        valueOf(onLeader, "rafter_rpc_call_duration_seconds_sum", bind) > 0,
      );
      // Bytes in and out: at least a request and an answer per call.
      for (
        const bytes of [
          "rafter_rpc_received_bytes_total",
          "rafter_rpc_sent_bytes_total",
        ]
      ) {
        assert.ok(
          valueOf(onLeader, bytes) - valueOf(was, bytes) >= (binds + 4) * 20,
          bytes,
        );
      }
      const ok = { method: "registry.bind", outcome: "ok" };
      assert.equal(
        valueOf(onLeader, "rafter_registry_writes_total", ok) -
          valueOf(was, "rafter_registry_writes_total", ok),
        binds,
      );
      assert.equal(
        valueOf(onLeader, "rafter_rpc_calls_total", ok) -
          valueOf(was, "rafter_rpc_calls_total", ok),
        binds,
      );
      assert.equal(
        valueOf(onLeader, "rafter_registry_lookups_total", {
          consistency: "linearizable",
        }),
        4,
      );
      assert.equal(
        valueOf(onLeader, "rafter_registry_lookups_total", {
          consistency: "serializable",
        }),
        0,
      );
      assert.equal(valueOf(onLeader, "rafter_registry_names"), 1);
      assert.equal(valueOf(onLeader, "rafter_registry_bindings"), binds);
      assert.ok(valueOf(onLeader, "rafter_rpc_open_connections") >= 1);
      assert.ok(
        valueOf(onLeader, "rafter_raft_commit_index") >=
          valueOf(was, "rafter_raft_commit_index") + binds,
      );
      const onFollower = await scrape(metricsUrl.get(follower)!);
      assert.equal(
        valueOf(onFollower, "rafter_registry_lookups_total", {
          consistency: "serializable",
        }),
        3,
      );
      assert.equal(valueOf(onFollower, "rafter_registry_writes_total"), 0);
      assert.equal(
        valueOf(onFollower, "rafter_raft_proposals_total"),
        valueOf(before.get(follower)!, "rafter_raft_proposals_total"),
        "a follower proposes nothing",
      );
      // Each bind is one proposal the leader applied, timed.
      const applied = { outcome: "applied" };
      assert.ok(
        valueOf(onLeader, "rafter_raft_proposals_total", applied) -
            valueOf(was, "rafter_raft_proposals_total", applied) >= binds,
      );
      assert.equal(
        valueOf(onLeader, "rafter_raft_proposal_seconds_count"),
        valueOf(onLeader, "rafter_raft_proposals_total", applied),
      );
      assert.equal(
        valueOf(onLeader, "rafter_raft_proposal_seconds_bucket", {
          le: "+Inf",
        }),
        valueOf(onLeader, "rafter_raft_proposal_seconds_count"),
      );
      assert.ok(valueOf(onLeader, "rafter_raft_proposal_seconds_sum") > 0);
      // Every node fdatasyncs its log at least once per bind it appends.
      assert.ok(
        valueOf(onLeader, "rafter_wal_fsync_seconds_count") -
            valueOf(was, "rafter_wal_fsync_seconds_count") >= 1,
      );
      assert.equal(
        valueOf(onLeader, "rafter_registry_events_total") -
          valueOf(was, "rafter_registry_events_total"),
        binds,
      );
      // The follower applies the binds too (replication), event-driven.
      await scrapeUntil(
        metricsUrl.get(follower)!,
        (s) => valueOf(s, "rafter_registry_bindings") === binds,
        `${follower} applies the ${binds} binds`,
      );

      // A lease left to lapse: one expiry, on every node that applies it.
      await leaderConn.call("registry.bind", {
        name: "brief",
        endpoint: { id: "b1", url: "tcp://127.0.0.1:9100" },
        grant: { ttlMs: 1000 },
      });
      for (const id of ids) {
        const expired = await scrapeUntil(
          metricsUrl.get(id)!,
          (s) =>
            valueOf(s, "rafter_registry_lease_expiries_total") === 1 &&
            valueOf(s, "rafter_registry_leases") === 0,
          `${id} applies the lease's expiry`,
        );
        assert.equal(valueOf(expired, "rafter_registry_names"), 1, id);
        assert.equal(valueOf(expired, "rafter_registry_bindings"), binds, id);
      }

      // Enough writes for a snapshot (--snapshot-entries 50) on every node.
      for (let i = 0; i < 60; i++) {
        await leaderConn.call("registry.bind", {
          name: "bulk",
          endpoint: { id: `k${i}`, url: `tcp://127.0.0.1:${9200 + i}` },
        });
      }
      for (const id of ids) {
        const snapped = await scrapeUntil(
          metricsUrl.get(id)!,
          (s) =>
            valueOf(s, "rafter_raft_snapshots_total", { source: "taken" }) >=
              1 && valueOf(s, "rafter_raft_snapshot_bytes") > 0,
          `${id} takes a snapshot`,
        );
        assert.ok(valueOf(snapped, "rafter_raft_snapshot_index") >= 50, id);
        assert.equal(
          valueOf(snapped, "rafter_raft_snapshot_seconds_count"),
          valueOf(snapped, "rafter_raft_snapshots_total"),
          id,
        );
      }

      // A node down while the leader compacts past its log catches up
      // through InstallSnapshot, counted as installed.
      const lagging = ids.find((id) => id !== leader && id !== follower)!;
      await cluster.kill(lagging, "SIGKILL");
      for (let i = 0; i < 150; i++) {
        await leaderConn.call("registry.bind", {
          name: "late",
          endpoint: { id: `l${i}`, url: `tcp://127.0.0.1:${9300 + i}` },
        });
      }
      await cluster.startNode(lagging);
      const line = await cluster.waitForLine(
        lagging,
        /metrics on http:\/\//,
        20_000,
      );
      metricsUrl.set(lagging, /metrics on (http:\/\/\S+)/.exec(line)![1]);
      const installed = await scrapeUntil(
        metricsUrl.get(lagging)!,
        (s) =>
          valueOf(s, "rafter_raft_snapshots_total", { source: "installed" }) >=
            1 && valueOf(s, "rafter_raft_snapshot_bytes") > 0,
        `${lagging} installs a snapshot from the leader`,
      );
      assert.ok(
        valueOf(installed, "rafter_raft_snapshot_seconds_count", {
          source: "installed",
        }) >= 1,
      );
      // The restarted process counts from zero again.
      before.set(lagging, installed);
    } finally {
      leaderConn.close();
      followerConn.close();
    }

    // Every node times its pings to each of the others.
    for (const id of ids) {
      for (const peer of ids.filter((other) => other !== id)) {
        await scrapeUntil(
          metricsUrl.get(id)!,
          (s) => valueOf(s, "rafter_peer_rtt_seconds_count", { peer }) > 0,
          `${id} times a ping to ${peer}`,
        );
      }
    }

    // SIGKILL the leader: a survivor becomes leader in a higher term, and
    // both survivors count one more leader change.
    const termBefore = valueOf(before.get(follower)!, "rafter_raft_term");
    await cluster.kill(leader, "SIGKILL");
    const survivors = ids.filter((id) => id !== leader);
    const after = new Map<string, Sample[]>();
    for (const id of survivors) {
      after.set(
        id,
        await scrapeUntil(
          metricsUrl.get(id)!,
          (s) =>
            valueOf(s, "rafter_raft_term") > termBefore &&
            valueOf(s, "rafter_raft_leader_changes_total") >
              valueOf(before.get(id)!, "rafter_raft_leader_changes_total") &&
            valueOf(s, "rafter_raft_role", { role: "candidate" }) === 0,
          `${id} sees a new leader in a higher term`,
        ),
      );
    }
    const leaders = survivors.filter((id) =>
      valueOf(after.get(id)!, "rafter_raft_role", { role: "leader" }) === 1
    );
    assert.equal(leaders.length, 1, "one survivor leads");
  });
});
