/**
 * The demo's scenario, shared by `deno task demo` and the end-to-end test:
 * a 3-node registry and 2 hello servers as real processes (each bound with
 * a 2 s lease it keeps alive), a client calling `hello` continuously, then
 * a hello server killed (its lease expires and it leaves every node's
 * stubs list), the registry leader killed, a third server bound (the
 * client's cluster map learns it from the registry watch, no polling), and
 * the killed registry node restarted from its data folder.
 *
 * With `secure: true` (`deno task demo -- --secure`) the same story runs
 * with TLS on every link and tokens on: certificates from a throw-away CA
 * in the cluster's data folder, peer mutual TLS with member
 * certificates, `--auth` on every node; the demo makes the tokens with
 * the bootstrap admin token, the hello servers bind with a `bind:hello`
 * token and the clients (and the demo's lookups) use a `read:hello` one.
 *
 * @module
 */

import { connect } from "../../stub/client.ts";
import { connect as connectTls } from "../../adapter/deno/mod.ts";
import { roundRobin } from "../../stub/distributors/round_robin.ts";
import type { LookupResult } from "../../protocol/registry.ts";
import type { Hello } from "../hello/server.ts";
import {
  HELLO_SERVER_PERMISSIONS,
  LocalCluster,
} from "../../testing/cluster.ts";

/** When each event happens, in ms after the client starts calling. */
export interface Timeline {
  killServerAt: number;
  killLeaderAt: number;
  bindThirdAt: number;
  restartNodeAt: number;
  endAt: number;
}

/** The default timeline: about 12 s of calls. */
export const DEFAULT_TIMELINE: Timeline = {
  killServerAt: 2000,
  killLeaderAt: 4500,
  bindThirdAt: 7000,
  restartNodeAt: 9000,
  endAt: 12000,
};

/** Lease TTL of the demo's hello servers, ms. */
export const DEMO_TTL_MS = 2000;

/** Options of {@link runScenario}. */
export interface ScenarioOptions {
  timeline?: Timeline;
  /** Concurrent callers. Default 2. */
  callers?: number;
  /** Receives the progress lines (one per second, plus events). */
  log?(line: string): void;
  /** Stops the scenario early (e.g. on Ctrl-C); cleanup still runs. */
  signal?: AbortSignal;
  /** TLS on every link and tokens on (see the module's text). Default false. */
  secure?: boolean;
}

/** The permissions of the demo's client token (secure runs). */
export const DEMO_CLIENT_PERMISSIONS = ["read:hello"];

/** What happened, for the summary line and the test's assertions. */
export interface ScenarioResult {
  calls: number;
  failed: number;
  /** First few failure messages. */
  failures: string[];
  /** Server id → calls it answered. */
  answeredBy: Record<string, number>;
  /** Which hello server was killed. */
  killedServer: string;
  /** Registry leader before the kill, and the one after. */
  killedLeader: string;
  newLeader: string | null;
  /** Time from the leader kill until a new leader was seen, ms. */
  failoverMs: number | null;
  /** Whether hello-3 bound itself after the leader kill. */
  thirdBound: boolean;
  /**
   * Registry node id → ms from the SIGKILL of hello-1 until that node's
   * lookups no longer listed it (nodes that were down meanwhile: absent).
   */
  serverGoneMs: Record<string, number>;
  /** Ms from hello-3's bind until the client's first call it answered, or null. */
  thirdReachedMs: number | null;
  /** Linearizable lookups of `hello` on every node at the end, by node id. */
  lookups: Record<string, LookupResult | string>;
  /** Serializable lookup on the restarted node, taken before any other request to it. */
  restartedLookup: LookupResult | string | null;
  /** Whether the scenario ran to its end (not aborted). */
  completed: boolean;
}

