import assert from "node:assert/strict";
import {
  CANCELLED,
  CONNECTION_FAILED,
  DEADLINE_EXCEEDED,
  INTERNAL_ERROR,
  INVALID_PARAMS,
  RpcError,
} from "../../rpc/errors.ts";
import { denoTcpDialer } from "../../adapter/deno/tcp.ts";
import { type RpcServer, serve } from "../../adapter/deno/serve.ts";
import { withContext } from "../../rpc/server/method.ts";
import type { Dialer } from "../../rpc/transport/transport.ts";
import { delay, waitFor, within } from "../../testing/time.ts";
import { freePorts } from "../../testing/ports.ts";
import type { RegistryNode } from "../../testing/registry.ts";
import { startTestRegistry } from "../../testing/cluster.ts";
import {
  type Endpoint,
  makeEndpoint,
  NO_ENDPOINTS,
} from "../../protocol/registry.ts";
import { ClusterMap } from "../cluster_map/cluster_map.ts";
import { ClusterStub } from "./cluster_stub.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { HealthBook } from "../cluster_map/endpoint_health.ts";
import { AmbiguousError, NotSentError, ServerError } from "./call_errors.ts";
import { connect, type RafterClient } from "../client.ts";
import type { Distributor, FailureInfo } from "../distributors/distributor.ts";
import { roundRobin } from "../distributors/round_robin.ts";
import { RetryBudget } from "./retry_budget.ts";
import { closeListening, silentServer } from "../../testing/rpc.ts";

/** A server bound in the test's registry, counting the calls it runs. */
interface TestServer {
  id: string;
  server: RpcServer;
  endpoint: Endpoint;
  calls: string[];
}

interface Env {
  registry: RegistryNode;
  /** A client for binding (the one under test is made per test). */
  admin: RafterClient;
  /** Starts a server and binds it under `name`. */
  start(name: string, id: string): Promise<TestServer>;
  /** Resolves every `slow` call still waiting. */
  release(): void;
  client(options?: Parameters<typeof connect>[1]): RafterClient;
}

/** A single-node registry, servers, clients; all closed at the end. */
async function withEnv(fn: (env: Env) => Promise<void>): Promise<void> {
  const { registry, dir } = await startTestRegistry("rafter_stub_");
  const servers: RpcServer[] = [];
  const clients: RafterClient[] = [];
  const gate = Promise.withResolvers<void>();
  const env: Env = {
    registry,
    admin: connect(registry.url),
    async start(name, id) {
      const calls: string[] = [];
      const server = serve({
        onInternalError: () => {}, // "crash" is expected to fail
        methods: {
          who: () => (calls.push("who"), id),
          add: (a: number, b: number) => (calls.push("add"), a + b),
          invalid: () => {
            calls.push("invalid");
            throw new RpcError(
              INVALID_PARAMS,
              "Invalid params: x must be positive",
              { param: "x" },
            );
          },
          crash: () => {
            calls.push("crash");
            throw new Error("boom");
          },
          slow: async () => {
            calls.push("slow");
            await gate.promise;
            return id;
          },
          delayed: async (ms: number) => {
            calls.push("delayed");
            await delay(ms);
            return id;
          },
          note: (text: string) => void calls.push(`note ${text}`),
          named: (
            { a, b }: { a: number; b: number },
          ) => (calls.push("named"), a * b),
        },
      });
      servers.push(server);
      const { endpoint } = await env.admin.bind(name, { id, url: server.url });
      return { id, server, endpoint, calls };
    },
    release: () => gate.resolve(),
    client(options) {
      const client = connect(registry.url, options);
      clients.push(client);
      return client;
    },
  };
  clients.push(env.admin);
  try {
    await waitFor(() => registry.raft.status.role === "leader", "n1 to lead");
    await fn(env);
  } finally {
    gate.resolve();
    for (const client of clients) client.close();
    for (const server of servers) await server.close();
    await registry.stop();
    await Deno.remove(dir, { recursive: true });
  }
}

interface Who {
  delayed(ms: number): string;
  who(): string;
  add(a: number, b: number): number;
  invalid(): never;
  crash(): never;
  slow(): string;
  nothing(): never;
}

function rpcError(code: number, message?: string | RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof RpcError, `${error} is an RpcError`);
    assert.equal(error.code, code, error.message);
    if (typeof message === "string") assert.equal(error.message, message);
    else if (message !== undefined) assert.match(error.message, message);
    return true;
  };
}

/**
 * A raw TCP server that reads one request line on each connection, then
 * closes it without answering: the call was written and may have run.
 */
function lineThenClose() {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const lines: string[] = [];
  const conns = new Set<Deno.Conn>();
  const done = (async () => {
    const handlers: Promise<void>[] = [];
    for await (const conn of listener) {
      conns.add(conn);
      handlers.push((async () => {
        const buffer = new Uint8Array(64 * 1024);
        let text = "";
        try {
          while (!text.includes("\n")) {
            const count = await conn.read(buffer);
            if (count === null) break;
            text += new TextDecoder().decode(buffer.subarray(0, count));
          }
          lines.push(...text.split("\n").filter((l) => l !== ""));
        } catch {
          // Closed by the test.
        } finally {
          conns.delete(conn);
          try {
            conn.close();
          } catch {
            // Already closed.
          }
        }
      })());
    }
    await Promise.all(handlers);
  })();
  const port = (listener.addr as Deno.NetAddr).port;
  return {
    url: `tcp://127.0.0.1:${port}`,
    lines,
    close: () => closeListening(listener, conns, done),
  };
}

