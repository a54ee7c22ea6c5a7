import "../codec/cbor.ts";
import assert from "node:assert/strict";
import {
  LIMIT_EXCEEDED,
  PERMISSION_DENIED,
  RpcError,
  UNAUTHENTICATED,
} from "../errors.ts";
import { type RpcServer, serve } from "../../adapter/deno/serve.ts";
import type { ServeOptions } from "./server.ts";
import {
  AUTHENTICATE_METHOD,
  type RpcSession,
  validateServerLimits,
} from "./server_connection.ts";
import {
  CBOR_PREAMBLE,
  cborFrame,
  RawClient,
  RawFrameClient,
} from "../../testing/rpc.ts";
import { delay, waitFor, within } from "../../testing/time.ts";

const PING = '{"jsonrpc":"2.0","method":"rpc.ping","id":"ping"}';
const PONG = '{"jsonrpc":"2.0","result":"pong","id":"ping"}';

async function withServer(
  options: Partial<ServeOptions>,
  fn: (server: RpcServer) => Promise<void>,
): Promise<void> {
  const server = serve({ methods: {}, ...options });
  try {
    await fn(server);
  } finally {
    await within(server.close(), 5_000, "server.close()");
  }
}

/** The error object of one NDJSON line, checked to be a response with id null. */
function errorOf(
  line: string | null,
): { code: number; message: string; data?: unknown } {
  assert.ok(line !== null, "a line, not the end of the stream");
  const response = JSON.parse(line);
  assert.equal(response.jsonrpc, "2.0");
  assert.ok("error" in response, `an error response: ${line}`);
  return response.error;
}

/**
 * Runs `fn` with `console.error` captured; then asserts that a logged
 * line matches `expected`.
 */
async function expectLogged(
  expected: RegExp,
  fn: () => Promise<void>,
): Promise<void> {
  const logged: string[] = [];
  const consoleError = console.error;
  console.error = (...args: unknown[]) => void logged.push(args.join(" "));
  try {
    await fn();
  } finally {
    console.error = consoleError;
  }
  assert.ok(
    logged.some((line) => expected.test(line)),
    `log: ${logged.join("\n")}`,
  );
}

/** Pings on `client` every 50 ms until `stop` aborts; returns how many answered. */
async function keepPinging(
  client: RawClient,
  stop: AbortSignal,
): Promise<number> {
  let answered = 0;
  while (!stop.aborted) {
    await client.send(PING);
    assert.equal(await client.line(2_000), PONG);
    answered++;
    await delay(50);
  }
  return answered;
}

/** Writes `bytes` one at a time, `everyMs` apart, until a write fails. */
async function drip(
  write: (bytes: Uint8Array) => Promise<void>,
  bytes: Uint8Array,
  everyMs: number,
): Promise<void> {
  for (let i = 0;; i = (i + 1) % bytes.length) {
    try {
      await write(bytes.subarray(i, i + 1));
    } catch {
      return;
    }
    await delay(everyMs);
  }
}

Deno.test("a line dripped one byte every 100 ms is answered LIMIT_EXCEEDED (frameTimeoutMs) and closed, while another client carries on", async () => {
  await withServer({ frameTimeoutMs: 500 }, async (server) => {
    const good = await RawClient.connect(server.port);
    const slow = await RawClient.connect(server.port);
    const stop = new AbortController();
    try {
      const pinging = keepPinging(good, stop.signal);
      const started = performance.now();
      const dripping = drip(
        (bytes) => slow.write(bytes),
        new TextEncoder().encode('{"jsonrpc":"2.0","method":"rpc.ping"'),
        100,
      );
      const error = errorOf(await slow.line(5_000));
      assert.equal(error.code, LIMIT_EXCEEDED);
      assert.deepEqual(error.data, { limit: "frameTimeoutMs", value: 500 });
      assert.match(error.message, /longer than 500 ms .*frameTimeoutMs/);
      assert.equal(await slow.rest(5_000), "", "then the server closes");
      const closedAfter = performance.now() - started;
      assert.ok(
        closedAfter >= 450,
        `closed after ${closedAfter} ms, too early`,
      );
      assert.ok(closedAfter < 3_000, `closed after ${closedAfter} ms`);
      stop.abort();
      assert.ok(await pinging >= 3, "the good client was answered meanwhile");
      await dripping;
    } finally {
      stop.abort();
      good.close();
      slow.close();
    }
  });
});

