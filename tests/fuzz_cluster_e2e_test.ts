/**
 * Fuzzed ports of a real 3-node registry (issue 17): three `deno run
 * registry/main.ts` processes (`LocalCluster`), and at their client and
 * peer ports, for a bounded time:
 *
 * - mutated JSON-RPC frames of every registry method (bit flips, cuts,
 *   members deleted, duplicated or of another type, 2^53, -0, 1e308,
 *   invalid UTF-8), deep nesting (10^5), 1 MiB strings, huge numbers,
 *   CBOR with truncated or oversize length prefixes, raw bytes, sent
 *   whole, half-closed, or by a client that vanishes;
 * - on the peer port *after* a legitimate handshake (the fuzzer holds the
 *   cluster secret and speaks as member n3): mutated Raft messages built
 *   from valid ones (appends with entries, heartbeats, votes, pre-votes,
 *   their answers, read-index, snapshot chunks, `timeoutNow`), giant entry
 *   arrays, mutated frames, and the registry's own peer methods;
 * - slow drips (a frame one byte every 150 ms: the frame timeout, or the
 *   handshake timeout, must cut it) and many half-open connections at once.
 *
 * Meanwhile a healthy client binds and looks up; none of its calls may
 * fail. Afterwards every node is up, every acknowledged bind is on every
 * node, no term jumped, and each node's RSS (VmRSS) grew by under
 * 128 MiB (its V8 old space capped, so that the bound holds however long
 * the run and a leak crashes the node). A last step sends a forged term
 * 2^53 - 1, which must be dropped.
 *
 * Bounds: `RAFTER_FUZZ_SECONDS` (default 10: the fuzz phases' time, the
 * drips add their timeout) and `RAFTER_FUZZ_RUNS` (default 400, inputs per
 * phase). The seed is printed; `RAFTER_FUZZ_SEED=<seed>` replays it. A
 * longer run by hand:
 *
 *     RAFTER_FUZZ_SECONDS=600 RAFTER_FUZZ_RUNS=1000000 deno test -A tests/fuzz_cluster_e2e_test.ts
 *
 * An input after which a node is down or stops answering is saved under
 * `tests/fuzz_corpus/<port>/` (see `tests/_fuzz.ts`), which
 * `tests/fuzz_corpus_test.ts` replays.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { type LocalCluster, withLocalCluster } from "../testing/cluster.ts";
import { connect } from "../stub/client.ts";
import { dial } from "../rpc/transport/dial.ts";
import { dial as dialTls } from "../adapter/deno/mod.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import { ClusterKey } from "../raft/peer_auth.ts";
import { readDataDirMeta } from "../raft/data_dir.ts";
import type { RegistryStatus } from "../protocol/registry.ts";
import { waitFor, within } from "../testing/time.ts";
import {
  concat,
  type CorpusPort,
  drip,
  type Ending,
  fuzzBind,
  fuzzBudgetMs,
  fuzzedRequest,
  fuzzRuns,
  fuzzSeed,
  hostileInput,
  line,
  mutateBytes,
  mutateValue,
  randomValue,
  type RawHandshake,
  rawPeerHandshake,
  readUntilClosed,
  REGISTRY_SEEDS,
  Rng,
  RssSampler,
  saveCrash,
  sendRaw,
  stepFrame,
  validPeerMessage,
} from "./_fuzz.ts";

const MiB = 1024;
/** The old-space cap of each node's V8 heap during the fuzz, MiB. */
const OLD_SPACE_MIB = 64;
const portOf = (url: string) => Number(new URL(url).port);

/** A healthy client's record: every call's outcome and the slowest. */
class HealthyClient {
  readonly acknowledged: string[] = [];
  readonly failures: string[] = [];
  calls = 0;
  maxLatencyMs = 0;
  #stop = false;
  readonly #done: Promise<void>;