Deno.test("calls spread round-robin over three servers in binding order", async () => {
  await withEnv(async (env) => {
    const servers = [
      await env.start("hello", "s1"),
      await env.start("hello", "s2"),
      await env.start("hello", "s3"),
    ];
    const client = env.client();
    const hello = client.stub<Who>("hello", {
      distributor: roundRobin({ start: 0 }),
    });
    const answers: string[] = [];
    for (let i = 0; i < 9; i++) answers.push(await hello.who());
    assert.deepEqual(answers, [
      "s1",
      "s2",
      "s3",
      "s1",
      "s2",
      "s3",
      "s1",
      "s2",
      "s3",
    ]);
    for (const s of servers) assert.deepEqual(s.calls, ["who", "who", "who"]);
    // Params go by position.
    assert.equal(await hello.add(2, 3), 5);
    assert.deepEqual(servers[0].calls.at(-1), "add");
    // Concurrent calls spread the same way.
    const concurrent = await Promise.all(
      Array.from({ length: 6 }, () => hello.who()),
    );
    assert.deepEqual(concurrent, ["s2", "s3", "s1", "s2", "s3", "s1"]);
  });
});

Deno.test("a closed server is evicted and calls keep succeeding on the others", async () => {
  await withEnv(async (env) => {
    const servers = [
      await env.start("hello", "s1"),
      await env.start("hello", "s2"),
      await env.start("hello", "s3"),
    ];
    const client = env.client();
    const hello = client.stub<Who>("hello", {
      distributor: roundRobin({ start: 0 }),
    });
    const answers: string[] = [];
    let failures = 0;
    for (let i = 0; i < 30; i++) {
      if (i === 6) await servers[1].server.close();
      try {
        answers.push(await hello.who());
      } catch {
        failures++;
      }
    }
    assert.equal(failures, 0);
    assert.equal(answers.length, 30);
    assert.deepEqual(answers.slice(0, 6), ["s1", "s2", "s3", "s1", "s2", "s3"]);
    assert.ok(!answers.slice(6).includes("s2"));
    assert.deepEqual(servers[1].calls.length, 2);
    // After the eviction the two others alternate.
    const after = answers.slice(8);
    for (let i = 1; i < after.length; i++) {
      assert.notEqual(after[i], after[i - 1]);
    }
  });
});

Deno.test("a drained server loses no call: non-idempotent calls under way finish, the next ones move on", async () => {
  await withEnv(async (env) => {
    const s1 = await env.start("hello", "s1");
    const s2 = await env.start("hello", "s2");
    const client = env.client();
    const hello = client.stub<Who>("hello", {
      distributor: roundRobin({ start: 0 }),
    });
    // Warm the pooled connections, so the next call to s2 goes over an
    // open, idle connection (the case a plain close() breaks).
    assert.deepEqual([await hello.who(), await hello.who()], ["s1", "s2"]);
    const slow = hello.slow(); // on s1
    const slowOnS2 = hello.slow(); // on s2, under way during the drain
    await waitFor(() => s2.calls.includes("slow"), "slow on s2", 2_000);
    const draining = s2.server.drain(5_000);
    await delay(50);
    const answers: string[] = [];
    for (let i = 0; i < 10; i++) answers.push(await hello.who());
    assert.deepEqual(answers, Array(10).fill("s1"));
    env.release();
    assert.deepEqual(await Promise.all([slow, slowOnS2]), ["s1", "s2"]);
    await within(draining, 2_000, "drain");
    assert.deepEqual(s2.calls, ["who", "slow"]);
    assert.equal(s1.calls.filter((c) => c === "who").length, 11);
  });
});

Deno.test("an idempotent call to a server closed just before its turn moves on with no failure", async () => {
  await withEnv(async (env) => {
    const s1 = await env.start("hello", "s1");
    const s2 = await env.start("hello", "s2");
    const client = env.client();
    const hello = client.stub<Who>("hello", {
      distributor: roundRobin({ start: 0 }),
      idempotent: ["who"],
    });
    assert.deepEqual(
      [await hello.who(), await hello.who(), await hello.who()],
      [
        "s1",
        "s2",
        "s1",
      ],
    );
    // The next call goes to s2, whose idle pooled connection the client
    // has not yet seen close.
    await s2.server.close();
    const answers: string[] = [];
    for (let i = 0; i < 6; i++) answers.push(await hello.who());
    assert.deepEqual(answers, ["s1", "s1", "s1", "s1", "s1", "s1"]);
    assert.equal(s1.calls.length, 8);
  });
});

Deno.test("a call whose connection dies after the request was written is not retried unless idempotent", async () => {
  const raw = lineThenClose();
  try {
    await withEnv(async (env) => {
      await env.admin.bind("hello", { id: "raw", url: raw.url });
      const good = await env.start("hello", "good");
      // Not idempotent: the error reaches the caller; good never sees it.
      const client = env.client();
      const hello = client.stub<Who>("hello", {
        distributor: roundRobin({ start: 0 }),
      });
      await assert.rejects(hello.add(1, 2), (error: unknown) => {
        assert.ok(error instanceof AmbiguousError, String(error));
        assert.equal(error.written, true);
        assert.equal(error.endpoint, raw.url);
        assert.equal(error.code, CONNECTION_FAILED);
        assert.match(error.message, /^"hello\.add" may have run on tcp:/);
        return true;
      });
      assert.equal(raw.lines.length, 1);
      const { timeoutMs, ...request } = JSON.parse(raw.lines[0]);
      assert.deepEqual(request, {
        jsonrpc: "2.0",
        method: "add",
        params: [1, 2],
        id: 1,
      });
      // The time left of the call's 30 s deadline.
      assert.ok(timeoutMs > 25_000 && timeoutMs <= 30_000, `${timeoutMs}`);
      assert.deepEqual(good.calls, []);
      // The dead server was evicted: the next call goes to good.
      assert.equal(await hello.add(1, 2), 3);
      assert.equal(raw.lines.length, 1);

      // Declared idempotent: retried on good at once.
      const client2 = env.client();
      const hello2 = client2.stub<Who>("hello", {
        distributor: roundRobin({ start: 0 }),
        idempotent: ["add"],
      });
      assert.equal(await hello2.add(2, 2), 4);
      assert.equal(raw.lines.length, 2);
      assert.equal(JSON.parse(raw.lines[1]).method, "add");
      assert.deepEqual(good.calls, ["add", "add"]);

      // `idempotent: true` covers every method.
      const client3 = env.client();
      const hello3 = client3.stub<Who>("hello", {
        distributor: roundRobin({ start: 0 }),
        idempotent: true,
      });
      assert.equal(await hello3.who(), "good");
      assert.equal(raw.lines.length, 3);

      // A method not in the list is still not retried.
      const client4 = env.client();
      const hello4 = client4.stub<Who>("hello", {
        distributor: roundRobin({ start: 0 }),
        idempotent: ["add"],
      });
      await assert.rejects(hello4.who(), { name: "AmbiguousError" });
      assert.equal(raw.lines.length, 4);
      assert.deepEqual(good.calls, ["add", "add", "who"]);
    });
  } finally {
    await raw.close();
  }
});

