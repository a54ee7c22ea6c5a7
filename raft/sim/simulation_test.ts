/**
 * Randomized whole-cluster tests of the Raft driver and core on the
 * deterministic simulator (see `cluster.ts`): many seeds, each a different mix of message
 * loss, duplication, reordering, partitions and crashes, with Raft's safety
 * properties checked after every step and liveness after healing.
 *
 * Replay one seed (with a trace of its last events on failure):
 *
 *     RAFT_SEED=17 RAFT_NODES=5 deno test -A raft/sim/simulation_test.ts
 *     deno task sim --nodes 5 --from 17 --seeds 1 --steps 3000 --trace 300
 *
 * Run more seeds: `RAFT_SEEDS=5000` (per cluster size); longer runs:
 * `RAFT_STEPS=5000` (fault-phase steps per seed).
 *
 * @module
 */

import { formatSummary, runSeeds as runSimulation } from "./main.ts";
import assert from "node:assert/strict";
import { RaftCore, type RaftCoreConfig, type Ready } from "../core.ts";
import { ClusterSimulator, simulateSeed } from "./cluster.ts";
import type { SimulationOptions, SimulationResult } from "./scenario.ts";

function envNumber(name: string): number | undefined {
  const permission = Deno.permissions.querySync({
    name: "env",
    variable: name,
  });
  if (permission.state !== "granted") return undefined;
  const text = Deno.env.get(name);
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!Number.isInteger(value)) throw new Error(`${name} must be an integer`);
  return value;
}

const replaySeed = envNumber("RAFT_SEED");
const replayNodes = envNumber("RAFT_NODES");
const seedCount = envNumber("RAFT_SEEDS") ?? 500;
const steps = envNumber("RAFT_STEPS") ?? 3000;

/**
 * Runs seeds `1..count` on a cluster of `nodes`; fails listing every failing
 * seed, with the first failure's message (which says how to replay it).
 */
async function runSeeds(
  nodes: number,
  count: number,
): Promise<SimulationResult[]> {
  const results: SimulationResult[] = [];
  const failures: { seed: number; message: string }[] = [];
  const summary = await runSimulation(
    { nodes, seeds: count, from: 1, steps, onResult: (r) => results.push(r) },
    (seed, error) => failures.push({ seed, message: (error as Error).message }),
  );
  // The summary `deno task sim` prints, for the CI log.
  console.log(formatSummary([summary]));
  if (failures.length > 0) {
    throw new Error(
      `${failures.length} of ${count} seeds failed with ${nodes} nodes: ` +
        `${failures.map((f) => f.seed).join(", ")}\nfirst failure: ` +
        failures[0].message,
    );
  }
  return results;
}

/** The fault mix must really have been exercised across the seeds. */
function assertExercised(results: SimulationResult[]): void {
  const sum = (f: (r: SimulationResult) => number) =>
    results.reduce((total, r) => total + f(r), 0);
  assert.ok(sum((r) => r.crashes) > results.length, "crashes happened");
  assert.ok(sum((r) => r.readStatesServed) > 0, "reads were served");
  assert.ok(
    sum((r) => r.leaderTerms) > 2 * results.length,
    "leaders changed",
  );
  assert.ok(
    sum((r) => r.committedProposals) > 0.5 * sum((r) => r.proposals),
    "most proposals committed",
  );
  // Membership changes and full disks, in the seeds that draw them.
  assert.ok(sum((r) => r.membership.joins) > 0, "spare nodes joined");
  assert.ok(sum((r) => r.membership.promotions) > 0, "learners promoted");
  assert.ok(sum((r) => r.membership.readded) > 0, "removed nodes re-added");
  assert.ok(
    sum((r) => r.membership.leaderRemovals) > 0,
    "leaders removed themselves",
  );
  assert.ok(sum((r) => r.faults.diskFullStops) > 0, "full disks stopped nodes");
  // Snapshots (Raft paper §7), in the seeds that draw them.
  assert.ok(sum((r) => r.snapshots.taken) > 0, "snapshots taken");
  assert.ok(sum((r) => r.snapshots.installed) > 0, "snapshots installed");
  assert.ok(sum((r) => r.snapshots.loaded) > 0, "snapshots loaded at restart");
  assert.ok(sum((r) => r.snapshots.chunksLost) > 0, "snapshot chunks lost");
}