  constructor(urls: string[]) {
    const client = connect(urls, { deadlineMs: 15_000 });
    this.#done = (async () => {
      try {
        for (let i = 0; !this.#stop; i++) {
          const id = `h${i}`;
          const started = performance.now();
          try {
            if (i % 3 === 2) {
              await client.lookup("healthy", { consistency: "linearizable" });
            } else {
              await client.bind("healthy", {
                id,
                url: `tcp://127.0.0.1:${10_000 + i}`,
              });
              this.acknowledged.push(id);
            }
          } catch (error) {
            this.failures.push(`${id}: ${error}`);
          }
          this.calls++;
          this.maxLatencyMs = Math.max(
            this.maxLatencyMs,
            performance.now() - started,
          );
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        client.close();
      }
    })();
  }

  stop(): Promise<void> {
    this.#stop = true;
    return this.#done;
  }
}

/** `registry.status` of node `id` (with TLS and a token on a secure cluster). */
async function status(cluster: LocalCluster, id: string) {
  const answer = await cluster.status(id, 5_000);
  if (answer === null) throw new Error(`${id} did not answer registry.status`);
  return answer;
}

/**
 * Fails (after saving `input` to the corpus) unless every node is running
 * and answers `registry.status` within 10 s.
 */
async function checkAlive(
  cluster: LocalCluster,
  port: CorpusPort,
  input: Uint8Array | null,
  what: string,
): Promise<void> {
  for (const id of cluster.registry.keys()) {
    const error = cluster.child(id).running
      ? await within(status(cluster, id), 10_000, `${id} status`).then(
        () => null,
        (e) => e,
      )
      : new Error(`${id} exited:\n${cluster.child(id).output.join("\n")}`);
    if (error !== null) {
      if (input !== null) await saveCrash(port, input);
      // Let a dying node finish writing why.
      const code = await Promise.race([
        cluster.child(id).exited,
        new Promise((resolve) => setTimeout(resolve, 3_000, "running")),
      ]);
      error.message += ` (exit: ${code})`;
      throw new Error(
        `${what}: node ${id} is down or hung: ${error}; its last output:\n${
          cluster.child(id).output.slice(-40).join("\n")
        }`,
      );
    }
  }
}

/** The inputs of one phase: `next()` until the deadline or `runs`. */
function phase(deadline: number, runs: number) {
  let count = 0;
  return () => count++ < runs && Date.now() < deadline;
}

