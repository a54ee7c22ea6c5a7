/**
 * The answered path of a stub's call without a socket: a connection that
 * answers at once (or fails as told), so the test sees exactly what the
 * stub hands the distributor and the connection.
 */

import assert from "node:assert/strict";
import { ConnectionError } from "../../rpc/errors.ts";
import type { RpcConnection } from "../../rpc/client/connection.ts";
import { makeEndpoint } from "../../protocol/registry.ts";
import type {
  CallInfo,
  Candidate,
  Distributor,
} from "../distributors/distributor.ts";
import { HealthBook } from "../cluster_map/endpoint_health.ts";
import { fixedMap } from "./_test_util.ts";
import { delay } from "../../testing/time.ts";
import { ClusterStub, type StubOptions } from "./cluster_stub.ts";

interface Sent {
  url: string;
  method: string;
  params: unknown;
  options: { timeoutMs: number; signal: AbortSignal | undefined };
}

/**
 * A stub of "svc" over `ids` (at made-up URLs, never dialed), whose
 * connections record what they are sent and answer `{ url }`, or fail
 * with a `ConnectionError` not written while `refuse` holds the URL.
 */
async function harness(
  ids: string[],
  options: StubOptions,
  answerAfterMs = 0,
) {
  const health = new HealthBook();
  const endpoints = ids.map((id, i) =>
    makeEndpoint({ id, url: `tcp://127.0.0.1:${1001 + i}` })
  );
  const map = fixedMap("svc", endpoints, health);
  await map.endpoints();
  const sent: Sent[] = [];
  const refuse = new Set<string>();
  const connection = (url: string) =>
    ({
      url,
      isClosed: false,
      call(method: string, params: unknown, options: Sent["options"]) {
        sent.push({ url, method, params, options });
        if (refuse.has(url)) {
          return Promise.reject(
            new ConnectionError(`refused by ${url}`, false),
          );
        }
        return answerAfterMs === 0
          ? Promise.resolve({ url })
          : delay(answerAfterMs).then(() => ({ url }));
      },
    }) as unknown as RpcConnection;
  const connections = new Map(
    endpoints.map((e) => [e.url, connection(e.url)]),
  );
  const pool = {
    ready: (url: string) => connections.get(url),
    get: (url: string) => Promise.resolve(connections.get(url)!),
  };
  const stub = new ClusterStub(
    "svc",
    // deno-lint-ignore no-explicit-any
    { map, pool: pool as any, health },
    { retryBudget: false, ...options },
  );
  return { stub, sent, refuse, endpoints, health };
}

/** A distributor that records its hooks' calls: first listed, by both. */
function recording(onReturn = false) {
  const seen: { hook: string; ids: string[]; info?: CallInfo }[] = [];
  const distributor: Distributor = {
    choose(endpoints, info) {
      seen.push({ hook: "choose", ids: endpoints.map((e) => e.id), info });
      return endpoints[0];
    },
    pick(endpoints) {
      seen.push({ hook: "pick", ids: endpoints.map((e) => e.id) });
      return endpoints[0];
    },
  };
  if (onReturn) {
    distributor.onReturn = (result, info) => {
      seen.push({ hook: "onReturn", ids: [info.endpoint.id], info });
      return { replaced: result };
    };
  }
  return { distributor, seen };
}

Deno.test("a distributor's pick places every first attempt; a retry goes through choose with the call's CallInfo", async () => {
  const { distributor, seen } = recording();
  const { stub, sent, refuse, endpoints } = await harness(["a", "b"], {
    distributor,
    deadlineMs: 5_000,
  });
  assert.deepEqual(await stub.call("greet", ["Ada"]), {
    url: endpoints[0].url,
  });
  assert.deepEqual(seen, [{ hook: "pick", ids: ["a", "b"] }]);
  // "a" refuses: never sent, so retried on "b", chosen by choose.
  refuse.add(endpoints[0].url);
  seen.length = 0;
  assert.deepEqual(await stub.call("greet", ["Bob"]), {
    url: endpoints[1].url,
  });
  assert.deepEqual(seen.map((s) => [s.hook, s.ids]), [
    ["pick", ["a", "b"]],
    ["choose", ["b"]],
  ]);
  const retry = seen[1].info!;
  assert.equal(retry.attempt, 1);
  assert.deepEqual(retry.tried, ["a"]);
  assert.equal(retry.method, "greet");
  assert.deepEqual(retry.params, ["Bob"]);
  assert.equal(retry.name, "svc");
  assert.ok(retry.remainingMs > 0 && retry.remainingMs <= 5_000);
  assert.deepEqual(sent.map((s) => s.url), [
    endpoints[0].url,
    endpoints[0].url,
    endpoints[1].url,
  ]);
});

