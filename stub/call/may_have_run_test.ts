import assert from "node:assert/strict";
import { CONNECTION_FAILED } from "../../rpc/errors.ts";
import { denoTcpDialer } from "../../adapter/deno/tcp.ts";
import { type RpcServer, serve } from "../../adapter/deno/serve.ts";
import { delay } from "../../testing/time.ts";
import { freePorts } from "../../testing/ports.ts";
import { makeEndpoint } from "../../protocol/registry.ts";
import { AmbiguousError } from "./call_errors.ts";
import { fixedMap } from "./_test_util.ts";
import { ClusterStub } from "./cluster_stub.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { HealthBook } from "../cluster_map/endpoint_health.ts";

/**
 * A Rafter server whose `add` closes the server while the call runs: the
 * call was written and may have run, and no answer comes.
 */
function closesOnCall(calls: string[]): RpcServer {
  const server: RpcServer = serve({
    methods: {
      add: async (a: number, b: number) => {
        calls.push("add");
        void server.close();
        await delay(20);
        return a + b;
      },
    },
  });
  return server;
}

Deno.test("a call that may have run on one server and then was refused by another ends as AmbiguousError naming the first, not NotSentError", async () => {
  const calls: string[] = [];
  const raw = closesOnCall(calls);
  // Nothing listens there: the attempt is refused, never sent.
  const refused = `tcp://127.0.0.1:${freePorts(1)[0]}`;
  const health = new HealthBook();
  const pool = new ConnectionPool({ dialer: denoTcpDialer });
  const endpoints = [
    makeEndpoint({ id: "raw", url: raw.url }),
    makeEndpoint({ id: "refused", url: refused }),
  ];
  const map = fixedMap("svc", endpoints, health);
  try {
    const stub = new ClusterStub("svc", { map, pool, health }, {
      idempotent: true,
      maxAttempts: 2,
      // In order: raw first, then the untried one.
      distributor: { choose: (candidates) => candidates[0] },
    });
    await assert.rejects(stub.call("add", [1, 2]), (error: unknown) => {
      assert.ok(error instanceof AmbiguousError, String(error));
      assert.equal(error.written, true);
      assert.equal(error.endpoint, raw.url);
      assert.equal(error.code, CONNECTION_FAILED);
      assert.match(
        error.message,
        /^"svc\.add" may have run on tcp:\/\/127\.0\.0\.1:\d+: .*; the last attempt: "svc\.add" was not sent: cannot connect to tcp:\/\/127\.0\.0\.1:\d+: /,
      );
      return true;
    });
    assert.deepEqual(calls, ["add"]);
  } finally {
    map.close();
    pool.close();
    await raw.close();
  }
});