Deno.test("when every server is gone and a new one is bound, one call finds it", async () => {
  await withEnv(async (env) => {
    const s1 = await env.start("hello", "s1");
    const s2 = await env.start("hello", "s2");
    const client = env.client();
    const hello = client.stub<Who>("hello", {
      distributor: roundRobin({ start: 0 }),
    });
    assert.equal(await hello.who(), "s1");
    assert.equal(await hello.who(), "s2");
    await s1.server.close();
    await s2.server.close();
    await delay(50); // the client's connections see the close
    const s3 = await env.start("hello", "s3");
    // s1 and s2 fail to connect, are evicted; the empty map is looked up
    // again and lists s3 beside the quarantined two.
    assert.equal(await hello.who(), "s3");
    assert.equal(await hello.who(), "s3");
    assert.deepEqual(s3.calls, ["who", "who"]);
  });
});

Deno.test("an empty map is looked up again on the next call", async () => {
  await withEnv(async (env) => {
    const s1 = await env.start("hello", "s1");
    const client = env.client();
    const hello = client.stub<Who>("hello");
    assert.equal(await hello.who(), "s1");
    await env.admin.unbind("hello", "s1");
    await s1.server.close();
    await delay(50);
    await assert.rejects(hello.who(), rpcError(NO_ENDPOINTS));
    const s2 = await env.start("hello", "s2");
    assert.equal(await hello.who(), "s2");
    assert.deepEqual(s2.calls, ["who"]);
  });
});

Deno.test("NO_ENDPOINTS when nothing is bound under the name", async () => {
  await withEnv(async (env) => {
    const client = env.client();
    await assert.rejects(client.call("ghost", "who"), (error: unknown) => {
      rpcError(
        NO_ENDPOINTS,
        'No endpoints: nothing is bound under "ghost"; start a server that binds it, or check the name',
      )(error);
      assert.ok(error instanceof NotSentError);
      assert.deepEqual(error.data, {
        name: "ghost",
        written: false,
        endpoint: null,
      });
      return true;
    });
    assert.equal(NO_ENDPOINTS, -32002);
  });
});

Deno.test("server error responses are passed through, not retried", async () => {
  await withEnv(async (env) => {
    const servers = [
      await env.start("hello", "s1"),
      await env.start("hello", "s2"),
    ];
    const client = env.client();
    const hello = client.stub<Who>("hello", {
      distributor: roundRobin({ start: 0 }),
      idempotent: true,
    });
    await assert.rejects(hello.invalid(), (error: unknown) => {
      rpcError(INVALID_PARAMS, "Invalid params: x must be positive")(error);
      assert.ok(error instanceof ServerError);
      assert.equal(error.endpoint, servers[0].server.url);
      assert.deepEqual(error.data, { param: "x" });
      return true;
    });
    await assert.rejects(hello.crash(), rpcError(INTERNAL_ERROR));
    await assert.rejects(
      hello.nothing(),
      rpcError(-32601),
    );
    assert.deepEqual(servers[0].calls, ["invalid"]);
    assert.deepEqual(servers[1].calls, ["crash"]);
    // Nobody was evicted: both still answer.
    assert.deepEqual([await hello.who(), await hello.who()], ["s2", "s1"]);
  });
});

Deno.test("a distributor's onError decides: throw stops the retries", async () => {
  await withEnv(async (env) => {
    const dead = await env.start("hello", "dead");
    const alive = await env.start("hello", "alive");
    await dead.server.close();
    const failures: FailureInfo[] = [];
    const returns: unknown[] = [];
    const first: Distributor = {
      choose: (endpoints) => endpoints[0],
      onError: (error, failure) => {
        assert.ok(error instanceof NotSentError);
        failures.push(failure);
        return "throw";
      },
      onReturn: (result, call) => {
        returns.push([result, call.endpoint.id]);
      },
    };
    const client = env.client();
    const hello = client.stub<Who>("hello", { distributor: first });
    await assert.rejects(hello.add(1, 1), (error: unknown) => {
      assert.ok(error instanceof NotSentError);
      assert.equal(error.written, false);
      assert.equal(error.endpoint, dead.server.url);
      return true;
    });
    assert.equal(failures.length, 1);
    const { endpoint, remainingMs, ...failure } = failures[0];
    assert.deepEqual(failure, {
      name: "hello",
      method: "add",
      params: [1, 1],
      attempt: 0,
      idempotent: false,
      tried: [],
      kind: "notSent",
      safeToRetry: true,
    });
    assert.equal(endpoint.id, dead.endpoint.id);
    assert.ok(remainingMs > 0);
    assert.deepEqual(alive.calls, []);
    // The failed server was still evicted: the next call reaches alive.
    assert.equal(await hello.add(1, 1), 2);
    assert.deepEqual(returns, [[2, "alive"]]);
    assert.equal(failures.length, 1);
  });
});

