/**
 * The registry at scale (issue 9, scenario 9, `scale`): a 3-node registry
 * (real `deno run` processes on 127.0.0.1 through `LocalCluster`, fsync
 * on), filled in stages, and measured at each:
 *
 * 1. **Registry memory**: RSS of each node (`/proc/PID/status`) when
 *    empty, then after binding 1, 1,000 and 10,000 endpoints under one
 *    name each, then 100,000 names of one endpoint each (cumulative), with
 *    the fill rate (`registry.bind` in JSON-RPC batches of 500, 4 batches
 *    in flight to the leader: every bind its own Raft write).
 * 2. **Lookup latency**: sequential `registry.lookup` (the registry's
 *    default rotation on), linearizable and serializable, spread over the
 *    three nodes, of the names with 1, 1k and 10k endpoints, alternating
 *    A B C A B C …; then, once the 100k names are in, of the 1-endpoint
 *    name again and of one of the 100k names. p50/p99 as the client sees
 *    it (its decoding included), the ratio of p99 to the 1-endpoint name's
 *    (the target: within 2× from 1 to 10k endpoints), bytes per answer
 *    (counted on the client's socket), and CPU of the bench and the nodes.
 * 3. **Client memory**: a fresh client process (`bench/_scale_client.ts`)
 *    makes one call through a cluster stub of the 1-endpoint name and of
 *    the 10k-endpoint name (its cluster map then holds every endpoint and
 *    a watch keeps it), collects garbage and reports its RSS and V8 heap.
 * 4. **Watch fan-out**: 1 watcher of one prefix and 1,000 watchers of
 *    another (10 watches per `RafterClient`, its own watch connection,
 *    to n1, n2, n3 in turn, all in this process); each round binds once
 *    under each prefix in turn and times until every watcher has seen it.
 *
 * Every latency figure is the median of `--rounds` alternating rounds
 * (default 3). Memory is cumulative state, so those rows are one fill
 * each (the median of 3 samples 100 ms apart), not alternated. A script,
 * not a test: it asserts nothing about speed; it exits 1 when the
 * registry fails (a bind or lookup error, a watcher that never sees its
 * event).
 *
 * ```sh
 * deno task bench scale                        # through bench/main.ts
 * deno run -A bench/scale.ts                   # full: 400 lookups a row and round, about 1.5 min
 * deno run -A bench/scale.ts --quick           # 60 lookups a row and round, about 20 s
 * deno run -A bench/scale.ts --names 20000 --rounds 5
 * ```
 *
 * Stops every process it started and removes its data folder at the end,
 * on errors, on Ctrl-C (exit 130) and when its time budget runs out.
 *
 * @module
 */