Deno.test("fuzzed client and peer ports (before and after the handshake) of a 3-node cluster: every node stays up, a healthy client never fails, memory stays bounded", async (t) => {
  const seed = fuzzSeed("fuzz_cluster_e2e");
  const rng = new Rng(seed);
  const budgetMs = fuzzBudgetMs(10);
  const runs = fuzzRuns(400);
  // A node's V8 heap is capped: V8 grows a heap lazily (an uncapped node
  // idles at ~66 MiB and reached ~206 MiB after 60 s of fuzz, without a
  // leak: capped at 40 MiB of old space it levels off at ~83 MiB), so a
  // cap makes the bound below hold for a run of any length, and a real
  // leak ends in an out-of-memory crash that the liveness checks catch.
  await withLocalCluster({ electionTicks: 30, ...CAPPED }, async (cluster) => {
    await startCapped(cluster);
    const ids = [...cluster.registry.keys()];
    // n2 leads, the fuzzer speaks as the follower n3 to the follower n1
    // (the ids the peer-step corpus is written for) and to the leader.
    const leader = "n2", target = "n1", speakAs = "n3";
    const pids = ids.map((id) => cluster.child(id).pid);
    const clientPorts = ids.map((id) => portOf(cluster.registry.get(id)!));
    const peerPorts = ids.map((id) => portOf(cluster.peers.get(id)!));
    const { clusterId, handshake } = await memberHandshake(cluster, speakAs);
    const before = new Map<string, RegistryStatus>();
    for (const id of ids) before.set(id, await status(cluster, id));
    const baseTerm = Math.max(...[...before.values()].map((s) => s.term));

    const memory = new RssSampler(pids);
    const healthy = new HealthyClient(cluster.registryUrls);
    const started = Date.now();
    const slice = budgetMs / 3;

    // Slow drips and half-open connections, in the background from the
    // start: the frame timeout (10 s) or the handshake timeout (2 s) cuts
    // each; they run while the other phases do.
    const dripFrame = line({
      jsonrpc: "2.0",
      id: 1,
      method: "registry.lookup",
      params: { name: "x".repeat(200) },
    });
    const drips = Promise.all([
      ...clientPorts.map((port) => drip(port, dripFrame, 150, 30_000)),
      ...peerPorts.map((port) => drip(port, dripFrame, 150, 30_000)),
      // Authenticated, on the target's peer port.
      (async () => {
        const conn = await handshake(target);
        const dripStarted = Date.now();
        const closed = readUntilClosed(conn, 30_000);
        for (const byte of dripFrame.subarray(0, 180)) {
          if (Date.now() - dripStarted > 30_000) break;
          const ok = await conn.write(Uint8Array.of(byte)).then(
            () => true,
            () => false,
          );
          if (!ok) break;
          await new Promise((resolve) => setTimeout(resolve, 150));
        }
        const wasClosed = await closed;
        conn.close();
        return wasClosed ? Date.now() - dripStarted : null;
      })(),
    ]);
    const halfOpen = Promise.all(
      Array.from({ length: 60 }, (_, i) => {
        const port = [...clientPorts, ...peerPorts][i % 6];
        const partial = dripFrame.subarray(0, 1 + (i % 50));
        return sendRaw(
          port,
          partial,
          i % 2 === 0 ? "halfClose" : "vanish",
          15_000,
        );
      }),
    );

    try {
      /** Sends inputs made by `make` at `ports` until the phase ends. */
      const fuzzPorts = async (
        port: CorpusPort,
        ports: number[],
        deadline: number,
        make: (at: number) => Uint8Array,
      ) => {
        const more = phase(deadline, runs);
        for (let i = 0; more(); i++) {
          const at = rng.int(0, 2);
          const input = make(at);
          const ending: Ending = rng.pick(["read", "halfClose", "vanish"]);
          await sendRaw(ports[at], input, ending, 30).catch(() => {});
          if (i % 50 === 49) {
            await checkAlive(cluster, port, input, `${port} input ${i}`);
          }
        }
        await checkAlive(cluster, port, null, `after the ${port} phase`);
      };

      await t.step("mutated frames at the client ports", async () => {
        await fuzzPorts("client", clientPorts, started + slice, () => {
          const seedFrame = rng.pick(REGISTRY_SEEDS);
          return rng.chance(0.2)
            ? hostileInput(rng, seedFrame.method as string)
            : fuzzedRequest(rng, seedFrame);
        });
      });

      await t.step(
        "frames at the peer ports before the handshake",
        async () => {
          await fuzzPorts(
            "peer",
            peerPorts,
            started + 2 * slice,
            (at) =>
              rng.chance(0.3)
                ? hostileInput(rng, rng.pick(["peer.hello", "raft.step"]))
                : fuzzedRequest(rng, {
                  method: rng.pick(["peer.hello", "peer.auth", "raft.step"]),
                  params: rng.chance(0.5)
                    ? {
                      cluster: clusterId,
                      from: speakAs,
                      to: ids[at],
                      nonce: "A".repeat(43),
                    }
                    : [[validPeerMessage(rng, speakAs, ids[at], {
                      term: baseTerm,
                      commit: 1,
                    })]],
                }),
          );
        },
      );

      await t.step(
        "mutated Raft messages after a legitimate handshake",
        async () => {
          await fuzzPeerSteps({
            cluster,
            rng,
            handshake,
            speakAs,
            leader,
            target,
            baseTerm,
            more: phase(started + budgetMs, runs),
          });
        },
      );

      await t.step(
        "slow drips are cut and half-open connections closed",
        async () => {
          const dripped = await drips;
          console.log(`drips cut after (ms): ${dripped.join(", ")}`);
          for (const [i, ms] of dripped.entries()) {
            assert.notEqual(ms, null, `drip ${i} was never cut`);
            // The frame timeout is 10 s, the handshake's 2 s.
            assert.ok(ms! < 25_000, `drip ${i} ran ${ms} ms`);
          }
          const closed = await halfOpen;
          // A half-closed partial frame is answered and closed at once.
          const halfClosed = closed.filter((_, i) => i % 2 === 0);
          assert.ok(
            halfClosed.every((c) => c),
            `half-closed connections left open: ${
              halfClosed.filter((c) => !c).length
            }`,
          );
        },
      );
    } finally {
      await healthy.stop();
    }

    await t.step(
      "the healthy client never failed; the cluster holds what it wrote",
      async () => {
        const rss = memory.stop();
        console.log(
          `healthy client: ${healthy.calls} calls, ${healthy.failures.length} failed, ${healthy.acknowledged.length} binds acknowledged, max latency ${
            Math.round(healthy.maxLatencyMs)
          } ms`,
        );
        console.log(
          `RSS (MiB) before / peak / after: ${formatRss(ids, rss)}`,
        );
        assert.deepEqual(healthy.failures, []);
        assert.ok(
          healthy.acknowledged.length > 0,
          "the healthy client bound nothing",
        );
        for (const r of rss) {
          assert.ok(
            r.peak - r.before < 128 * MiB,
            `pid ${r.pid} grew from ${r.before} KiB to ${r.peak} KiB`,
          );
        }
        await checkAlive(cluster, "client", null, "at the end");
        // Malformed params are refused (-32602), never a TypeError.
        const failures = ids.flatMap((id) =>
          cluster.child(id).output.filter((l) => / failed: /.test(l))
        );
        console.log(
          `handler failures the nodes logged: ${failures.length}${
            failures.length === 0 ? "" : `, e.g. ${failures[0].slice(0, 200)}`
          }`,
        );
        for (const id of ids) {
          assert.deepEqual(
            cluster.child(id).output.filter((l) => /failed: TypeError/.test(l)),
            [],
            id,
          );
        }
        const expected = [...healthy.acknowledged].sort();
        for (const id of ids) {
          const connection = await dial(cluster.registry.get(id)!);
          try {
            let found: string[] = [];
            for (let round = 0; round < 200; round++) {
              const result = await connection.call<
                { endpoints: { id: string }[] }
              >(
                "registry.lookup",
                { name: "healthy", consistency: "serializable" },
              );
              found = result.endpoints.map((e) => e.id).sort();
              if (expected.every((e) => found.includes(e))) break;
              await new Promise((resolve) => setTimeout(resolve, 50));
            }
            assert.deepEqual(
              expected.filter((e) => !found.includes(e)),
              [],
              `acknowledged binds missing on ${id}`,
            );
            const forged = await connection.call<{ endpoints: unknown[] }>(
              "registry.lookup",
              { name: "forged", consistency: "serializable" },
            );
            assert.deepEqual(forged.endpoints, [], `forged binds on ${id}`);
          } finally {
            connection.close();
          }
        }
        await checkTerms(cluster, ids, baseTerm);
      },
    );

    await t.step(
      "a member's forged term 2^53 - 1 is dropped: terms stay, a write commits",
      async () => {
        // A preVoteResponse that refuses, in term 2^53 - 1: the Raft core
        // adopts a higher term from any refusal (Raft §5.1).
        const huge = Number.MAX_SAFE_INTEGER;
        const conn = await handshake(target);
        try {
          await conn.write(stepFrame(1, [{
            type: "preVoteResponse",
            from: speakAs,
            to: target,
            term: huge,
            granted: false,
          }]));
          await readUntilClosed(conn, 200);
        } finally {
          conn.close();
        }
        const client = connect(cluster.registryUrls, { deadlineMs: 4_000 });
        const outcome = await client.bind("after-huge-term", {
          id: "a1",
          url: "tcp://127.0.0.1:9",
        }).then(() => "committed", (e) => `failed: ${e}`);
        client.close();
        const after = await Promise.all(
          ids.map((id) => status(cluster, id).catch(() => null)),
        );
        console.log(
          `forged term ${huge}: a bind ${outcome}; ${
            after.map((s, i) =>
              `${ids[i]} term ${s?.term} leader ${s?.leader} running ${
                cluster.child(ids[i]).running
              }`
            ).join("; ")
          }`,
        );
        // Before MAX_TERM_STEP (raft/core.ts) every node took the term and
        // no leader could be elected again: the bind failed, "electing a
        // leader", with every term at 2^53 - 1.
        assert.equal(outcome, "committed");
        for (const [i, s] of after.entries()) {
          assert.ok(
            s !== null && s.term - baseTerm <= 10,
            `${ids[i]}: ${s?.term}`,
          );
        }
      },
    );
  });
});