Deno.test("a refused connection moves on to every server not tried yet, whatever maxAttempts; once each was tried, maxAttempts bounds the repeats", async () => {
  await withEnv(async (env) => {
    const servers = [
      await env.start("hello", "d1"),
      await env.start("hello", "d2"),
      await env.start("hello", "d3"),
      await env.start("hello", "ok"),
      await env.start("gone", "g1"),
      await env.start("gone", "g2"),
    ];
    for (const s of [...servers.slice(0, 3), ...servers.slice(4)]) {
      await s.server.close();
    }
    const attempts: number[] = [];
    const client = env.client();
    const distributor = {
      ...roundRobin({ start: 0 }),
      onError: (_error: unknown, failure: FailureInfo) => {
        attempts.push(failure.attempt);
        return failure.safeToRetry ? "retry" as const : "throw" as const;
      },
    };
    // Three refusals, none of them counted: the fourth server answers
    // though only one attempt is allowed.
    const hello = client.stub<Who>("hello", { distributor, maxAttempts: 1 });
    assert.equal(await hello.who(), "ok");
    assert.deepEqual(attempts, [0, 1, 2]);
    assert.deepEqual(servers[3].calls, ["who"]);
    // Nobody listens: each server once for free, then 2 counted attempts.
    attempts.length = 0;
    const gone = client.stub<Who>("gone", {
      distributor: { ...distributor, ...roundRobin({ start: 0 }) },
      maxAttempts: 2,
    });
    await assert.rejects(gone.who(), (error: unknown) => {
      assert.ok(error instanceof NotSentError);
      assert.equal(error.written, false);
      assert.match(
        error.message,
        /^"gone\.who" was not sent: cannot connect to tcp:\/\/127\.0\.0\.1:/,
      );
      return true;
    });
    assert.deepEqual(attempts, [0, 1, 2, 3]);
  });
});

Deno.test("await on a stub does not hang: the proxy is not thenable", async () => {
  await withEnv(async (env) => {
    await env.start("hello", "s1");
    const client = env.client();
    const hello = client.stub<Who>("hello");
    const awaited = await within(
      Promise.resolve(hello),
      1_000,
      "await stub",
    );
    assert.equal(awaited, hello);
    assert.equal((hello as unknown as { then?: unknown }).then, undefined);
    assert.equal(
      (hello as unknown as Record<symbol, unknown>)[Symbol.iterator],
      undefined,
    );
    assert.equal(hello.who, hello.who);
    assert.equal(
      await (await within(
        (async () => await hello)(),
        1_000,
        "async await stub",
      )).who(),
      "s1",
    );
  });
});

Deno.test("JSON, string conversion and inspection of a stub stay local", async () => {
  await withEnv(async (env) => {
    const s1 = await env.start("hello", "s1");
    const client = env.client();
    const hello = client.stub<Who>("hello");
    assert.equal(JSON.stringify(hello), "{}");
    assert.equal(`${hello}`, "[object Object]");
    assert.equal(
      (hello as unknown as { toString?: unknown }).toString,
      Object.prototype.toString,
    );
    assert.equal((hello as unknown as { toJSON?: unknown }).toJSON, undefined);
    Deno.inspect(hello);
    assert.deepEqual(s1.calls, []);
  });
});

Deno.test("a distributor that returns no endpoint gets a clear TypeError", async () => {
  await withEnv(async (env) => {
    await env.start("hello", "s1");
    const client = env.client();
    const broken = client.stub<Who>("hello", {
      distributor: { choose: () => undefined },
    });
    await assert.rejects(broken.who(), {
      name: "TypeError",
      message:
        'the distributor\'s choose() returned undefined for "hello.who"; it must return one of the endpoints it was given',
    });
  });
});

Deno.test("client.call with an AbortSignal rejects with CANCELLED and is not retried", async () => {
  await withEnv(async (env) => {
    const s1 = await env.start("hello", "s1");
    const s2 = await env.start("hello", "s2");
    const client = env.client();
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 50);
    await assert.rejects(
      client.call("hello", "slow", [], { signal: controller.signal }),
      (error: unknown) => {
        // It was sent: it may have run there.
        assert.ok(error instanceof AmbiguousError, String(error));
        assert.equal(error.code, CANCELLED);
        assert.match(
          error.message,
          /^Cancelled: the call to "hello\.slow" was aborted; it may have run on tcp:\/\/127\.0\.0\.1:\d+$/,
        );
        return true;
      },
    );
    assert.ok(Date.now() - started < 1_000);
    assert.equal(s1.calls.length + s2.calls.length, 1);
    // Already aborted: rejects without sending.
    await assert.rejects(
      client.call("hello", "who", [], { signal: AbortSignal.abort() }),
      (error: unknown) => {
        assert.ok(error instanceof NotSentError);
        assert.equal(error.code, CANCELLED);
        assert.equal(
          error.message,
          'Cancelled: the call to "hello.who" was aborted before it was sent',
        );
        return true;
      },
    );
    assert.equal(s1.calls.length + s2.calls.length, 1);
  });
});

Deno.test("a call past its deadline rejects with DEADLINE_EXCEEDED, typed ambiguous once sent; an idempotent call's attempts time out sooner and are retried", async () => {
  await withEnv(async (env) => {
    const s1 = await env.start("hello", "s1");
    const client = env.client();
    let started = Date.now();
    await assert.rejects(
      client.call("hello", "slow", [], { deadlineMs: 150 }),
      (error: unknown) => {
        assert.ok(error instanceof AmbiguousError, String(error));
        assert.equal(error.code, DEADLINE_EXCEEDED);
        assert.equal(error.endpoint, s1.server.url);
        assert.equal(
          error.message,
          `Deadline exceeded: "hello.slow" did not get an answer within 150 ms, waiting for endpoint s1 at ${s1.server.url} (sent, no answer: the server may be stopped or overloaded); it may have run there`,
        );
        assert.deepEqual(error.data, {
          waitingFor: "endpoint",
          endpoints: [{ id: "s1", url: s1.server.url }],
          written: true,
          endpoint: s1.server.url,
        });
        return true;
      },
    );
    let elapsed = Date.now() - started;
    assert.ok(elapsed >= 140 && elapsed < 1_000, `took ${elapsed} ms`);
    // Not idempotent: one attempt only.
    assert.deepEqual(s1.calls, ["slow"]);
    // An idempotent stub gives each attempt a share of the deadline (time
    // left / attempts left) and retries when one times out.
    const hello = client.stub<Who>("hello", {
      deadlineMs: 200,
      idempotent: true,
    });
    started = Date.now();
    await assert.rejects(hello.slow(), rpcError(DEADLINE_EXCEEDED));
    elapsed = Date.now() - started;
    assert.ok(elapsed >= 190 && elapsed < 1_000, `took ${elapsed} ms`);
    assert.ok(s1.calls.length >= 3, `${s1.calls.length - 1} attempts`);
    assert.equal(await hello.who(), "s1");
  });
});