/** Runs the scenario and always stops every process it started. */
export async function runScenario(
  options: ScenarioOptions = {},
): Promise<ScenarioResult> {
  const timeline = options.timeline ?? DEFAULT_TIMELINE;
  const log = options.log ?? (() => {});
  const secure = options.secure === true;
  const cluster = new LocalCluster({ secure });
  const result: ScenarioResult = {
    calls: 0,
    failed: 0,
    failures: [],
    answeredBy: {},
    killedServer: "hello-1",
    killedLeader: "",
    newLeader: null,
    failoverMs: null,
    thirdBound: false,
    serverGoneMs: {},
    thirdReachedMs: null,
    lookups: {},
    restartedLookup: null,
    completed: false,
  };
  const client = { close() {} } as { close(): void };
  let stopCalls = false;
  const loops: Promise<void>[] = [];
  try {
    log("starting 3 registry nodes…");
    if (secure) {
      log(
        `secure: TLS on every link with certificates from a throw-away CA (${await cluster
          .caFile()}): the client ports serve TLS, the peer ports mutual TLS with member certificates (rafter://member/<id>); every node runs with --auth`,
      );
    }
    await cluster.startRegistry(3);
    const leader = await cluster.waitForLeader();
    let readToken: string | undefined;
    if (secure) {
      await cluster.adminToken();
      await cluster.helloToken();
      const reader = await cluster.createToken(
        "demo-client",
        DEMO_CLIENT_PERMISSIONS,
      );
      readToken = reader.token;
      log(
        `tokens: the demo uses the bootstrap admin token (${await cluster
          .adminTokenFile()}) to make the others and for its status polls; hello servers bind with a ${
          HELLO_SERVER_PERMISSIONS.join(",")
        } token (RAFTER_TOKEN); the clients and the demo's lookups use a ${
          DEMO_CLIENT_PERMISSIONS.join(",")
        } token (${reader.tokenId})`,
      );
    }
    log(`registry leader: ${leader}; starting hello-1 and hello-2…`);
    const helloArgs = ["--ttl-ms", String(DEMO_TTL_MS)];
    const servers = await Promise.all([
      cluster.startHello("hello-1", helloArgs),
      cluster.startHello("hello-2", helloArgs),
    ]);
    if (secure) {
      const urls = servers.map((child) =>
        /serving on ([a-z]+:\/\/[^\s,]+)/.exec(child.output.join("\n"))?.[1] ??
          "?"
      );
      log(
        `secure: registry at ${
          cluster.registryUrls.join(", ")
        }; hello servers at ${urls.join(", ")}`,
      );
    }
    const rafter = secure
      ? connectTls(cluster.registryUrls, {
        tls: { caFile: await cluster.caFile() },
        token: readToken,
      })
      : connect(cluster.registryUrls);
    client.close = () => rafter.close();
    // greet has no side effects, so a call caught in flight by a server's
    // death may safely run again on another server.
    const hello = rafter.stub<Hello>("hello", {
      distributor: roundRobin(),
      idempotent: ["greet"],
    });

    const started = Date.now();
    const elapsed = () => Date.now() - started;
    let thirdBoundAt: number | null = null;
    let second = { ok: 0, failed: 0, by: {} as Record<string, number> };
    const caller = async () => {
      while (!stopCalls) {
        try {
          const { server } = await hello.greet("demo");
          result.calls++;
          second.ok++;
          result.answeredBy[server] = (result.answeredBy[server] ?? 0) + 1;
          if (
            server === "hello-3" && thirdBoundAt !== null &&
            result.thirdReachedMs === null
          ) {
            result.thirdReachedMs = Date.now() - thirdBoundAt;
            log(
              `event: hello-3 answered its first call ${result.thirdReachedMs} ms after it bound (the clients learnt it from the registry watch, no polling)`,
            );
          }
          second.by[server] = (second.by[server] ?? 0) + 1;
        } catch (error) {
          result.calls++;
          result.failed++;
          second.failed++;
          if (result.failures.length < 5) {
            result.failures.push((error as Error).message);
          }
          await new Promise((r) => setTimeout(r, 10));
        }
      }
    };
    loops.push(...Array.from({ length: options.callers ?? 2 }, caller));

    let currentLeader: string | null = leader;
    let tick = 0;
    loops.push((async () => {
      while (!stopCalls) {
        await sleep(1000 - (elapsed() % 1000));
        if (stopCalls) break;
        tick++;
        currentLeader = await cluster.leader();
        const by = Object.entries(second.by).sort()
          .map(([id, n]) => `${id}=${n}`).join(" ") || "none";
        log(
          `t=${String(tick).padStart(2)}s  ok ${
            String(second.ok).padStart(5)
          }  failed ${second.failed}  answered ${by}  registry leader ${
            currentLeader ?? "(electing)"
          }`,
        );
        second = { ok: 0, failed: 0, by: {} };
      }
    })());

    const at = async (ms: number) => {
      const wait = ms - elapsed();
      if (wait > 0) await sleep(wait, options.signal);
    };

    await at(timeline.killServerAt);
    log(
      `event: SIGKILL hello-1 (pid ${
        cluster.child("hello-1").pid
      }); its lease (TTL ${DEMO_TTL_MS} ms) is no longer kept alive`,
    );
    const serverKilledAt = Date.now();
    await cluster.kill("hello-1", "SIGKILL");
    loops.push(
      watchServerLeave(
        cluster,
        readToken,
        serverKilledAt,
        result,
        log,
        () => stopCalls,
      ),
    );

    await at(timeline.killLeaderAt);
    const doomed = (await cluster.leader()) ?? leader;
    result.killedLeader = doomed;
    log(
      `event: SIGKILL registry leader ${doomed} (pid ${
        cluster.child(doomed).pid
      })`,
    );
    const killedAt = Date.now();
    await cluster.kill(doomed, "SIGKILL");
    const newLeader = await cluster.waitForLeader(10_000);
    result.newLeader = newLeader;
    result.failoverMs = Date.now() - killedAt;
    log(`event: ${newLeader} leads the registry after ${result.failoverMs} ms`);

    await at(timeline.bindThirdAt);
    log("event: starting hello-3, which binds itself through the new leader");
    await cluster.startHello("hello-3", ["--ttl-ms", String(DEMO_TTL_MS)]);
    thirdBoundAt = Date.now();
    result.thirdBound = true;

    await at(timeline.restartNodeAt);
    log(`event: restarting ${doomed} from its data folder`);
    await cluster.startNode(doomed);
    result.restartedLookup = await lookupOn(
      cluster,
      doomed,
      readToken,
      "serializable",
      3000,
      (r) =>
        r.endpoints.some((e) => e.id === "hello-3") &&
        !r.endpoints.some((e) => e.id === "hello-1"),
    );

    await at(timeline.endAt);
    stopCalls = true;
    await Promise.all(loops);
    for (const id of cluster.registry.keys()) {
      result.lookups[id] = await lookupOn(
        cluster,
        id,
        readToken,
        "linearizable",
        3000,
      );
    }
    result.completed = true;
    return result;
  } catch (error) {
    if (options.signal?.aborted) return result;
    throw error;
  } finally {
    stopCalls = true;
    await Promise.all(loops);
    client.close();
    await cluster.stop();
  }
}