Deno.test("fuzzed Raft messages after a member certificate's handshake on a cluster with peer mutual TLS: every node stays up, no term moves, writes still commit", async () => {
  const seed = fuzzSeed("fuzz_cluster_e2e (peer TLS)");
  const rng = new Rng(seed);
  const budgetMs = fuzzBudgetMs(10) / 3;
  await withLocalCluster(
    { electionTicks: 30, secure: true, ...CAPPED },
    async (cluster) => {
      await startCapped(cluster);
      const ids = [...cluster.registry.keys()];
      const leader = "n2", target = "n1", speakAs = "n3";
      // n3's own member certificate (SAN URI:rafter://member/n3) and key,
      // where LocalCluster issued them, and the cluster's secret.
      const pki = join(dirname(await cluster.dataDirOf(speakAs)), "pki");
      const tls = {
        caCert: await Deno.readTextFile(await cluster.caFile()),
        cert: await Deno.readTextFile(join(pki, `${speakAs}.pem`)),
        key: await Deno.readTextFile(join(pki, `${speakAs}.key`)),
      };
      const { handshake } = await memberHandshake(cluster, speakAs, tls);
      const baseTerm = Math.max(
        ...await Promise.all(
          ids.map(async (id) => (await status(cluster, id)).term),
        ),
      );
      const memory = new RssSampler(ids.map((id) => cluster.child(id).pid));
      await fuzzPeerSteps({
        cluster,
        rng,
        handshake,
        speakAs,
        leader,
        target,
        baseTerm,
        more: phase(Date.now() + budgetMs, fuzzRuns(400)),
      });
      const rss = memory.stop();
      console.log(`RSS (MiB) before / peak / after: ${formatRss(ids, rss)}`);
      for (const r of rss) {
        assert.ok(
          r.peak - r.before < 128 * MiB,
          `pid ${r.pid} grew from ${r.before} KiB to ${r.peak} KiB`,
        );
      }
      // A write still commits, and reaches every node.
      const connection = await openClient(cluster, leader);
      try {
        await connection.call("registry.bind", fuzzBind("after"), {
          timeoutMs: 10_000,
        });
      } finally {
        connection.close();
      }
      for (const id of ids) {
        await waitFor(
          async () => {
            const c = await openClient(cluster, id);
            try {
              const found = await c.call<{ endpoints: unknown[] }>(
                "registry.lookup",
                { name: "fuzz-after", consistency: "serializable" },
              );
              return found.endpoints.length === 1;
            } finally {
              c.close();
            }
          },
          `the bind to reach ${id}`,
          10_000,
          50,
        );
      }
      await checkTerms(cluster, ids, baseTerm);
    },
  );
});