Deno.test("a CBOR frame dripped too slowly is answered LIMIT_EXCEEDED in CBOR and closed", async () => {
  await withServer({ frameTimeoutMs: 300 }, async (server) => {
    const slow = await RawFrameClient.connect(server.port);
    try {
      const frame = cborFrame({ jsonrpc: "2.0", method: "rpc.ping", id: 1 });
      const dripping = drip((bytes) => slow.write(bytes), frame, 100);
      const response = await slow.message(5_000) as Record<string, unknown>;
      assert.equal(response.id, null);
      const error = response.error as Record<string, unknown>;
      assert.equal(error.code, LIMIT_EXCEEDED);
      assert.deepEqual(error.data, { limit: "frameTimeoutMs", value: 300 });
      assert.equal(await slow.message(5_000), null, "then the server closes");
      await dripping;
    } finally {
      slow.close();
    }
  });
});

Deno.test("frameTimeoutMs counts only while a frame is arriving: slow whole frames and quiet gaps are fine", async () => {
  await withServer({ frameTimeoutMs: 400 }, async (server) => {
    const client = await RawClient.connect(server.port);
    const cbor = await RawFrameClient.connect(server.port, false);
    try {
      await client.write(PING.slice(0, 10));
      await delay(150);
      await client.write(PING.slice(10, 30));
      await delay(150);
      await client.write(PING.slice(30) + "\n");
      assert.equal(await client.line(), PONG);
      await delay(600); // quiet between frames: longer than the deadline
      await client.send(PING);
      assert.equal(await client.line(), PONG);
      // CBOR: the preamble alone, then a quiet gap, then a frame.
      await cbor.write(CBOR_PREAMBLE);
      await delay(600);
      await cbor.send({ jsonrpc: "2.0", method: "rpc.ping", id: 2 });
      assert.deepEqual(await cbor.message(), {
        jsonrpc: "2.0",
        result: "pong",
        id: 2,
      });
    } finally {
      client.close();
      cbor.close();
    }
  });
});

Deno.test("a connection over maxConnections gets one LIMIT_EXCEEDED frame and is closed; the count drops when one closes", async () => {
  await withServer({ maxConnections: 2 }, async (server) => {
    const a = await RawClient.connect(server.port);
    const b = await RawClient.connect(server.port);
    const c = await RawClient.connect(server.port);
    try {
      for (const client of [a, b]) {
        await client.send(PING);
        assert.equal(await client.line(), PONG);
      }
      await c.send(PING);
      const error = errorOf(await c.line());
      assert.equal(error.code, LIMIT_EXCEEDED);
      assert.deepEqual(error.data, { limit: "maxConnections", value: 2 });
      assert.match(error.message, /2 connections open.*maxConnections/);
      assert.equal(await c.rest(), "", "then the server closes");
      await a.send(PING);
      assert.equal(await a.line(), PONG, "the others carry on");
      a.close();
      await waitFor(async () => {
        const d = await RawClient.connect(server.port);
        try {
          await d.send(PING);
          return await d.line() === PONG;
        } finally {
          d.close();
        }
      }, "a new connection once one has closed");
    } finally {
      for (const client of [a, b, c]) client.close();
    }
  });
});

