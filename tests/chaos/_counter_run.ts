/**
 * One chaos run of the replicated counter (examples/replicated/), run by
 * `counter_e2e_test.ts` inside the client namespace of a chaos network
 * (`netns.ts`, its description in the environment): three replicas, each
 * in its own namespace, under kills, pauses and partitions; four clients
 * adding (each add with its own `requestId`, retried on the leader it is
 * pointed to until it is acknowledged or its 8 s run out) and reading
 * (`get`, linearizable) the counter. Every operation goes in a history
 * with its invocation and completion times (`unknown` when an add was
 * never acknowledged: it may or may not be applied), and the history is
 * checked against a counter's sequential specification (Wing & Gong,
 * `checker/wgl.ts`).
 *
 * Prints one JSON line, `result {…}`, and exits 0 when the history is
 * linearizable, 1 when it is not, 2 when the run could not be made.
 *
 * @module
 */

import { LocalCluster } from "../../testing/cluster.ts";
import { seeded } from "../../testing/prng.ts";
import { dial } from "../../adapter/deno/mod.ts";
import type { RpcConnection } from "../../rpc/client/connection.ts";
import { RpcError } from "../../rpc/errors.ts";
import { ChaosNetwork } from "./netns.ts";
import { checkLinearizable, type WglOperation } from "./checker/wgl.ts";
import { type CounterInput, counterModel } from "./checker/counter_model.ts";

const [seconds, seed] = Deno.args.map(Number);
const network = ChaosNetwork.fromEnv();
const ids = network.nodes.slice(0, 3);
const random = seeded(seed);
const SECRET = "chaos-counter-secret-0123456789abcdef";
const PEER_PORT = 7301;
const CLIENT_PORT = 7401;

const peers = ids.map((id) => `${id}=${network.addressOf(id)}:${PEER_PORT}`)
  .join(",");
const clientUrls = new Map(
  ids.map((id) => [id, `tcp://${network.addressOf(id)}:${CLIENT_PORT}`]),
);
const log: string[] = [];
const note = (line: string) => log.push(`${Date.now()} ${line}`);
const cluster = new LocalCluster({
  wrapperOf: (name) => network.execIn(name),
  childEnv: () => ({ RAFTER_SERVICE_SECRET: SECRET }),
  onOutput: (name, line) => note(`${name}: ${line}`),
});
const dataDirs = new Map<string, string>();

async function start(id: string): Promise<void> {
  dataDirs.set(id, dataDirs.get(id) ?? await Deno.makeTempDir());
  await cluster.spawn(id, "examples/replicated/replica.ts", [
    "--id",
    id,
    "--peers",
    peers,
    "--data",
    dataDirs.get(id)!,
    "--host",
    network.addressOf(id),
    "--port",
    String(CLIENT_PORT),
    "--no-bind",
    "--tick-ms",
    "50",
  ], /ready on/);
}

type Input = CounterInput;
type Op = WglOperation<Input, number> & { client: number };

/** One connection per replica, dialled again when it broke. */
const connections = new Map<string, Promise<RpcConnection>>();
function connection(id: string): Promise<RpcConnection> {
  let open = connections.get(id);
  if (open === undefined) {
    open = dial(clientUrls.get(id)!, { connectTimeoutMs: 500 });
    open.catch(() => connections.delete(id));
    connections.set(id, open);
  }
  return open;
}
function dropConnection(id: string): void {
  const open = connections.get(id);
  connections.delete(id);
  open?.then((c) => c.close(), () => {});
}

let leaderGuess: string | null = null;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Calls `method` until a replica answers it, following NOT_LEADER hints,
 * within `budgetMs`; the answer, or undefined when none came.
 */
async function untilAnswered(
  method: string,
  params: Record<string, unknown>,
  budgetMs: number,
): Promise<number | undefined> {
  const until = performance.now() + budgetMs;
  for (let round = 0; round < 1_000 && performance.now() < until; round++) {
    const target = leaderGuess ?? ids[Math.floor(random() * ids.length)];
    try {
      const conn = await connection(target);
      const value = await conn.call(method, params, {
        timeoutMs: Math.max(1, Math.min(1_500, until - performance.now())),
      });
      if (method === "add") leaderGuess = target;
      return value as number;
    } catch (error) {
      if (error instanceof RpcError && error.code === -32001) {
        const hint = (error.data as { leaderId?: string | null })?.leaderId;
        leaderGuess = hint && hint !== target ? hint : null;
        if (leaderGuess === null) await sleep(20);
        continue;
      }
      // Refused, timed out, cut off, UNAVAILABLE: another replica.
      if (!(error instanceof RpcError) || error.code !== -32006) {
        dropConnection(target);
      }
      if (leaderGuess === target) leaderGuess = null;
      await sleep(20);
    }
  }
  return undefined;
}