if (replaySeed !== undefined) {
  for (const nodes of replayNodes === undefined ? [3, 5] : [replayNodes]) {
    Deno.test(`simulation replay: seed ${replaySeed}, ${nodes} nodes`, async () => {
      const result = await simulateSeed(replaySeed, nodes, {
        steps,
        traceLines: 300,
      });
      console.log(result);
    });
  }
} else {
  Deno.test(`simulation: ${seedCount} seeds with 3 nodes`, async () => {
    assertExercised(await runSeeds(3, seedCount));
  });

  Deno.test(`simulation: ${seedCount} seeds with 5 nodes`, async () => {
    assertExercised(await runSeeds(5, seedCount));
  });
}

Deno.test("simulation: §3.10 leadership transfers injected under every fault mix keep safety and liveness", async () => {
  const count = Math.max(50, Math.floor(seedCount / 3));
  for (const nodes of [3, 5]) {
    const results: SimulationResult[] = [];
    for (let seed = 1; seed <= count; seed++) {
      results.push(
        await simulateSeed(seed, nodes, {
          steps,
          cluster: { transferRate: 0.02 },
        }),
      );
    }
    const transfers = results.reduce((t, r) => t + r.transfers, 0);
    assert.ok(transfers > results.length, `${transfers} transfers started`);
    assertExercised(results);
  }
});

/** Fault rates that inject nothing. */
const noFaults = {
  lossRate: 0,
  duplicateRate: 0,
  partitionRate: 0,
  crashRate: 0,
  asymmetricRate: 0,
  flapRate: 0,
  diskFullRate: 0,
  membershipRate: 0,
  spareNodes: 0,
};

/** A 3-node simulator driven by hand, with no faults of its own. */
function faultless(
  seed: number,
  cluster: SimulationOptions["cluster"] = {},
): ClusterSimulator {
  return new ClusterSimulator({
    seed,
    nodes: 3,
    steps: 0,
    faults: noFaults,
    // These runs read whole logs from the disk: no compaction, unless asked.
    cluster: { snapshotEntries: 0, ...cluster },
  });
}

Deno.test("simulation: §3.10 a transfer in a quiet cluster hands leadership to the target", async () => {
  const sim = faultless(11, {
    transferRate: 0,
    electionTicks: 10,
    asyncReadyRate: 0,
  });
  for (let i = 0; i < 300; i++) sim.step();
  const leader = sim.nodeIds.find((id) => sim.core(id)?.role === "leader")!;
  const target = sim.nodeIds.find((id) => id !== leader)!;
  const term = sim.core(leader)!.term;
  sim.core(leader)!.transferLeadership(target);
  for (let i = 0; i < 60; i++) sim.step();
  assert.equal(sim.core(target)!.role, "leader");
  assert.equal(sim.core(target)!.term, term + 1);
  sim.heal();
  await sim.settle(3000);
});

Deno.test("simulation: a seed replays exactly", async () => {
  const a = await simulateSeed(7, 5, { steps: 800 });
  const b = await simulateSeed(7, 5, { steps: 800 });
  assert.deepEqual(a, b);
  const c = await simulateSeed(8, 5, { steps: 800 });
  assert.notDeepEqual(a, c);
});