/**
 * The cluster id, and a legitimate handshake as member `from` (with the
 * cluster's secret; and over mutual TLS with `tls`, its certificate) on
 * a node's peer port, announcing `from`'s real URLs.
 */
async function memberHandshake(
  cluster: LocalCluster,
  from: string,
  tls?: RawHandshake["tls"],
) {
  const key = await ClusterKey.fromSecret(
    await Deno.readTextFile(await cluster.secretFile()),
  );
  const clusterId =
    (await readDataDirMeta(await cluster.dataDirOf(from)))!.clusterId;
  const self = await status(cluster, from);
  const handshake = (to: string) =>
    rawPeerHandshake(portOf(cluster.peers.get(to)!), {
      key,
      clusterId,
      from,
      to,
      clientUrl: self.url,
      peerUrl: self.peerUrl,
      tls,
    });
  return { clusterId, handshake };
}

/** Asserts that no node's term moved more than 10 past `baseTerm`. */
async function checkTerms(
  cluster: LocalCluster,
  ids: string[],
  baseTerm: number,
): Promise<void> {
  const terms = await Promise.all(
    ids.map(async (id) => (await status(cluster, id)).term),
  );
  console.log(`terms before ${baseTerm}, after ${terms.join(", ")}`);
  for (const term of terms) {
    assert.ok(
      term - baseTerm <= 10,
      `a term jumped from ${baseTerm} to ${term}`,
    );
  }
}