Deno.test("the deadline and the signal also bound the registry lookup", async () => {
  const [dead] = freePorts(1);
  // No registry answers: the lookup alone goes on for 1.5 s.
  const client = connect(`tcp://127.0.0.1:${dead}`, {
    deadlineMs: 1_500,
    failFastRounds: Infinity,
  });
  try {
    let started = Date.now();
    await assert.rejects(
      client.call("hello", "who", [], { deadlineMs: 200 }),
      rpcError(
        DEADLINE_EXCEEDED,
        'Deadline exceeded: "hello.who" did not get an answer within 200 ms (looking up the name in the registry still under way)',
      ),
    );
    let elapsed = Date.now() - started;
    assert.ok(elapsed >= 190 && elapsed < 800, `took ${elapsed} ms`);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    started = Date.now();
    await assert.rejects(
      client.call("hello", "who", [], { signal: controller.signal }),
      (error: unknown) => {
        assert.ok(error instanceof NotSentError);
        assert.equal(error.code, CANCELLED);
        assert.equal(
          error.message,
          'Cancelled: the call to "hello.who" was aborted before it was sent',
        );
        return true;
      },
    );
    elapsed = Date.now() - started;
    assert.ok(elapsed >= 90 && elapsed < 800, `took ${elapsed} ms`);
    // A patient call joins the same lookup and gets the registry's error.
    await assert.rejects(
      client.call("hello", "who", [], { deadlineMs: 5_000 }),
      rpcError(
        DEADLINE_EXCEEDED,
        /^Deadline exceeded: registry\.lookup did not succeed on any registry node/,
      ),
    );
    assert.ok(Date.now() - started < 2_500);
  } finally {
    client.close();
  }
});

Deno.test("the deadline also bounds opening the connection", async () => {
  await withEnv(async (env) => {
    // A server whose host never answers the connect (as a dropped SYN):
    // the dialer only gives up when the pool's connect timeout aborts it.
    const blackhole = "tcp://127.0.0.1:9";
    await env.admin.bind("hello", { id: "hole", url: blackhole });
    let gaveUp: Promise<void> | undefined;
    const dialer: Dialer = (url, options) => {
      if (url !== blackhole) return denoTcpDialer(url, options);
      return new Promise((_, reject) => {
        const done = Promise.withResolvers<void>();
        gaveUp = done.promise;
        options?.signal?.addEventListener("abort", () => {
          reject(options.signal!.reason);
          done.resolve();
        }, { once: true });
      });
    };
    const client = env.client({ dialer, connectTimeoutMs: 600 });
    // The registry connection open first: on a loaded machine its dial
    // must not take the call's 150 ms before the server's dial starts.
    await client.lookup("hello");
    const started = Date.now();
    await assert.rejects(
      client.call("hello", "who", [], { deadlineMs: 150 }),
      rpcError(
        DEADLINE_EXCEEDED,
        'Deadline exceeded: "hello.who" did not get an answer within 150 ms, waiting for endpoint hole at tcp://127.0.0.1:9 (not sent: the connection did not open in time; is the server up and reachable?)',
      ),
    );
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 140 && elapsed < 550, `took ${elapsed} ms`);
    assert.ok(gaveUp !== undefined);
    await within(gaveUp, 2_000, "the dial to time out");
  });
});

Deno.test("a hung server costs an idempotent call one attempt timeout; after two it is ejected, and its probe keeps it out", async () => {
  const hung = silentServer();
  try {
    await withEnv(async (env) => {
      await env.admin.bind("hello", { id: "hung", url: hung.url });
      await env.start("hello", "good");
      const client = env.client({ health: { baseEjectionMs: 200 } });
      const hello = client.stub<Who>("hello", {
        distributor: roundRobin({ start: 0 }),
        idempotent: true,
        attemptTimeoutMs: 100,
      });
      const times: number[] = [];
      for (let i = 0; i < 6; i++) {
        const started = Date.now();
        assert.equal(await hello.who(), "good");
        times.push(Date.now() - started);
      }
      // Calls that met the hung server took one attempt timeout, no more.
      const slow = times.filter((t) => t >= 90);
      assert.ok(slow.length <= 2, `${times}`);
      for (const t of times) assert.ok(t < 400, `${times}`);
      const states = client.endpointStates("hello");
      assert.deepEqual(states.map((s) => [s.id, s.state]), [
        ["hung", "ejected"],
        ["good", "serving"],
      ]);
      assert.equal(states[0].reason, "2 attempts in a row timed out");
      // After its ejection time it is probed; the probe times out too.
      await delay(250);
      assert.equal(await hello.who(), "good");
      await delay(1_200);
      assert.equal(client.endpointStates("hello")[0].state, "ejected");
      assert.match(
        client.endpointStates("hello")[0].reason!,
        /a probe failed too/,
      );
    });
  } finally {
    await hung.close();
  }
});