Deno.test("onReturn sees the first attempt's full CallInfo when the distributor picked it with pick", async () => {
  const { distributor, seen } = recording(true);
  const { stub, endpoints } = await harness(["a"], {
    distributor,
    deadlineMs: 4_000,
    idempotent: true,
  });
  assert.deepEqual(await stub.call("greet", { name: "Ada" }), {
    replaced: { url: endpoints[0].url },
  });
  assert.deepEqual(seen.map((s) => s.hook), ["pick", "onReturn"]);
  const { endpoint, ...info } = seen[1].info as CallInfo & {
    endpoint: Candidate;
  };
  assert.equal(endpoint.id, "a");
  assert.deepEqual(info, {
    name: "svc",
    method: "greet",
    params: { name: "Ada" },
    attempt: 0,
    idempotent: true,
    tried: [],
    remainingMs: 4_000,
  });
});

Deno.test("without pick, choose gets the first attempt's CallInfo as before", async () => {
  const infos: CallInfo[] = [];
  const { stub } = await harness(["a", "b"], {
    distributor: {
      choose(endpoints, info) {
        infos.push(info);
        return endpoints[1];
      },
    },
    deadlineMs: 3_000,
  });
  await stub.call("greet", [1]);
  assert.deepEqual(infos, [{
    name: "svc",
    method: "greet",
    params: [1],
    attempt: 0,
    idempotent: false,
    tried: [],
    remainingMs: 3_000,
  }]);
});

Deno.test("a pick that returns an endpoint not listed fails the call with a TypeError naming pick()", async () => {
  const { stub, sent } = await harness(["a"], {
    distributor: {
      choose: (endpoints) => endpoints[0],
      pick: () => makeEndpoint({ id: "x", url: "tcp://127.0.0.1:9" }) as never,
    },
  });
  await assert.rejects(
    stub.call("greet"),
    TypeError,
    `the distributor's pick() returned "x" for "svc.greet"; it must return one of the endpoints it was given`,
  );
  assert.equal(sent.length, 0);
});

Deno.test("calls without a signal share one frozen attempt options object per timeout; a call's signal gets its own", async () => {
  const { stub, sent } = await harness(["a"], {
    deadlineMs: 2_000,
    maxAttempts: 4,
  });
  await stub.call("greet");
  await stub.call("greet");
  // An idempotent call's attempt gets the deadline over the attempts left.
  await stub.call("greet", [], { idempotent: true });
  const controller = new AbortController();
  await stub.call("greet", [], { signal: controller.signal });
  assert.deepEqual(
    sent.map((s) => [s.options.timeoutMs, s.options.signal]),
    [[2_000, undefined], [2_000, undefined], [500, undefined], [
      2_000,
      controller.signal,
    ]],
  );
  assert.equal(sent[0].options, sent[1].options);
  assert.ok(Object.isFrozen(sent[0].options));
  assert.notEqual(sent[2].options, sent[1].options);
});

Deno.test("an answered first attempt is counted in the endpoint's health: in flight during the call, its latency sampled", async () => {
  const { stub, health, endpoints } = await harness(["a"], {}, 5);
  const record = health.of(endpoints[0].url);
  assert.equal(record.ewmaLatencyMs, 0);
  const calls = [stub.call("greet"), stub.call("greet")];
  assert.equal(record.inFlight, 2);
  await Promise.all(calls);
  assert.equal(record.inFlight, 0);
  assert.equal(record.consecutiveFailures, 0);
  // Answered after 5 ms (a timer fires no earlier): a sample of about that.
  assert.ok(record.ewmaLatencyMs >= 4, String(record.ewmaLatencyMs));
});