Deno.test("a connection over maxConnectionsPerAddress is refused in its own codec (CBOR too)", async () => {
  await withServer({ maxConnectionsPerAddress: 1 }, async (server) => {
    const a = await RawClient.connect(server.port);
    await a.send(PING);
    assert.equal(await a.line(), PONG);
    const b = await RawClient.connect(server.port);
    const c = await RawFrameClient.connect(server.port);
    try {
      await b.send(PING);
      const error = errorOf(await b.line());
      assert.equal(error.code, LIMIT_EXCEEDED);
      assert.deepEqual(error.data, {
        limit: "maxConnectionsPerAddress",
        value: 1,
      });
      assert.match(
        error.message,
        /from 127\.0\.0\.1 .*maxConnectionsPerAddress/,
      );
      assert.equal(await b.rest(), "");
      await c.send({ jsonrpc: "2.0", method: "rpc.ping", id: 1 });
      const response = await c.message() as Record<string, unknown>;
      assert.equal((response.error as { code: number }).code, LIMIT_EXCEEDED);
      assert.equal(response.id, null);
      assert.equal(await c.message(), null);
      await a.send(PING);
      assert.equal(await a.line(), PONG);
    } finally {
      for (const client of [a, b, c]) client.close();
    }
  });
});

Deno.test("a client that floods requests and reads nothing is closed at maxQueuedBytes, with a log line; others carry on", async () => {
  const closed = Promise.withResolvers<void>();
  const expected =
    /closing the connection from 127\.0\.0\.1:\d+: \d+ bytes .*maxQueuedBytes 1048576/;
  await expectLogged(expected, async () => {
    await withServer({
      maxQueuedBytes: 1024 * 1024,
      methods: (session: RpcSession) => {
        session.signal.addEventListener("abort", () => closed.resolve());
        return { big: () => "x".repeat(256 * 1024) };
      },
    }, async (server) => {
      const good = await RawClient.connect(server.port);
      await good.send(PING);
      assert.equal(await good.line(), PONG);
      const flood = await RawClient.connect(server.port);
      try {
        const request = '{"jsonrpc":"2.0","method":"big","id":1}\n';
        // Far more answers than the socket buffers hold: the queue grows.
        flood.write(request.repeat(2_000)).catch(() => {});
        await within(closed.promise, 20_000, "the flooding connection closed");
        await good.send(PING);
        assert.equal(await good.line(), PONG);
      } finally {
        good.close();
        flood.close();
      }
    });
  });
});

Deno.test("a client that asks for an answer and never reads it is closed after writeTimeoutMs, with a log line; a slow reader is not", async () => {
  const sessions: RpcSession[] = [];
  const size = 32 * 1024 * 1024; // far more than the socket buffers take
  const expected =
    /its socket took none of the \d+ bytes queued for it in 500 ms.*writeTimeoutMs/;
  await expectLogged(expected, async () => {
    await withServer({
      writeTimeoutMs: 500,
      maxQueuedBytes: 4 * size,
      methods: (session: RpcSession) => {
        sessions.push(session);
        return { big: () => "x".repeat(size) };
      },
    }, async (server) => {
      const request = new TextEncoder().encode(
        '{"jsonrpc":"2.0","method":"big","id":1}\n',
      );
      const stuck = await Deno.connect({ port: server.port });
      await stuck.write(request);
      await waitFor(() => sessions.length === 1, "the first session");
      const slow = await Deno.connect({ port: server.port });
      await waitFor(() => sessions.length === 2, "the second session");
      try {
        await slow.write(request);
        // Reads about 12 MB/s: the answer takes seconds, each write of it
        // far less than writeTimeoutMs.
        const started = performance.now();
        let received = 0;
        const buffer = new Uint8Array(64 * 1024);
        while (received <= size) {
          const count = await within(slow.read(buffer), 10_000, "a read");
          if (count === null) break;
          received += count;
          await delay(5);
        }
        const took = performance.now() - started;
        assert.ok(received > size, `the slow reader got ${received} bytes`);
        assert.ok(took > 600, `it read for ${took} ms, past writeTimeoutMs`);
        assert.equal(sessions[1].signal.aborted, false, "the reader stays");
        await within(
          new Promise((resolve) =>
            sessions[0].signal.aborted
              ? resolve(null)
              : sessions[0].signal.addEventListener("abort", resolve)
          ),
          10_000,
          "the unread connection closed",
        );
      } finally {
        stuck.close();
        slow.close();
      }
    });
  });
});