Deno.test("a call that is not idempotent is not retried after its attempt timed out: AmbiguousError names the server", async () => {
  const hung = silentServer();
  try {
    await withEnv(async (env) => {
      await env.admin.bind("hello", { id: "hung", url: hung.url });
      const good = await env.start("hello", "good");
      const client = env.client();
      const hello = client.stub<Who>("hello", {
        distributor: roundRobin({ start: 0 }),
        attemptTimeoutMs: 100,
      });
      await assert.rejects(hello.add(1, 2), (error: unknown) => {
        assert.ok(error instanceof AmbiguousError, String(error));
        assert.equal(error.endpoint, hung.url);
        assert.equal(error.code, DEADLINE_EXCEEDED);
        assert.match(
          error.message,
          /may have run on .*: no answer within \d+ ms \(the attempt's timeout\)/,
        );
        return true;
      });
      assert.deepEqual(good.calls, []);
    });
  } finally {
    await hung.close();
  }
});

Deno.test("onError may answer the caller with a value, and onReturn may replace a result", async () => {
  await withEnv(async (env) => {
    const dead = await env.start("hello", "dead");
    await env.start("hello", "alive");
    await dead.server.close();
    const client = env.client();
    const fallback = client.stub<Who>("hello", {
      distributor: {
        choose: (endpoints) =>
          endpoints.find((e) => e.id === "dead") ?? endpoints[0],
        onError: () => ({ return: "cached" }),
      },
    });
    assert.equal(await fallback.who(), "cached");
    const shouting = client.stub<Who>("hello", {
      distributor: {
        choose: (endpoints) => endpoints.find((e) => e.id === "alive"),
        onReturn: (result) => String(result).toUpperCase(),
      },
    });
    assert.equal(await shouting.who(), "ALIVE");
  });
});

Deno.test("the retry budget stops retries of attempts that may have run once it is spent: a failing cluster gets no retry storm", async () => {
  await withEnv(async (env) => {
    const slow = await env.start("hello", "slow");
    const ok = await env.start("hello", "ok");
    const client = env.client();
    const hello = client.stub<Who>("hello", {
      distributor: {
        choose: (endpoints) =>
          endpoints.find((e) => e.id === "slow") ?? endpoints[0],
      },
      idempotent: true,
      attemptTimeoutMs: 50,
      retryBudget: { minRetriesPerSecond: 0, percentCanRetry: 0 },
    });
    // The attempt on slow times out (it may have run): its retry needs
    // the budget, which has none.
    await assert.rejects(hello.delayed(400), (error: unknown) => {
      assert.ok(error instanceof AmbiguousError, String(error));
      assert.equal(error.endpoint, slow.endpoint.url);
      assert.match(
        error.message,
        /not retried: the stub's retry budget is spent \(too many retries lately: the cluster is failing\)$/,
      );
      return true;
    });
    assert.deepEqual(slow.calls, ["delayed"]);
    // Without a budget the retry goes to ok (where it times out too).
    const patient = client.stub<Who>("hello", {
      distributor: {
        choose: (endpoints) =>
          endpoints.find((e) => e.id === "slow") ?? endpoints[0],
      },
      idempotent: true,
      attemptTimeoutMs: 50,
      maxAttempts: 2,
      retryBudget: false,
    });
    await assert.rejects(patient.delayed(400), (error: unknown) => {
      assert.ok(error instanceof AmbiguousError, String(error));
      assert.doesNotMatch(error.message, /retry budget/);
      return true;
    });
    assert.deepEqual(ok.calls, ["delayed"]);
  });
});

Deno.test("an attempt that was not sent spends no retry budget: a call moves on past refusing servers with none left", async () => {
  await withEnv(async (env) => {
    const servers = [
      await env.start("hello", "d1"),
      await env.start("hello", "d2"),
      await env.start("hello", "ok"),
    ];
    await servers[0].server.close();
    await servers[1].server.close();
    const client = env.client();
    const budget = new RetryBudget({
      minRetriesPerSecond: 0,
      percentCanRetry: 0,
    });
    const hello = client.stub<Who>("hello", {
      distributor: roundRobin({ start: 0 }),
      retryBudget: budget,
    });
    assert.equal(await hello.who(), "ok");
    assert.deepEqual(servers[2].calls, ["who"]);
    assert.equal(budget.balance, 0);
  });
});

Deno.test("a hedged idempotent call sends a second attempt to another server when the first is slow; the first answer wins", async () => {
  await withEnv(async (env) => {
    const slow = await env.start("hello", "slow");
    const fast = await env.start("hello", "fast");
    const client = env.client();
    const hello = client.stub<Who>("hello", {
      distributor: {
        choose: (endpoints) =>
          endpoints.find((e) => e.id === "slow") ?? endpoints[0],
      },
      idempotent: true,
      hedge: { delayMs: 50 },
    });
    const started = Date.now();
    // "delayed" waits 400 ms on each server; the slow one is asked first.
    const answer = await hello.$call("delayed", [400]);
    const elapsed = Date.now() - started;
    assert.ok(answer === "slow" || answer === "fast");
    assert.ok(elapsed < 1_000, `took ${elapsed} ms`);
    assert.deepEqual(slow.calls, ["delayed"]);
    assert.deepEqual(fast.calls, ["delayed"]);
    // Not hedged when not idempotent.
    const plain = client.stub<Who>("hello", {
      distributor: {
        choose: (endpoints) => endpoints.find((e) => e.id === "slow"),
      },
      hedge: { delayMs: 10 },
    });
    assert.equal(await plain.delayed(50), "slow");
    assert.deepEqual(fast.calls, ["delayed"]);
  });
});

Deno.test("$call takes named params, $notify sends a notification, $with sets options on every call", async () => {
  await withEnv(async (env) => {
    const s1 = await env.start("hello", "s1");
    const client = env.client();
    const hello = client.stub<Who>("hello");
    assert.equal(await hello.$call("named", { a: 6, b: 7 }), 42);
    await hello.$notify("note", ["hi"]);
    await waitFor(() => s1.calls.includes("note hi"), "the notification");
    const impatient = hello.$with({ deadlineMs: 50 });
    await assert.rejects(impatient.delayed(500), rpcError(DEADLINE_EXCEEDED));
    assert.equal(await hello.delayed(10), "s1");
  });
});

Deno.test("a stub's attempt timeout and its caller's abort reach a Rafter server: the method's signal aborts, with the deadline, then rpc.cancel", async () => {
  const { registry, dir } = await startTestRegistry("rafter_stub_cancel_");
  const seen: {
    deadlineLeft: number | null;
    reason: number | null;
    atMs: number;
  }[] = [];
  const server = serve({
    methods: {
      work: withContext(async ({ signal, deadline }) => {
        const started = Date.now();
        const entry = {
          deadlineLeft: deadline === null ? null : deadline - started,
          reason: null as number | null,
          atMs: -1,
        };
        seen.push(entry);
        // Stops when aborted, as a handler should (the server answers
        // the abort's reason, if the client still listens).
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, 5_000);
          signal.addEventListener("abort", () => {
            clearTimeout(timer);
            entry.reason = (signal.reason as RpcError).code;
            entry.atMs = Date.now() - started;
            reject(signal.reason);
          });
        });
        return "done";
      }),
    },
  });
  const client = connect(registry.url);
  try {
    await waitFor(() => registry.raft.status.role === "leader", "n1 to lead");
    await client.bind("cancel", { id: "w", url: server.url });
    const stub = client.stub<{ work(): string }>("cancel");
    // The deadline: the server learns the time left and stops at it (by
    // its own timer or by the rpc.cancel the client sends at its deadline);
    // whether the client's timer or the server's answer comes first, the
    // caller learns the call may have run.
    await assert.rejects(
      stub.$with({ deadlineMs: 300 }).work(),
      (error) =>
        error instanceof AmbiguousError && error.code === DEADLINE_EXCEEDED,
    );
    await waitFor(
      () => seen[0]?.reason !== null,
      "the server to stop the first call",
    );
    // The caller's abort: rpc.cancel stops it at once.
    const controller = new AbortController();
    const call = stub.$with({ signal: controller.signal }).work();
    await waitFor(() => seen.length === 2, "the second call to start");
    const abortedAt = Date.now();
    controller.abort();
    await assert.rejects(
      call,
      (error) => (error as RpcError).code === CANCELLED,
    );
    await waitFor(
      () => seen[1].reason !== null,
      "the server to stop the second call",
    );
    const cancelLag = Date.now() - abortedAt;
    console.log(
      `measured: deadline 300 ms reached the server as ${
        seen[0].deadlineLeft
      } ms left, it stopped after ${seen[0].atMs} ms (code ${
        seen[0].reason
      }); after the caller's abort it stopped within ${cancelLag} ms (code ${
        seen[1].reason
      })`,
    );
    // (+1: the server adds 1 ms for the fraction of a ms Date.now() drops.)
    assert.ok(seen[0].deadlineLeft! > 200 && seen[0].deadlineLeft! <= 301);
    // Its own deadline or the client's rpc.cancel, whichever came first.
    assert.ok(
      ([DEADLINE_EXCEEDED, CANCELLED] as number[]).includes(seen[0].reason!),
    );
    assert.ok(
      seen[0].atMs >= 200 && seen[0].atMs < 1_000,
      `${seen[0].atMs} ms`,
    );
    assert.equal(seen[1].reason, CANCELLED);
    assert.ok(cancelLag < 1_000, `${cancelLag} ms`);
  } finally {
    client.close();
    await server.close();
    await registry.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("$batch sends every request to one server as one batch; member errors are ServerErrors; only an all-idempotent batch is retried after it was written", async () => {
  const raw = lineThenClose();
  try {
    await withEnv(async (env) => {
      const a = await env.start("batch", "a");
      const b = await env.start("batch", "b");
      const client = env.client();
      const stub = client.stub<Who>("batch", { idempotent: ["add", "who"] });
      const results = await stub.$batch([
        { method: "add", params: [1, 2] },
        { method: "invalid" },
        { method: "who" },
      ]);
      const ranOn = a.calls.length > 0 ? a : b;
      const other = ranOn === a ? b : a;
      assert.deepEqual(ranOn.calls.sort(), ["add", "invalid", "who"]);
      assert.deepEqual(other.calls, []);
      assert.deepEqual(results[0], { ok: true, value: 3 });
      assert.equal(results[1].ok, false);
      const failed = results[1].ok ? null : results[1].error;
      assert.ok(failed instanceof ServerError);
      assert.equal(failed.code, INVALID_PARAMS);
      assert.equal(failed.endpoint, ranOn.endpoint.url);
      assert.deepEqual(results[2], { ok: true, value: ranOn.id });

      // A server that reads the batch and dies: an all-idempotent batch
      // moves on, one with a method not declared idempotent does not.
      await env.admin.bind("flaky", { id: "raw", url: raw.url });
      const good = await env.start("flaky", "good");
      const flakyClient = env.client();
      const flaky = flakyClient.stub<Who>("flaky", {
        distributor: roundRobin({ start: 0 }),
        idempotent: ["add", "who"],
      });
      const moved = await flaky.$batch([
        { method: "add", params: [2, 3] },
        { method: "who" },
      ]);
      assert.deepEqual(moved, [{ ok: true, value: 5 }, {
        ok: true,
        value: "good",
      }]);
      assert.equal(raw.lines.length, 1);
      assert.deepEqual(
        JSON.parse(raw.lines[0]).map((r: { method: string }) => r.method),
        ["add", "who"],
      );

      const strictClient = env.client();
      const strict = strictClient.stub<Who>("flaky", {
        distributor: roundRobin({ start: 0 }),
        idempotent: ["add"],
      });
      await assert.rejects(
        strict.$batch([{ method: "add", params: [1, 1] }, { method: "crash" }]),
        (error) =>
          error instanceof AmbiguousError && error.endpoint === raw.url,
      );
      assert.equal(raw.lines.length, 2);
      assert.deepEqual(good.calls, ["add", "who"]);
      await assert.rejects(stub.$batch([]), RangeError);
    });
  } finally {
    await raw.close();
  }
});

Deno.test("the cluster map knows its age: the revision it reflects, when it changed, whether a watch keeps it current", async () => {
  await withEnv(async (env) => {
    await env.start("aged", "a");
    const client = env.client();
    assert.equal(client.mapAge("aged"), undefined);
    const stub = client.stub<Who>("aged");
    assert.deepEqual(client.mapAge("aged"), {
      revision: 0,
      updatedAt: null,
      watched: false,
    });
    const before = Date.now();
    assert.equal(await stub.who(), "a");
    const first = client.mapAge("aged")!;
    assert.ok(first.revision > 0);
    assert.ok(first.updatedAt !== null && first.updatedAt >= before);
    await waitFor(
      () => client.mapAge("aged")!.watched,
      "the map to be watched",
    );
    const { endpoint } = await env.start("aged", "b");
    await waitFor(
      () => client.mapAge("aged")!.revision >= endpoint.modRevision,
      "the watch to bring b's revision",
    );
    assert.ok(client.mapAge("aged")!.updatedAt! >= first.updatedAt!);
    assert.deepEqual(client.endpointStates("aged").map((s) => s.id).sort(), [
      "a",
      "b",
    ]);
  });
});

Deno.test("the latency a distributor sees leaves out opening the connection: a slow dial does not make a server look slow", async () => {
  await withEnv(async (env) => {
    await env.start("dial", "a");
    const slowDialer: Dialer = async (url, options) => {
      await delay(150);
      return await denoTcpDialer(url, options);
    };
    const client = env.client({ dialer: slowDialer });
    const seen: number[] = [];
    const rotation = roundRobin();
    const stub = client.stub<Who>("dial", {
      distributor: {
        choose(endpoints, call) {
          seen.push(endpoints[0].stats.ewmaLatencyMs);
          return rotation.choose(endpoints, call);
        },
      },
    });
    const started = Date.now();
    assert.equal(await stub.who(), "a");
    assert.ok(
      Date.now() - started >= 150,
      "the first call waited for the dial",
    );
    assert.equal(await stub.who(), "a");
    assert.equal(seen[0], 0);
    assert.ok(
      seen[1] > 0 && seen[1] < 100,
      `EWMA after the first call: ${seen[1]} ms`,
    );
  });
});

Deno.test("time a slow first lookup took comes off the attempt: the server is sent only what is left of the deadline", async () => {
  const seen: (number | null)[] = [];
  const server = serve({
    methods: {
      left: withContext(({ deadline }) => {
        seen.push(deadline === null ? null : deadline - Date.now());
        return "ok";
      }),
    },
  });
  const health = new HealthBook();
  const pool = new ConnectionPool({ dialer: denoTcpDialer });
  const endpoint = makeEndpoint({ id: "a", url: server.url });
  const map = new ClusterMap("slow-lookup", {
    // A registry that takes 200 ms to answer the first lookup.
    lookup: async () => {
      await delay(200);
      return {
        name: "slow-lookup",
        query: {},
        revision: 1,
        endpoints: [endpoint],
        total: 1,
      };
    },
  }, { health });
  try {
    const stub = new ClusterStub("slow-lookup", { map, pool, health }, {
      deadlineMs: 1_000,
    });
    assert.equal(await stub.call("left"), "ok");
    assert.equal(seen.length, 1);
    // 1000 ms less the 200 ms lookup; before the fix it was sent 1000.
    assert.ok(
      seen[0] !== null && seen[0] <= 820 && seen[0] > 500,
      `the server saw ${seen[0]} ms left`,
    );
    // The map is current now: the next call gets the whole deadline.
    assert.equal(await stub.call("left"), "ok");
    assert.ok(seen[1] !== null && seen[1] > 900, `then ${seen[1]} ms left`);
  } finally {
    map.close();
    pool.close();
    await server.close();
  }
});

Deno.test("a server's answer that the attempt's deadline passed counts as the attempt timing out: retried if it may have run only when idempotent, always if it had not started", async () => {
  /** Serves `late` answering -32003 as a Rafter server whose deadline passed. */
  const lateServer = (started: boolean, calls: string[]) =>
    serve({
      methods: {
        late: () => {
          calls.push(`late ${started}`);
          throw new RpcError(
            DEADLINE_EXCEEDED,
            "Deadline exceeded: the call ran past the client's deadline (timeoutMs 100)",
            { timeoutMs: 100, started },
          );
        },
      },
    });
  const calls: string[] = [];
  const ran = lateServer(true, calls);
  const queued = lateServer(false, calls);
  const good = serve({ methods: { late: () => (calls.push("good"), "ok") } });
  const health = new HealthBook();
  const pool = new ConnectionPool({ dialer: denoTcpDialer });
  const maps: ClusterMap[] = [];
  /** A stub over `servers`, in that order (first available). */
  const stubOver = (servers: RpcServer[], idempotent: boolean) => {
    const endpoints = servers.map((s, i) =>
      makeEndpoint({ id: `s${i}`, url: s.url })
    );
    const map = new ClusterMap("late", {
      lookup: () =>
        Promise.resolve({
          name: "late",
          query: {},
          revision: 1,
          endpoints,
          total: endpoints.length,
        }),
    }, { health });
    maps.push(map);
    return new ClusterStub("late", { map, pool, health }, {
      idempotent,
      distributor: { choose: (candidates) => candidates[0] },
    });
  };
  try {
    // May have run: an idempotent call moves on at once.
    assert.equal(await stubOver([ran, good], true).call("late"), "ok");
    assert.deepEqual(calls.splice(0), ["late true", "good"]);
    assert.equal(health.of(ran.url).state, "suspect");
    // May have run, not idempotent: ambiguous, not retried.
    await assert.rejects(
      stubOver([ran, good], false).call("late"),
      (error) =>
        error instanceof AmbiguousError && error.code === DEADLINE_EXCEEDED &&
        error.endpoint === ran.url,
    );
    assert.deepEqual(calls.splice(0), ["late true"]);
    // Had not started: not sent, so even a non-idempotent call moves on.
    assert.equal(await stubOver([queued, good], false).call("late"), "ok");
    assert.deepEqual(calls.splice(0), ["late false", "good"]);
  } finally {
    for (const map of maps) map.close();
    pool.close();
    for (const server of [ran, queued, good]) await server.close();
  }
});