/** `before / peak / after` of each node, MiB. */
function formatRss(
  ids: string[],
  rss: { before: number; peak: number; after: number }[],
): string {
  const mib = (kib: number) => (kib / MiB).toFixed(1);
  return rss.map((r, i) =>
    `${ids[i]} ${mib(r.before)} / ${mib(r.peak)} / ${mib(r.after)}`
  ).join("; ");
}

/** What {@link fuzzPeerSteps} fuzzes, and how it reaches it. */
interface PeerStepFuzz {
  cluster: LocalCluster;
  rng: Rng;
  /** A legitimate handshake as `speakAs` on `to`'s peer port. */
  handshake(to: string): Promise<Deno.Conn>;
  speakAs: string;
  leader: string;
  target: string;
  /** The term the fuzz began in. */
  baseTerm: number;
  /** Whether to go on (the phase's deadline and runs). */
  more(): boolean;
}

/**
 * Handshakes as `speakAs` on the leader's or `target`'s peer port, again
 * and again, and sends ten {@link peerStepInput} frames on each; checks
 * that every node is up every 100 frames, saving the last connection's
 * frames (as from n3 to n1) to the corpus if one is not.
 */
async function fuzzPeerSteps(f: PeerStepFuzz): Promise<void> {
  const { cluster, rng, speakAs, leader, target } = f;
  let sent = 0;
  let frames: Uint8Array[] = [];
  // As the corpus has them: to n1 (frames to the leader are rewritten).
  const joined = () =>
    new TextEncoder().encode(
      new TextDecoder().decode(concat(...frames)).replaceAll(
        `"to":"${leader}"`,
        `"to":"${target}"`,
      ),
    );
  while (f.more()) {
    const to = rng.pick([leader, target]);
    let s: RegistryStatus;
    let conn: Deno.Conn;
    try {
      s = await status(cluster, to);
      conn = await f.handshake(to);
    } catch (error) {
      await checkAlive(cluster, "peer-step", joined(), "peer step");
      throw error;
    }
    frames = [];
    try {
      for (let k = 0; k < 10; k++) {
        // The term the fuzz began in: a message of a later term from a
        // member is a claim to lead it, its own step.
        const input = peerStepInput(rng, speakAs, to, {
          term: Math.min(s.term, f.baseTerm),
          commit: s.commitIndex,
        }, sent++);
        frames.push(input);
        const ok = await conn.write(input).then(() => true, () => false);
        if (!ok) break;
      }
      await readUntilClosed(conn, 30);
    } finally {
      conn.close();
    }
    if (sent % 100 < 10) {
      await checkAlive(cluster, "peer-step", joined(), `peer step ${sent}`);
    }
  }
  await checkAlive(cluster, "peer-step", null, "after the peer-step phase");
  console.log(
    `peer-step: ${sent} frames after ${Math.ceil(sent / 10)} handshakes`,
  );
}