Deno.test("a flood of requests on one connection does not starve another connection's calls", async () => {
  await withServer({}, async (server) => {
    const flood = await RawClient.connect(server.port);
    const good = await RawClient.connect(server.port);
    try {
      flood.write((PING + "\n").repeat(50_000)).catch(() => {});
      await delay(50);
      const started = performance.now();
      for (let i = 0; i < 20; i++) {
        await good.send(PING);
        assert.equal(await good.line(5_000), PONG);
      }
      const took = performance.now() - started;
      assert.ok(took < 5_000, `20 pings took ${took} ms during the flood`);
    } finally {
      flood.close();
      good.close();
    }
  });
});

/** A server whose `authenticate` accepts the token "secret" as principal "ada". */
function authOptions(extra: Partial<ServeOptions> = {}): Partial<ServeOptions> {
  return {
    authenticate: (token: string) => {
      if (token === "boom") throw new Error("the token store is down");
      if (token === "denied") {
        throw new RpcError(PERMISSION_DENIED, "Permission denied: revoked");
      }
      return token === "secret" ? { name: "ada" } : null;
    },
    methods: (session: RpcSession) => ({
      whoami: () => session.principal ?? "nobody",
    }),
    ...extra,
  };
}

async function call(
  client: RawClient,
  method: string,
  params?: unknown,
): Promise<Record<string, unknown>> {
  const request: Record<string, unknown> = { jsonrpc: "2.0", method, id: 7 };
  if (params !== undefined) request.params = params;
  await client.send(JSON.stringify(request));
  const response = JSON.parse((await client.line())!);
  assert.equal(response.id, 7);
  return response;
}

Deno.test("with authenticate, calls before rpc.authenticate are refused UNAUTHENTICATED; ping and cancel are open", async () => {
  await withServer(authOptions(), async (server) => {
    const client = await RawClient.connect(server.port);
    try {
      const refused = await call(client, "whoami");
      const error = refused.error as { code: number; message: string };
      assert.equal(error.code, UNAUTHENTICATED);
      assert.match(error.message, /call rpc\.authenticate .*before "whoami"/);
      // Unknown methods are refused the same way: nothing is revealed.
      const unknown = await call(client, "nosuch");
      assert.equal((unknown.error as { code: number }).code, UNAUTHENTICATED);
      assert.equal((await call(client, "rpc.ping")).result, "pong");
      assert.equal(
        (await call(client, "rpc.cancel", { id: 99 })).result,
        false,
      );
      // Batches are gated member by member.
      await client.send(
        '[{"jsonrpc":"2.0","method":"rpc.ping","id":1},{"jsonrpc":"2.0","method":"whoami","id":2}]',
      );
      const batch = JSON.parse((await client.line())!);
      assert.equal(batch[0].result, "pong");
      assert.equal(batch[1].error.code, UNAUTHENTICATED);
    } finally {
      client.close();
    }
  });
});

Deno.test("rpc.authenticate refuses a bad token, a throwing hook and bad params; an RpcError passes through", async () => {
  await withServer(authOptions(), async (server) => {
    const client = await RawClient.connect(server.port);
    try {
      for (const token of ["wrong", "boom"]) {
        const response = await call(client, AUTHENTICATE_METHOD, { token });
        assert.deepEqual(response.error, {
          code: UNAUTHENTICATED,
          message: "Unauthenticated: the token was not accepted",
        });
      }
      const denied = await call(client, AUTHENTICATE_METHOD, {
        token: "denied",
      });
      assert.deepEqual(denied.error, {
        code: PERMISSION_DENIED,
        message: "Permission denied: revoked",
      });
      const bad = await call(client, AUTHENTICATE_METHOD, { token: 42 });
      assert.equal((bad.error as { code: number }).code, -32602);
      const still = await call(client, "whoami");
      assert.equal((still.error as { code: number }).code, UNAUTHENTICATED);
    } finally {
      client.close();
    }
  });
});