Deno.test("simulation: the simulator can be driven by hand", async () => {
  const sim = faultless(3);
  for (let i = 0; i < 300; i++) sim.step();
  const leader = sim.nodeIds.find((id) => sim.core(id)?.role === "leader");
  assert.ok(leader !== undefined);
  sim.partition([[leader]]);
  sim.crash(sim.nodeIds.find((id) => id !== leader)!);
  for (let i = 0; i < 300; i++) sim.step();
  sim.heal();
  await sim.settle(3000);
  assert.ok(sim.appliedLog.length > 0);
  for (const id of sim.nodeIds) {
    assert.deepEqual(
      sim.disk(id).entries.slice(0, sim.appliedLog.length),
      sim.appliedLog,
    );
  }
});

// --- the checks catch broken cores -------------------------------------------

/** A simulation whose cores are built by `create`; returns its error. */
async function failureWith(
  create: (config: RaftCoreConfig) => RaftCore,
  options: Partial<SimulationOptions> = {},
): Promise<string> {
  for (let seed = 1; seed <= 20; seed++) {
    try {
      await new ClusterSimulator({
        seed,
        nodes: 3,
        steps: 1000,
        createCore: create,
        ...options,
      }).run();
    } catch (error) {
      return (error as Error).message;
    }
  }
  return "no failure";
}

Deno.test("simulation: a core that never persists its vote is caught", async () => {
  class Forgetful extends RaftCore {
    override ready(): Ready {
      const ready = super.ready();
      if (ready.hardState !== null) {
        ready.hardState = { ...ready.hardState, vote: null };
      }
      return ready;
    }
  }
  const message = await failureWith((config) => new Forgetful(config));
  assert.match(message, /^seed \d+ \(3 nodes\) step \d+: /);
  assert.match(message, /before the vote is durable/);
  assert.match(
    message,
    /replay: deno task sim --nodes 3 --from \d+ --seeds 1 --steps 1000/,
  );
});

Deno.test("simulation: a core that applies a wrong entry is caught", async () => {
  class Corrupt extends RaftCore {
    override ready(): Ready {
      const ready = super.ready();
      ready.committedEntries = ready.committedEntries.map((entry) =>
        entry.index === 3 && this.id === "n2"
          ? { ...entry, data: "corrupt" }
          : entry
      );
      return ready;
    }
  }
  const message = await failureWith((config) => new Corrupt(config));
  assert.match(message, /n2 applies entry 3 that is not durable/);
});