const history: Op[] = [];
let stopped = false;

async function client(c: number): Promise<void> {
  for (let n = 0; n < 1_000_000 && !stopped; n++) {
    const isAdd = random() < 0.6;
    const input: Input = isAdd
      ? { f: "add", requestId: `c${c}-${n}` }
      : { f: "get" };
    const call = performance.now();
    const value = isAdd
      ? await untilAnswered("add", {
        counter: "n",
        by: 1,
        requestId: (input as { requestId: string }).requestId,
      }, 8_000)
      : await untilAnswered("get", { counter: "n" }, 3_000);
    if (value === undefined) {
      // A read with no answer says nothing; an add may have been applied.
      if (isAdd) history.push({ client: c, input, call, return: null });
    } else {
      history.push({
        client: c,
        input,
        output: value,
        call,
        return: performance.now(),
      });
    }
  }
}

/** One fault, held 1–3 s, then healed; what it was. */
async function fault(): Promise<string> {
  const kinds = ["kill", "pause", "partition", "isolate", "one-way"] as const;
  const kind = kinds[Math.floor(random() * kinds.length)];
  const target = ids[Math.floor(random() * ids.length)];
  const holdMs = 1_000 + Math.floor(random() * 2_000);
  note(`nemesis: ${kind} ${target} for ${holdMs} ms`);
  switch (kind) {
    case "kill":
      await cluster.kill(target, "SIGKILL");
      await sleep(holdMs);
      await start(target);
      break;
    case "pause":
      cluster.pause(target);
      await sleep(holdMs);
      cluster.resume(target);
      break;
    case "partition": {
      const others = ids.filter((id) => id !== target);
      await network.partition([[target, others[0]], [others[1]]]);
      await sleep(holdMs);
      await network.heal();
      break;
    }
    case "isolate":
      await network.isolate(target);
      await sleep(holdMs);
      await network.heal();
      break;
    case "one-way": {
      const other = ids.find((id) => id !== target)!;
      await network.cut(target, other);
      await sleep(holdMs);
      await network.heal();
      break;
    }
  }
  note(`nemesis: healed ${kind} ${target}`);
  return `${kind} ${target}`;
}

let exitCode = 2;
try {
  await Promise.all(ids.map(start));
  const clients = Array.from({ length: 4 }, (_, c) => client(c));
  const faults: string[] = [];
  const faultsUntil = performance.now() + seconds * 1_000;
  for (let i = 0; i < 10_000 && performance.now() < faultsUntil; i++) {
    await sleep(500 + Math.floor(random() * 1_500));
    faults.push(await fault());
  }
  // Healed: a few quiet seconds, then the last reads.
  await sleep(3_000);
  stopped = true;
  await Promise.all(clients);
  const finalCall = performance.now();
  const final = await untilAnswered("get", { counter: "n" }, 20_000);
  if (final !== undefined) {
    history.push({
      client: -1,
      input: { f: "get" },
      output: final,
      call: finalCall,
      return: performance.now(),
    });
  }
  const acknowledged = history.filter((op) =>
    op.input.f === "add" && op.output !== undefined
  ).length;
  const unknown = history.filter((op) => op.return === null).length;
  const reads = history.filter((op) => op.input.f === "get").length;
  const check = checkLinearizable(counterModel, history, { maxMs: 60_000 });
  const result = {
    ok: check.ok,
    operations: history.length,
    acknowledged,
    unknown,
    reads,
    final: final ?? null,
    faults,
    configurations: check.configurations,
    ...(check.ok === false
      ? {
        stuckAt: history[check.stuckAt],
        deepest: check.deepest,
      }
      : {}),
    ...(check.ok === "unknown" ? { reason: check.reason } : {}),
  };
  console.log(`result ${JSON.stringify(result)}`);
  exitCode = check.ok === true && final !== undefined && final >= acknowledged
    ? 0
    : 1;
  if (exitCode !== 0) console.log(log.slice(-200).join("\n"));
} catch (error) {
  console.log(`the run could not be made: ${(error as Error).stack}`);
  console.log(log.slice(-100).join("\n"));
} finally {
  stopped = true;
  for (const id of connections.keys()) dropConnection(id);
  await cluster.stop().catch(() => {});
  for (const dir of dataDirs.values()) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
Deno.exit(exitCode);