Deno.test("after a good token, calls run and the method sees session.principal", async () => {
  await withServer(authOptions(), async (server) => {
    const client = await RawClient.connect(server.port);
    const other = await RawClient.connect(server.port);
    try {
      assert.deepEqual(
        await call(client, AUTHENTICATE_METHOD, { token: "secret" }),
        { jsonrpc: "2.0", result: true, id: 7 },
      );
      assert.deepEqual((await call(client, "whoami")).result, { name: "ada" });
      // A stub's one argument, [{ token }], works too.
      assert.equal(
        (await call(other, AUTHENTICATE_METHOD, [{ token: "secret" }])).result,
        true,
      );
      assert.deepEqual((await call(other, "whoami")).result, { name: "ada" });
    } finally {
      client.close();
      other.close();
    }
  });
});

Deno.test("authTimeoutMs closes a connection that does not authenticate, with LIMIT_EXCEEDED; an authenticated one stays", async () => {
  await withServer(authOptions({ authTimeoutMs: 300 }), async (server) => {
    const silent = await RawClient.connect(server.port);
    const good = await RawClient.connect(server.port);
    try {
      assert.equal(
        (await call(good, AUTHENTICATE_METHOD, { token: "secret" })).result,
        true,
      );
      const started = performance.now();
      const error = errorOf(await silent.line(5_000));
      assert.equal(error.code, LIMIT_EXCEEDED);
      assert.deepEqual(error.data, { limit: "authTimeoutMs", value: 300 });
      assert.match(error.message, /did not authenticate within 300 ms/);
      assert.equal(await silent.rest(), "");
      assert.ok(performance.now() - started < 3_000);
      await delay(100);
      assert.deepEqual((await call(good, "whoami")).result, { name: "ada" });
    } finally {
      silent.close();
      good.close();
    }
  });
});

Deno.test("without authenticate, session.principal is undefined and rpc.authenticate is an ordinary name", async () => {
  await withServer({
    methods: (session: RpcSession) => ({
      whoami: () => session.principal === undefined,
    }),
  }, async (server) => {
    const client = await RawClient.connect(server.port);
    try {
      assert.equal((await call(client, "whoami")).result, true);
      const response = await call(client, AUTHENTICATE_METHOD, { token: "x" });
      assert.equal((response.error as { code: number }).code, -32601);
    } finally {
      client.close();
    }
  });
});

Deno.test("validateServerLimits refuses bad new limits, naming the option", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ frameTimeoutMs: -1 }, /^frameTimeoutMs must be a number of ms >= 0/],
    [{ authTimeoutMs: "10" }, /^authTimeoutMs must be a number of ms >= 0/],
    [
      { maxQueuedBytes: 0 },
      /^maxQueuedBytes must be a positive integer number of bytes, got 0/,
    ],
    [
      { maxConnections: 1.5 },
      /^maxConnections must be a positive integer, got 1.5/,
    ],
    [
      { maxConnectionsPerAddress: 0 },
      /^maxConnectionsPerAddress must be a positive integer/,
    ],
    [{ authenticate: "secret" }, /^authenticate must be a function/],
  ];
  for (const [limits, message] of cases) {
    assert.throws(() => validateServerLimits(limits), (error: unknown) => {
      assert.ok(error instanceof RangeError);
      assert.match(error.message, message);
      return true;
    });
  }
  assert.throws(
    () => serve({ methods: {}, maxConnections: 0 }),
    RangeError,
    "serve() refuses it before listening",
  );
});