/**
 * A client connection to node `id` (on a secure cluster: TLS, and
 * authenticated with the admin token).
 */
async function openClient(
  cluster: LocalCluster,
  id: string,
): Promise<RpcConnection> {
  const url = cluster.registry.get(id)!;
  if (!cluster.secure) return await dial(url, { connectTimeoutMs: 5_000 });
  const connection = await dialTls(url, {
    connectTimeoutMs: 5_000,
    tls: { caFile: await cluster.caFile() },
  });
  await connection.call("registry.authenticate", {
    token: await cluster.adminToken(),
  });
  return connection;
}

/**
 * The cluster option that caps every node's V8 old space at
 * {@link OLD_SPACE_MIB}: set in each child's environment, never in this
 * process's, which test files running alongside share (a process-wide
 * DENO_V8_FLAGS once starved a concurrent `deno run` of memory).
 */
const CAPPED = {
  childEnv: () => ({ DENO_V8_FLAGS: `--max-old-space-size=${OLD_SPACE_MIB}` }),
};

/** Starts a 3-node cluster (made with {@link CAPPED}) with n2 leading. */
async function startCapped(cluster: LocalCluster): Promise<void> {
  const first = await cluster.startRegistryWithLeader(3);
  if (first !== "n2") await transferLeadership(cluster, first, "n2");
}

/** Moves the leadership from `from` to `to` and waits until all agree. */
async function transferLeadership(
  cluster: LocalCluster,
  from: string,
  to: string,
): Promise<void> {
  const connection = await openClient(cluster, from);
  try {
    await connection.call("registry.leaderTransfer", { to }, {
      timeoutMs: 15_000,
    });
  } finally {
    connection.close();
  }
  await waitFor(
    async () => {
      const all = await Promise.all(
        [...cluster.registry.keys()].map((id) => status(cluster, id)),
      );
      return all.every((s) => s.leader === to);
    },
    `${to} to lead`,
    15_000,
  );
}

/**
 * One frame for an authenticated peer connection: a `raft.step` of
 * mutated messages (terms kept near the target's: a forged huge term is
 * its own step), a giant entry array, a mutated frame, or a call of the
 * registry's peer methods.
 */
function peerStepInput(
  rng: Rng,
  from: string,
  to: string,
  at: { term: number; commit: number },
  id: number,
): Uint8Array {
  const message = () => {
    let m = validPeerMessage(rng, from, to, at);
    if (rng.chance(0.8)) m = mutateValue(rng, m) as Record<string, unknown>;
    // Only the term is kept sane (a forged higher term is its own step):
    // a vote may ask for the next one, the rest stay in the current term.
    const most = m.type === "vote" || m.type === "preVote"
      ? at.term + 1
      : at.term;
    if (Number.isSafeInteger(m.term) && (m.term as number) > most) {
      m.term = at.term;
    }
    return m;
  };
  switch (rng.int(0, 9)) {
    case 0:
      return line({
        jsonrpc: "2.0",
        id,
        method: rng.pick(["registry.leaseSync", "registry.memberRemoved"]),
        params: rng.chance(0.5)
          ? randomValue(rng)
          : { from, leases: [randomValue(rng)] },
      });
    case 1: // a giant (valid-looking) entry array from a non-leader
      return stepFrame(id, [{
        type: "append",
        from,
        to,
        term: at.term,
        prevLogIndex: at.commit,
        prevLogTerm: at.term,
        entries: Array.from({ length: rng.pick([1_000, 20_000]) }, (_, i) => ({
          index: at.commit + 1 + i,
          term: at.term,
          data: "{}",
        })),
        commit: at.commit,
      }]);
    case 2:
      return mutateBytes(rng, stepFrame(id, [message()]));
    default:
      return stepFrame(id, Array.from({ length: rng.int(1, 3) }, message));
  }
}