/**
 * Polls every running registry node (serializable lookups, every 50 ms)
 * until none lists hello-1, noting when each stopped listing it.
 */
async function watchServerLeave(
  cluster: LocalCluster,
  token: string | undefined,
  killedAt: number,
  result: ScenarioResult,
  log: (line: string) => void,
  stopped: () => boolean,
): Promise<void> {
  const pending = new Set(cluster.registry.keys());
  while (pending.size > 0 && !stopped()) {
    for (const id of [...pending]) {
      if (!cluster.child(id).running) continue;
      const lookup = await lookupOn(
        cluster,
        id,
        token,
        "serializable",
        300,
      );
      if (
        typeof lookup !== "string" &&
        !lookup.endpoints.some((e) => e.id === "hello-1")
      ) {
        pending.delete(id);
        result.serverGoneMs[id] = Date.now() - killedAt;
      }
    }
    const running = [...pending].filter((id) => cluster.child(id).running);
    if (running.length === 0 && Object.keys(result.serverGoneMs).length > 0) {
      break;
    }
    await sleep(50);
  }
  const gone = Object.entries(result.serverGoneMs).sort()
    .map(([id, ms]) => `${id} after ${ms} ms`).join(", ");
  if (gone !== "") {
    log(
      `event: hello-1 left the stubs list (its lease expired): ${gone} (TTL ${DEMO_TTL_MS} ms)`,
    );
  }
}

/**
 * Looks `hello` up on registry node `id` (authenticated with `token` when
 * given), retrying until `accept` holds or `timeoutMs` passes; returns the
 * last answer or error message.
 */
async function lookupOn(
  cluster: LocalCluster,
  id: string,
  token: string | undefined,
  consistency: "linearizable" | "serializable",
  timeoutMs: number,
  accept: (result: LookupResult) => boolean = () => true,
): Promise<LookupResult | string> {
  const deadline = Date.now() + timeoutMs;
  let last: LookupResult | string = "no answer";
  while (Date.now() < deadline) {
    try {
      const connection = await cluster.dialNode(id, {
        token,
        timeoutMs: 500,
      });
      try {
        last = await connection.call<LookupResult>("registry.lookup", {
          name: "hello",
          consistency,
        }, { timeoutMs: 1000 });
      } finally {
        connection.close();
      }
      if (accept(last)) return last;
    } catch (error) {
      last = (error as Error).message;
    }
    await sleep(100);
  }
  return last;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The one-line summary the demo ends with. */
export function summaryLine(result: ScenarioResult): string {
  const by = Object.entries(result.answeredBy).sort()
    .map(([id, n]) => `${id} ${n}`).join(", ");
  const nodes = Object.entries(result.lookups).map(([id, lookup]) =>
    typeof lookup === "string"
      ? `${id}: ${lookup}`
      : `${id}: ${
        lookup.endpoints.map((e) => e.id).join("+")
      }@rev${lookup.revision}`
  ).join(", ");
  const gone = Object.values(result.serverGoneMs);
  return `summary: ${result.calls} calls, ${result.failed} failed, answered by ${
    by || "nobody"
  }; hello-1 left the stubs list ${
    gone.length === 0
      ? "(not seen)"
      : `within ${Math.max(...gone)} ms of its SIGKILL`
  } (TTL ${DEMO_TTL_MS} ms); registry leader ${
    result.killedLeader || "?"
  } killed, ${result.newLeader ?? "no one"} led after ${
    result.failoverMs ?? "?"
  } ms; ${
    !result.thirdBound
      ? result.completed ? "hello-3 NOT bound" : "hello-3 not started yet"
      : `hello-3 bound after the leader kill and answered ${
        result.thirdReachedMs === null
          ? "no call"
          : `${result.thirdReachedMs} ms later (watch)`
      }`
  }; lookups ${nodes || "not taken"}${
    result.completed ? "" : " (interrupted)"
  }`;
}