Deno.test("simulation: a core that answers reads at once is caught", async () => {
  class Hasty extends RaftCore {
    #answers: { context: string; index: number }[] = [];
    override readIndex(context: string): void {
      // Serves from its own commit index without asking anybody.
      this.#answers.push({ context, index: this.commitIndex });
    }
    override hasReady(): boolean {
      return this.#answers.length > 0 || super.hasReady();
    }
    override ready(): Ready {
      const ready = super.ready();
      ready.readStates = [...ready.readStates, ...this.#answers];
      this.#answers = [];
      return ready;
    }
  }
  const message = await failureWith((config) => new Hasty(config), {
    cluster: { readRate: 0.5 },
  });
  assert.match(message, /ReadIndex not linearizable/);
});

Deno.test("simulation: a node that starts two voters away from the cluster's configuration is caught (no two disjoint majorities)", async () => {
  // As if two voters had been added at once: n1 believes in {n1, n2, n3,
  // n8, n9} and can be elected by n1, n2, n3, a majority of it that need not
  // meet a majority of the real {n1, n2, n3}.
  const message = await failureWith((config) =>
    new RaftCore(
      config.id === "n1"
        ? { ...config, voters: [...config.voters, "n8", "n9"] }
        : config,
    ), { faults: { membershipRate: 0 } });
  assert.match(
    message,
    /no two disjoint majorities: n1, leader of term \d+, uses \{voters \[n1,n2,n3,n8,n9\] learners \[\]\}, which has a majority disjoint from one of the configuration before it in its log, \{voters \[n1,n2,n3\] learners \[\]\} \(bootstrap\)/,
  );
  assert.match(message, /replay: deno task sim --nodes 3 --from \d+/);
});

// --- membership changes and full disks ----------------------------------------

Deno.test("simulation: dissertation §4.1, §4.2 membership changes in a quiet cluster: joins, promotions, removals of the leader, then liveness", async () => {
  const totals = { joins: 0, promotions: 0, leaderRemovals: 0, readded: 0 };
  for (let seed = 1; seed <= 10; seed++) {
    const result = await new ClusterSimulator({
      seed,
      nodes: 3,
      steps: 3000,
      faults: { ...noFaults, membershipRate: 0.05, spareNodes: 2 },
    }).run();
    for (const key of Object.keys(totals) as (keyof typeof totals)[]) {
      totals[key] += result.membership[key];
    }
    assert.ok(result.membership.committed > 5, `seed ${seed}: changes`);
  }
  for (const [key, value] of Object.entries(totals)) {
    assert.ok(value > 0, `${key}: ${value}`);
  }
});

Deno.test("simulation: a leader whose disk fills up stops, restarts from its disk later, and no acknowledged write is lost", async () => {
  const sim = faultless(5, { asyncReadyRate: 0, proposeRate: 0.5 });
  const leaderOf = () =>
    sim.nodeIds.find((id) => sim.core(id)?.role === "leader");
  for (let i = 0; i < 400 && leaderOf() === undefined; i++) sim.step();
  for (let i = 0; i < 100; i++) {
    sim.step();
    await sim.flush();
  }
  const leader = leaderOf()!;
  const acknowledged = sim.appliedLog.length;
  sim.fillDisk(leader, 200);
  for (let i = 0; i < 20 && sim.driver(leader) !== null; i++) sim.step();
  assert.equal(sim.driver(leader), null, "the driver stopped on ENOSPC");
  // Its durable log still holds everything it had applied.
  assert.deepEqual(
    sim.disk(leader).entries.slice(0, acknowledged),
    sim.appliedLog.slice(0, acknowledged),
  );
  for (let i = 0; i < 600; i++) {
    sim.step();
    await sim.flush();
  }
  assert.notEqual(sim.driver(leader), null, "restarted from its disk");
  sim.heal();
  await sim.settle(3000);
  assert.ok(sim.appliedLog.length > acknowledged);
});

// --- PreVote (Raft dissertation §9.6) ----------------------------------------

/**
 * A calm 3- or 5-node cluster elects a leader; one follower is cut off for
 * `cutOffSteps` (many election timeouts), then the network heals. Reports
 * the leader and the highest term before the cut and after the rejoin, and
 * the term the cut-off node reached while alone.
 */
function rejoinAfterPartition(
  seed: number,
  nodes: number,
  preVote: boolean,
): {
  leaderBefore: string;
  leaderAfter: string | undefined;
  termBefore: number;
  termAlone: number;
  termAfter: number;
} {
  const sim = new ClusterSimulator({
    seed,
    nodes,
    steps: 0,
    faults: noFaults,
    cluster: { preVote, checkQuorum: true, transferRate: 0 },
  });
  const leaderOf = () =>
    sim.nodeIds.find((id) => sim.core(id)?.role === "leader");
  const maxTerm = () =>
    Math.max(...sim.nodeIds.map((id) => sim.core(id)!.term));
  for (let i = 0; i < 400 && leaderOf() === undefined; i++) sim.step();
  for (let i = 0; i < 100; i++) sim.step();
  const leaderBefore = leaderOf();
  assert.ok(leaderBefore !== undefined, `seed ${seed}: a leader is elected`);
  const termBefore = maxTerm();
  const outcast = sim.nodeIds.find((id) => id !== leaderBefore)!;
  sim.partition([[outcast]]);
  for (let i = 0; i < 1500; i++) sim.step();
  const termAlone = sim.core(outcast)!.term;
  sim.partition([]);
  for (let i = 0; i < 600; i++) sim.step();
  return {
    leaderBefore,
    leaderAfter: leaderOf(),
    termBefore,
    termAlone,
    termAfter: maxTerm(),
  };
}

Deno.test(
  "simulation: §9.6 PreVote: a follower cut off and rejoined neither raises the term nor deposes the leader",
  () => {
    for (const nodes of [3, 5]) {
      for (let seed = 1; seed <= 20; seed++) {
        const on = rejoinAfterPartition(seed, nodes, true);
        assert.equal(
          on.termAlone,
          on.termBefore,
          `seed ${seed}: ${JSON.stringify(on)}`,
        );
        assert.equal(on.termAfter, on.termBefore, `seed ${seed}`);
        assert.equal(on.leaderAfter, on.leaderBefore, `seed ${seed}`);

        // Without PreVote the same run does both: the check can fail. (Its
        // first election may take more terms: a split vote PreVote avoids.)
        const off = rejoinAfterPartition(seed, nodes, false);
        assert.ok(off.termAlone > off.termBefore + 5, `seed ${seed}`);
        assert.ok(off.termAfter > off.termBefore, `seed ${seed}`);
      }
    }
  },
);

// --- snapshots (Raft paper §7) ---------------------------------------------

/** Snapshots every 10 entries, no trailing window, chunks of 16 chars. */
const compacting = {
  snapshotEntries: 10,
  snapshotTrailing: 0,
  snapshotChunkChars: 16,
};

Deno.test("simulation: §7 InstallSnapshot: a follower partitioned while the leader compacts its log catches up through a chunked snapshot", async () => {
  const sim = faultless(3, { ...compacting, proposeRate: 0.5 });
  const leaderOf = () =>
    sim.nodeIds.find((id) => sim.core(id)?.role === "leader");
  for (let i = 0; i < 400 && leaderOf() === undefined; i++) sim.step();
  const leader = leaderOf()!;
  const follower = sim.nodeIds.find((id) => id !== leader)!;
  sim.partition([[follower]]);
  for (let i = 0; i < 300; i++) {
    sim.step();
    await sim.flush();
  }
  const compactedTo = sim.core(leader)!.snapshotPoint.index;
  assert.ok(
    compactedTo > sim.core(follower)!.lastIndex,
    `the leader compacted past the follower's log (${compactedTo})`,
  );
  sim.heal();
  await sim.settle(3000);
  const { installed, chunks } = sim.snapshots;
  assert.ok(installed >= 1, `installed ${installed}`);
  assert.ok(chunks > installed, `sent in ${chunks} chunks`);
  const disk = sim.disk(follower);
  assert.ok((disk.snapshot?.index ?? 0) >= compactedTo, "snapshot stored");
  assert.ok(disk.logStart.index > 0, "its log starts after the snapshot");
  assert.equal(sim.core(follower)!.commitIndex, sim.appliedLog.length);
});

Deno.test("simulation: §7 a restore that drops one key of the snapshot is caught (state machine safety)", async () => {
  const dropKey = (data: string) => {
    const state = JSON.parse(data);
    state.kv.pop();
    return JSON.stringify(state);
  };
  let caught: Error | null = null;
  for (let seed = 1; seed <= 20 && caught === null; seed++) {
    try {
      await simulateSeed(seed, 3, {
        steps: 1000,
        cluster: compacting,
        corruptRestore: dropKey,
      });
    } catch (error) {
      caught = error as Error;
    }
  }
  assert.match(String(caught?.message), /state machine safety/);
});

Deno.test("simulation: §7 a config entry applied from a slow Ready after the core installed a snapshot meanwhile is checked from that Ready (seed 4004)", async () => {
  // Seed 4004 (3 nodes): a removed node re-added as a learner receives a
  // snapshot while its disk write is in flight; the driver then applies the
  // Ready's committed entries, among them a config entry the core's log no
  // longer holds. The simulator once read it from the core and failed.
  const result = await simulateSeed(4004, 3, { steps: 3000 });
  assert.ok(result.snapshots.installed > 0, "snapshots installed");
});