import { benchArgs, benchScenarios, usageError } from "./_args.ts";
import {
  alternate,
  CpuMeter,
  median,
  percentile,
  processRssMiB,
  ratio,
  Report,
  type Row,
} from "./report.ts";
import { countingDialer, type WireCounts } from "./_wire.ts";
import { LocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import { connect, type RafterClient } from "../stub/client.ts";
import type { RegistryWatch } from "../stub/registry_client/watch.ts";
import type { LookupResult } from "../protocol/registry.ts";

const USAGE = `usage: deno run -A bench/scale.ts [options]

  --scenarios LIST  scenarios to run (default: scale, the only one)
  --quick           60 lookups a row and round (else 400), 3 fan-out rounds
  --rounds N        alternating rounds of every latency figure (default 3, at least 3)
  --lookups N       sequential lookups per row and round (default 400; --quick 60)
  --names N         names of one endpoint each in the last stage (default 100000)
  --watchers N      watchers of the fan-out (default 1000)
  --help            show this text`;

const flags = benchArgs(USAGE, {
  scenarios: { type: "string" },
  quick: { type: "boolean", default: false },
  rounds: { type: "string", default: "3" },
  lookups: { type: "string" },
  names: { type: "string", default: "100000" },
  watchers: { type: "string", default: "1000" },
});
const scenarios = benchScenarios(flags.scenarios, ["scale"], USAGE);
const QUICK = flags.quick === true;
const ROUNDS = Number(flags.rounds);
const LOOKUPS = Number(flags.lookups ?? (QUICK ? "60" : "400"));
const NAMES = Number(flags.names);
const WATCHERS = Number(flags.watchers);
const integerIn = (n: number, min: number, max: number) =>
  Number.isSafeInteger(n) && n >= min && n <= max;
if (
  !integerIn(ROUNDS, 3, 100) || !integerIn(LOOKUPS, 10, 100_000) ||
  !integerIn(NAMES, 1, 1_000_000) || !integerIn(WATCHERS, 1, 10_000)
) {
  usageError(
    "--rounds must be an integer in [3, 100], --lookups in [10, 100000], --names in [1, 1000000], --watchers in [1, 10000]",
    USAGE,
  );
}
/** Most time one row's lookups of one round may take, ms. */
const LOOKUP_ROUND_MS = QUICK ? 600 : 5_000;
/** Measured fan-out rounds (after one warm-up round). */
const FANOUT_ROUNDS = QUICK ? 3 : 5;
/** Watches per RafterClient object (its own watch connection). */
const WATCHES_PER_CLIENT = 10;
/** How long a fan-out round waits for its last watcher, ms. */
const FANOUT_TIMEOUT_MS = 10_000;
/** Binds in one JSON-RPC batch while filling, and batches in flight. */
const FILL_BATCH = 500;
const FILL_IN_FLIGHT = 4;

/** The names measured and how many endpoints each holds. */
const SIZES = [
  { label: "1 endpoint", name: "scale/one", count: 1 },
  { label: "1k endpoints", name: "scale/thousand", count: 1_000 },
  { label: "10k endpoints", name: "scale/ten-thousand", count: 10_000 },
] as const;
const NAME_PREFIX = "scale/names/";
const nameOf = (i: number) => `${NAME_PREFIX}n${i}`;

const report = new Report("scale.ts");
const cluster = new LocalCluster();
const stop = new AbortController();
const onSignal = () => stop.abort(new Error("interrupted"));
Deno.addSignalListener("SIGINT", onSignal);
Deno.addSignalListener("SIGTERM", onSignal);
const budgetMs = QUICK ? 120_000 : 900_000;
const budget = setTimeout(
  () => stop.abort(new Error(`time budget of ${budgetMs / 1000} s exceeded`)),
  budgetMs,
);
const opened: { close(): void }[] = [];

/** Throws the abort reason once stopped. */
function checkStopped(): void {
  if (stop.signal.aborted) throw stop.signal.reason;
}

const ids = () => [...cluster.registry.keys()];
const nodePids = () =>
  new Map(ids().map((id) => [id, cluster.child(id).pid] as const));

/** Median of 3 RSS samples of each node, 100 ms apart, MiB. */
async function nodeRss(): Promise<number[]> {
  const samples: number[][] = ids().map(() => []);
  for (let s = 0; s < 3; s++) {
    if (s > 0) await new Promise((resolve) => setTimeout(resolve, 100));
    for (const [i, id] of ids().entries()) {
      samples[i].push(processRssMiB(cluster.child(id).pid) ?? NaN);
    }
  }
  return samples.map(median);
}

/** Waits until every node has applied what the leader committed (≤ 20 s). */
async function settle(): Promise<void> {
  const leader = await cluster.waitForLeader(20_000);
  const target = (await cluster.status(leader, 5_000))?.commitIndex;
  if (target === undefined) throw new Error(`leader ${leader} did not answer`);
  const deadline = performance.now() + 20_000;
  while (performance.now() < deadline) {
    checkStopped();
    const statuses = await Promise.all(
      ids().map((id) => cluster.status(id, 2_000)),
    );
    if (statuses.every((s) => s !== null && s.appliedIndex >= target)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the nodes did not apply index ${target} within 20 s`);
}

/**
 * Connections to the leader for the fill and the fan-out's binds; after a
 * leader change ({@link Writers.reconnect}) they go to the new leader.
 */
class Writers {
  connections: RpcConnection[] = [];
  /** Leader changes seen while writing. */
  changes: string[] = [];
  #pending: Promise<void> | null = null;

  /** Dials the current leader (one redial at a time: callers share it). */
  reconnect(): Promise<void> {
    this.#pending ??= (async () => {
      for (const connection of this.connections) connection.close();
      const leader = await cluster.waitForLeader(20_000);
      this.connections = await Promise.all(
        Array.from(
          { length: FILL_IN_FLIGHT },
          () => dial(cluster.registry.get(leader)!),
        ),
      );
    })().finally(() => this.#pending = null);
    return this.#pending;
  }

  close(): void {
    for (const connection of this.connections) connection.close();
  }
}

/** Most times one batch of the fill is sent again after a leader change. */
const FILL_ATTEMPTS = 5;

/**
 * Binds `count` endpoints, the i-th as `bind(i)`, in batches over the
 * writers' connections to the leader; returns binds/s. A bind is
 * idempotent (the same id and URL again changes nothing), so members that
 * failed because leadership moved are sent again to the new leader, up to
 * {@link FILL_ATTEMPTS} times; any other failure throws.
 */
async function fill(
  writers: Writers,
  count: number,
  bind: (i: number) => { name: string; endpoint: Record<string, unknown> },
): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: FILL_IN_FLIGHT }, async (_, lane) => {
      while (next < count) {
        checkStopped();
        const first = next;
        next = Math.min(count, next + FILL_BATCH);
        let todo = Array.from({ length: next - first }, (_, k) => first + k);
        for (let attempt = 1; todo.length > 0; attempt++) {
          const connections = writers.connections;
          let answers;
          try {
            answers = await connections[lane % connections.length].batch(
              todo.map((i) => ({ method: "registry.bind", params: bind(i) })),
              { timeoutMs: 60_000 },
            );
          } catch (error) {
            answers = todo.map(() => ({ ok: false, error }) as const);
          }
          const failed = todo.filter((_, k) => !answers[k].ok);
          const first = answers.find((answer) => !answer.ok);
          if (first === undefined || first.ok) break;
          const why = String(first.error);
          if (
            attempt >= FILL_ATTEMPTS ||
            !/leader|Unavailable|closed|connection/i.test(why)
          ) {
            throw new Error(`a bind failed while filling: ${why}`);
          }
          if (writers.connections === connections) {
            writers.changes.push(why.slice(0, 160));
            await writers.reconnect();
          }
          // Another lane may be redialling already: wait for it.
          for (let k = 0; k < 3 && writers.connections === connections; k++) {
            await writers.reconnect();
          }
          todo = failed;
        }
      }
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

// --- lookups -------------------------------------------------------------------

type Consistency = "linearizable" | "serializable";

interface LookupTarget {
  label: string;
  name: string;
  consistency: Consistency;
  /** `registry.lookup`'s `limit` (a subset of the fleet); undefined: every endpoint. */
  limit?: number;
}

/** The subset size of the `limit` rows: what a client of a large fleet would ask for. */
const SUBSET = 100;

interface LookupRound {
  p50: number;
  p99: number;
  rate: number;
  bench: number | null;
  nodes: number | null;
}

/**
 * `LOOKUPS` sequential lookups of `target` (at most `LOOKUP_ROUND_MS`),
 * the i-th on `connections[i % 3]`; latencies in ms.
 */
async function lookupRound(
  connections: RpcConnection[],
  target: LookupTarget,
): Promise<LookupRound> {
  const times: number[] = [];
  const meter = new CpuMeter(nodePids());
  const started = performance.now();
  const end = started + LOOKUP_ROUND_MS;
  for (let i = 0; i < LOOKUPS && (i < 10 || performance.now() < end); i++) {
    const at = performance.now();
    const result = await connections[i % connections.length].call<
      LookupResult
    >("registry.lookup", {
      name: target.name,
      consistency: target.consistency,
      limit: target.limit,
    }, { timeoutMs: 10_000 });
    times.push(performance.now() - at);
    if (result.endpoints.length === 0) {
      throw new Error(`lookup of ${target.name} found no endpoint`);
    }
  }
  const wallMs = performance.now() - started;
  const shares = meter.shares();
  times.sort((a, b) => a - b);
  const nodeShares = ids().map((id) => shares.get(id) ?? null);
  return {
    p50: percentile(times, 0.5),
    p99: percentile(times, 0.99),
    rate: times.length / (wallMs / 1000),
    bench: shares.get("bench") ?? null,
    nodes: nodeShares.some((s) => s === null)
      ? null
      : nodeShares.reduce((a, b) => a! + b!, 0),
  };
}

/** Bytes of one lookup answer of `name` as read off the socket (frame included). */
async function answerBytes(
  url: string,
  name: string,
  limit?: number,
): Promise<number> {
  const counts: WireCounts = { written: 0, read: 0 };
  const connection = await dial(url, { dialer: countingDialer(counts) });
  try {
    await connection.call("registry.lookup", { name, limit });
    counts.read = 0;
    await connection.call("registry.lookup", { name, limit });
    return counts.read;
  } finally {
    connection.close();
  }
}

/** Alternating rounds of every target; one result per target (medians). */
async function lookupRows(
  connections: RpcConnection[],
  targets: LookupTarget[],
): Promise<Map<LookupTarget, LookupRound>> {
  // A warm-up lookup of each, so no round pays for the first one.
  for (const target of targets) {
    for (const connection of connections) {
      await connection.call("registry.lookup", {
        name: target.name,
        consistency: target.consistency,
        limit: target.limit,
      }, { timeoutMs: 10_000 });
    }
  }
  const rounds = await alternate(ROUNDS, targets, (target) => {
    checkStopped();
    return lookupRound(connections, target);
  });
  const pick = (results: LookupRound[], key: keyof LookupRound) =>
    median(results.map((r) => r[key] ?? NaN));
  return new Map(targets.map((target, i) => {
    const results = rounds[i];
    return [target, {
      p50: pick(results, "p50"),
      p99: pick(results, "p99"),
      rate: pick(results, "rate"),
      bench: pick(results, "bench"),
      nodes: pick(results, "nodes"),
    }];
  }));
}

// --- client memory -------------------------------------------------------------

interface ClientMemory {
  rssBefore: number;
  heapBefore: number;
  rssAfter: number;
  heapAfter: number;
  endpoints: number;
  loadMs: number;
  watched: boolean;
  cpuMs: number;
}

let clientRuns = 0;

/** Runs `bench/_scale_client.ts` over `name` and returns what it printed. */
async function clientMemory(name: string): Promise<ClientMemory> {
  const child = `client-${++clientRuns}`;
  await cluster.spawn(child, "bench/_scale_client.ts", [
    "--registry",
    cluster.registryUrls.join(","),
    "--name",
    name,
  ]);
  const line = await cluster.waitForLine(child, /^result /, 60_000);
  await cluster.child(child).exited;
  return JSON.parse(line.slice("result ".length)) as ClientMemory;
}

// --- watch fan-out -------------------------------------------------------------

/** A set of watchers of one prefix and what they saw of the current target. */
class FanOut {
  readonly prefix: string;
  readonly size: number;
  readonly #clients: RafterClient[] = [];
  readonly #watches: RegistryWatch[] = [];
  readonly #seenAt: Float64Array;
  #target = "";
  #seen = 0;
  #allSeen: (() => void) | null = null;

  constructor(prefix: string, size: number) {
    this.prefix = prefix;
    this.size = size;
    this.#seenAt = new Float64Array(size).fill(NaN);
    const urls = cluster.registryUrls;
    for (let w = 0; w < size; w++) {
      if (w % WATCHES_PER_CLIENT === 0) {
        const c = this.#clients.length;
        const client = connect([urls[c % urls.length]], { deadlineMs: 10_000 });
        this.#clients.push(client);
        opened.push(client);
      }
      const client = this.#clients[this.#clients.length - 1];
      this.#watches.push(client.watch(prefix, {}, (update) => {
        if (update.kind !== "events" || !Number.isNaN(this.#seenAt[w])) return;
        if (update.events.some((e) => e.endpoint.id === this.#target)) {
          this.#seenAt[w] = performance.now();
          if (++this.#seen === this.size) this.#allSeen?.();
        }
      }));
    }
  }

  /** Client objects (watch connections) the watchers use. */
  get connections(): number {
    return this.#clients.length;
  }

  /** Resolves once every watch is open (≤ 30 s). */
  async opened(): Promise<void> {
    const deadline = performance.now() + 30_000;
    while (this.#watches.some((watch) => watch.next === null)) {
      checkStopped();
      if (performance.now() > deadline) {
        throw new Error(
          `only ${
            this.#watches.filter((w) => w.next !== null).length
          } of ${this.size} watches of ${this.prefix} opened within 30 s`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /**
   * Binds `id` under the prefix through `writer` and times until every
   * watcher saw it: ms from the send to the ack, to the median watcher and
   * to the last one, with CPU shares over the round.
   */
  async round(writer: RafterClient, id: string) {
    this.#seenAt.fill(NaN);
    this.#seen = 0;
    this.#target = id;
    const everyone = new Promise<void>((resolve) => this.#allSeen = resolve);
    const meter = new CpuMeter(nodePids());
    const sent = performance.now();
    await writer.bind(`${this.prefix}svc`, { id, url: "tcp://127.0.0.1:9" });
    const acked = performance.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = await Promise.race([
      everyone.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), FANOUT_TIMEOUT_MS);
      }),
    ]);
    clearTimeout(timer);
    this.#allSeen = null;
    const shares = meter.shares();
    if (timedOut) {
      throw new Error(
        `${
          this.size - this.#seen
        } of ${this.size} watchers of ${this.prefix} did not see ${id} within ${FANOUT_TIMEOUT_MS} ms`,
      );
    }
    const times = [...this.#seenAt].map((at) => at - sent).sort((a, b) =>
      a - b
    );
    const nodes = ids().map((id) => shares.get(id) ?? null);
    return {
      ack: acked - sent,
      p50: percentile(times, 0.5),
      last: times[times.length - 1],
      bench: shares.get("bench") ?? null,
      nodes: nodes.some((s) => s === null)
        ? null
        : nodes.reduce((a, b) => a! + b!, 0),
    };
  }
}

// --- the run -------------------------------------------------------------------

async function run(): Promise<void> {
  await cluster.startRegistry(3);
  const firstLeader = await cluster.waitForLeader(20_000);
  const endpointUrl = cluster.registry.get("n1")!;
  const writers = new Writers();
  await writers.reconnect();
  opened.push(writers);
  const readers = await Promise.all(cluster.registryUrls.map((u) => dial(u)));
  opened.push(...readers);

  // 1. Registry memory, stage by stage.
  const memoryRows: Row[] = [];
  const memoryRow = async (label: string, rate: number | null) => {
    await settle();
    const rss = await nodeRss();
    const total = rss.reduce((a, b) => a + b, 0);
    const empty = memoryRows.length === 0 ? total : memoryRows[0].cells[3];
    memoryRows.push({
      label,
      cells: [...rss, total, ratio(total, empty as number), rate],
    });
  };
  await memoryRow("empty", null);
  for (const size of SIZES) {
    const rate = await fill(writers, size.count, (i) => ({
      name: size.name,
      endpoint: {
        id: `e${i}`,
        url: endpointUrl,
        attrs: { version: "1.0" },
        zone: `z${i % 3}`,
      },
    }));
    await memoryRow(
      `+ ${size.label} under one name`,
      size.count >= 1_000 ? rate : null,
    );
  }

  // 2. Lookups before the 100k names.
  const targets: LookupTarget[] = (["linearizable", "serializable"] as const)
    .flatMap((consistency) => [
      ...SIZES.map((size) => ({
        label: size.label,
        name: size.name,
        consistency,
      })),
      ...SIZES.slice(1).map((size) => ({
        label: `${size.label}, limit ${SUBSET} (a subset)`,
        name: size.name,
        consistency,
        limit: SUBSET,
      })),
    ]);
  const before = await lookupRows(readers, targets);
  const bytes = new Map<string, number>();
  const bytesKey = (t: { name: string; limit?: number }) =>
    `${t.name}|${t.limit ?? ""}`;
  for (const target of targets) {
    if (!bytes.has(bytesKey(target))) {
      bytes.set(
        bytesKey(target),
        await answerBytes(readers[0].url, target.name, target.limit),
      );
    }
  }

  // 3. Client memory with a 1- and a 10k-endpoint cluster map.
  const clientNames = [SIZES[0], SIZES[2]];
  const clientRounds = await alternate(
    ROUNDS,
    clientNames,
    (size) => {
      checkStopped();
      return clientMemory(size.name);
    },
  );

  // 4. Watch fan-out: 1 watcher vs WATCHERS watchers.
  const fans = [new FanOut("fan/one/", 1), new FanOut("fan/many/", WATCHERS)];
  await Promise.all(fans.map((fan) => fan.opened()));
  const fanWriter = connect(cluster.registryUrls, { deadlineMs: 10_000 });
  opened.push(fanWriter);
  for (const fan of fans) await fan.round(fanWriter, "warm-up");
  const fanRounds = await alternate(FANOUT_ROUNDS, fans, (fan, round) => {
    checkStopped();
    return fan.round(fanWriter, `r${round}`);
  });

  // 5. 100k names of one endpoint each, then lookups again.
  const namesRate = await fill(writers, NAMES, (i) => ({
    name: nameOf(i),
    endpoint: { id: "e0", url: endpointUrl, attrs: { version: "1.0" } },
  }));
  await memoryRow(
    `+ ${NAMES.toLocaleString("en-US")} names, 1 endpoint each`,
    namesRate,
  );
  const among = `${NAMES >= 1000 ? `${NAMES / 1000}k` : NAMES} names`;
  const lateTargets: LookupTarget[] =
    (["linearizable", "serializable"] as const)
      .flatMap((consistency) => [
        {
          label: `1 endpoint, ${among} in the registry`,
          name: SIZES[0].name,
          consistency,
        },
        {
          label: `one of the ${among} (1 endpoint)`,
          name: nameOf(Math.floor(NAMES / 2)),
          consistency,
        },
      ]);
  const after = await lookupRows(readers, lateTargets);
  const lateBytes = await answerBytes(
    readers[0].url,
    nameOf(Math.floor(NAMES / 2)),
  );

  // The tables.
  const leader = await cluster.waitForLeader(20_000);
  if (writers.changes.length > 0 || leader !== firstLeader) {
    report.note(
      `scale: the leader changed during the run (${firstLeader} at the start, ${leader} at the end; the fill sent ${writers.changes.length} batch(es) again after: ${
        [
          ...new Set(
            writers.changes.map((why) => why.replace(/index \d+/, "index …")),
          ),
        ].join("; ")
      }): the leader's heartbeats came late under the fill (a busy machine, or a long pause of the leader's event loop)`,
    );
  }
  report.table({
    scenario: "scale",
    title: "Registry memory (RSS of each node), filled stage by stage",
    note:
      `3 registry nodes (LocalCluster, fsync on); each stage adds to the last. RSS: the median of 3 samples 100 ms apart once every node applied the stage (garbage not collected first, so it includes V8's slack). Fill: registry.bind in JSON-RPC batches of ${FILL_BATCH}, ${FILL_IN_FLIGHT} in flight to the leader; every bind is its own Raft write. One fill per stage (cumulative state), not alternated.`,
    columns: [
      ...ids().map((id) => ({
        name: `${id}${id === leader ? " (leader)" : ""} RSS`,
        unit: "MiB" as const,
      })),
      { name: "3 nodes RSS", unit: "MiB" },
      { name: "vs empty", unit: "×" },
      { name: "fill binds/s", unit: "/s" },
    ],
    rows: memoryRows,
  });

  for (const consistency of ["linearizable", "serializable"] as const) {
    const base = before.get(
      targets.find((t) =>
        t.consistency === consistency && t.name === SIZES[0].name
      )!,
    )!;
    const rows: Row[] = [];
    const push = (label: string, r: LookupRound, answer: number) =>
      rows.push({
        label,
        cells: [
          answer,
          r.p50,
          r.p99,
          ratio(r.p99, base.p99),
          r.rate,
          r.bench,
          r.nodes,
        ],
      });
    for (const target of targets.filter((t) => t.consistency === consistency)) {
      push(target.label, before.get(target)!, bytes.get(bytesKey(target))!);
    }
    for (
      const target of lateTargets.filter((t) => t.consistency === consistency)
    ) {
      push(
        target.label,
        after.get(target)!,
        target.name === SIZES[0].name
          ? bytes.get(bytesKey(target))!
          : lateBytes,
      );
    }
    report.table({
      scenario: "scale",
      title:
        `registry.lookup, ${consistency}: 1 to 10k endpoints under a name, and 100k names`,
      note:
        `Sequential lookups (rotation on, the default), spread over the 3 nodes in turn, over one kept-open connection each, ${LOOKUPS} a row and round (at most ${
          LOOKUP_ROUND_MS / 1000
        } s); medians of ${ROUNDS} alternating rounds. Latency as the client sees it, decoding the answer included. The last two rows are measured after the names stage, alternating with each other; their ratio is to the first row. Target: the 10k row's p99 within 2× of the 1-endpoint row's. The limit rows ask for a subset of the fleet (registry.lookup { limit: ${SUBSET} }), as a client of a large fleet would: their answer is the same size whatever the fleet's, so they show what the registry's own work costs as a name grows. CPU: % of one core over the round (registry: n1+n2+n3).`,
      columns: [
        { name: "bytes per answer", unit: "bytes" },
        { name: "p50", unit: "ms" },
        { name: "p99", unit: "ms" },
        { name: "p99 vs 1 endpoint", unit: "×" },
        { name: "lookups/s", unit: "/s" },
        { name: "bench CPU", unit: "%" },
        { name: "registry CPU", unit: "%" },
      ],
      rows,
    });
    const tenK = rows[2].cells;
    const p99Ratio = tenK[3] as number;
    report.note(
      `scale: ${consistency} lookup p99 with 10k endpoints is ${
        p99Ratio.toFixed(1)
      }× the 1-endpoint name's, p50 ${
        ((tenK[1] as number) / (rows[0].cells[1] as number)).toFixed(1)
      }× (p99 target ≤ 2×: ${
        p99Ratio <= 2 ? "met" : "missed"
      }); its answer is ${
        ((tenK[0] as number) / (rows[0].cells[0] as number)).toFixed(0)
      }× the bytes (${
        ((tenK[0] as number) / 2 ** 20).toFixed(1)
      } MiB), encoded by the node and decoded by the client on every lookup, so its time grows with the endpoints, not with the registry's size (compare the last two rows).`,
    );
    const subset = rows[4].cells[3] as number;
    report.note(
      `scale: ${consistency} lookup of a ${SUBSET}-endpoint subset of 10k endpoints (limit ${SUBSET}): p99 ${
        subset.toFixed(1)
      }× the 1-endpoint name's (target ≤ 2×: ${
        subset <= 2 ? "met" : "missed"
      }).`,
    );
  }

  const clientCell = (results: ClientMemory[], key: keyof ClientMemory) =>
    median(results.map((r) => Number(r[key])));
  const baseRss = clientCell(clientRounds[0], "rssAfter");
  report.table({
    scenario: "scale",
    title: "Client memory with a cluster map of 1 and of 10k endpoints",
    note:
      `A fresh client process (bench/_scale_client.ts) per round: connect(), one rpc.ping through a cluster stub of the name (its map: a linearizable lookup of every endpoint, then a watch), then garbage collected twice before reading RSS and the V8 heap in use. Medians of ${ROUNDS} alternating rounds. CPU: the client process's whole life.`,
    columns: [
      { name: "endpoints in the map", unit: "count" },
      { name: "RSS before connect", unit: "MiB" },
      { name: "RSS", unit: "MiB" },
      { name: "RSS vs 1 endpoint", unit: "×" },
      { name: "V8 heap used", unit: "MiB" },
      { name: "first call (map filled) ms", unit: "ms" },
      { name: "client CPU ms", unit: "ms" },
    ],
    rows: clientNames.map((size, i) => {
      const results = clientRounds[i];
      if (results.some((r) => !r.watched || r.endpoints !== size.count)) {
        throw new Error(
          `a client's map of ${size.name} held ${
            results.map((r) => r.endpoints).join("/")
          } endpoints (watched: ${
            results.map((r) => r.watched).join("/")
          }), not ${size.count}`,
        );
      }
      return {
        label: `cluster map of ${size.label}`,
        cells: [
          clientCell(results, "endpoints"),
          clientCell(results, "rssBefore"),
          clientCell(results, "rssAfter"),
          ratio(clientCell(results, "rssAfter"), baseRss),
          clientCell(results, "heapAfter"),
          clientCell(results, "loadMs"),
          clientCell(results, "cpuMs"),
        ],
      };
    }),
  });

  const fanCell = (
    i: number,
    key: "ack" | "p50" | "last" | "bench" | "nodes",
  ) => median(fanRounds[i].map((r) => r[key] ?? NaN));
  report.table({
    scenario: "scale",
    title: `Watch fan-out: time until ${
      WATCHERS.toLocaleString("en-US")
    } watchers see one bind`,
    note:
      `Watchers of a prefix opened with RafterClient.watch, ${WATCHES_PER_CLIENT} per client object (its own watch connection, to n1, n2, n3 in turn), all in the bench process; each round binds one new id under each prefix in turn through the leader (one warm-up round, then ${FANOUT_ROUNDS} alternating rounds; medians). Times from the send; a watcher has seen the bind when its callback runs, so the last watcher's time includes this process decoding every notification (its CPU is the bench column).`,
    columns: [
      { name: "watch connections", unit: "count" },
      { name: "send → ack", unit: "ms" },
      { name: "median watcher", unit: "ms" },
      { name: "last watcher", unit: "ms" },
      { name: "last vs 1 watcher", unit: "×" },
      { name: "bench CPU", unit: "%" },
      { name: "registry CPU", unit: "%" },
    ],
    rows: fans.map((fan, i) => ({
      label: `${fan.size.toLocaleString("en-US")} watcher${
        fan.size === 1 ? "" : "s"
      }`,
      cells: [
        fan.connections,
        fanCell(i, "ack"),
        fanCell(i, "p50"),
        fanCell(i, "last"),
        ratio(fanCell(i, "last"), fanCell(0, "last")),
        fanCell(i, "bench"),
        fanCell(i, "nodes"),
      ],
    })),
  });
}

let exitCode = 0;
try {
  if (scenarios.has("scale")) await run();
} catch (error) {
  const reason = stop.signal.aborted ? stop.signal.reason : error;
  console.error("bench/scale.ts failed:", reason);
  exitCode = (reason as Error)?.message === "interrupted" ? 130 : 1;
} finally {
  for (const thing of opened) thing.close();
  await cluster.stop();
  clearTimeout(budget);
  Deno.removeSignalListener("SIGINT", onSignal);
  Deno.removeSignalListener("SIGTERM", onSignal);
}
await report.finish();
Deno.exit(exitCode);
