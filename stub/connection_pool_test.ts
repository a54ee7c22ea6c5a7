import assert from "node:assert/strict";
import { ConnectionError } from "../rpc/errors.ts";
import { serve } from "../adapter/deno/serve.ts";
import { withContext } from "../rpc/server/method.ts";
import { delay, shiftableWallClock, waitFor, within } from "../testing/time.ts";
import { freePorts } from "../testing/ports.ts";
import { denoTcpDialer } from "../adapter/deno/tcp.ts";
import { ConnectionPool } from "./connection_pool.ts";

Deno.test("one connection per URL, shared by concurrent callers", async () => {
  const server = serve({ methods: { echo: (x: unknown) => x } });
  const pool = new ConnectionPool();
  try {
    const [a, b] = await Promise.all([
      pool.get(server.url),
      pool.get(server.url),
    ]);
    assert.equal(a, b);
    assert.equal(await pool.get(server.url), a);
    assert.equal(await a.call("echo", [7]), 7);
  } finally {
    pool.close();
    await server.close();
  }
});

Deno.test("a closed connection is replaced by one new connection, even for concurrent callers", async () => {
  const server = serve({ methods: { echo: (x: unknown) => x } });
  const pool = new ConnectionPool();
  try {
    const first = await pool.get(server.url);
    first.close();
    const [a, b, c] = await Promise.all([
      pool.get(server.url),
      pool.get(server.url),
      pool.get(server.url),
    ]);
    assert.notEqual(a, first);
    assert.equal(a, b);
    assert.equal(b, c);
    assert.equal(a.isClosed, false);
    assert.equal(await a.call("echo", ["again"]), "again");
    await first.closed;
    assert.equal(await pool.get(server.url), a);
  } finally {
    pool.close();
    await server.close();
  }
});

Deno.test("drop and close close the pooled connections; the pool reconnects later", async () => {
  const server = serve({ methods: { echo: (x: unknown) => x } });
  const pool = new ConnectionPool();
  try {
    const first = await pool.get(server.url);
    pool.drop(server.url);
    await first.closed;
    assert.equal(first.isClosed, true);
    const second = await pool.get(server.url);
    assert.notEqual(second, first);
    pool.close();
    await second.closed;
    assert.equal(second.isClosed, true);
    const third = await pool.get(server.url);
    assert.equal(await third.call("echo", [3]), 3);
    // Dropping a URL while its connection is still opening closes it too.
    pool.close();
    const opening = pool.get(server.url);
    pool.drop(server.url);
    const fourth = await opening;
    await fourth.closed;
    assert.equal(fourth.isClosed, true);
  } finally {
    pool.close();
    await server.close();
  }
});

Deno.test("a URL nobody listens on rejects with ConnectionError written=false; it is not redialed before a back-off, then is", async () => {
  const [port] = freePorts(1);
  const url = `tcp://127.0.0.1:${port}`;
  let dials = 0;
  const pool = new ConnectionPool({
    connectTimeoutMs: 1_000,
    minReconnectMs: 200,
    maxReconnectMs: 200,
    dialer: (target, options) => {
      dials++;
      return denoTcpDialer(target, options);
    },
  });
  await assert.rejects(pool.get(url), (error: unknown) => {
    assert.ok(error instanceof ConnectionError);
    assert.equal(error.written, false);
    assert.match(error.message, new RegExp(`^cannot connect to ${url}: `));
    return true;
  });
  assert.equal(dials, 1);
  // Within its back-off (jittered, at most 200 ms) it fails at once,
  // without a dial, saying why; a caller can go to another server.
  const server = serve({ port, methods: {} });
  try {
    const early = await pool.get(url).then(() => null, (error) => error);
    if (early !== null) {
      assert.ok(early instanceof ConnectionError);
      assert.equal(early.written, false);
      assert.match(
        early.message,
        /^cannot connect to tcp:\/\/127\.0\.0\.1:\d+: .*refused.* \(the last attempt; not redialing for another \d+ ms\)$/i,
      );
      assert.equal(dials, 1);
    }
    // After it, the next get connects.
    await delay(250);
    const connection = await pool.get(url);
    assert.equal(await connection.call("rpc.ping"), "pong");
  } finally {
    pool.close();
    await server.close();
  }
});

Deno.test("size > 1: calls spread over up to size connections, the least busy first", async () => {
  const release = Promise.withResolvers<void>();
  const server = serve({
    methods: { wait: () => release.promise.then(() => "done") },
  });
  let dials = 0;
  const pool = new ConnectionPool({
    size: 2,
    dialer: (target, options) => {
      dials++;
      return denoTcpDialer(target, options);
    },
  });
  try {
    const first = await pool.get(server.url);
    const busy = first.call("wait");
    // The only connection is busy: a second one is opened for the next calls.
    assert.equal(pool.ready(server.url), first);
    await waitFor(() => dials === 2, "a second connection");
    const second = await waitFor(() => {
      const ready = pool.ready(server.url);
      return ready !== first ? ready : undefined;
    }, "the second connection to be ready");
    assert.notEqual(second, first);
    release.resolve();
    assert.equal(await busy, "done");
    // Never more than size.
    await second.call("rpc.ping");
    assert.equal(dials, 2);
  } finally {
    pool.close();
    await server.close();
  }
});

Deno.test("drain(url) lets calls under way finish and takes no new ones; idle connections close", async () => {
  const release = Promise.withResolvers<void>();
  const server = serve({
    methods: { wait: () => release.promise.then(() => "done") },
  });
  const pool = new ConnectionPool({ idleCloseMs: 100 });
  try {
    const connection = await pool.get(server.url);
    const busy = connection.call("wait");
    pool.drain(server.url);
    assert.equal(pool.ready(server.url), undefined);
    await assert.rejects(connection.call("rpc.ping"), (error: unknown) => {
      assert.ok(error instanceof ConnectionError);
      assert.equal(error.written, false);
      return true;
    });
    release.resolve();
    assert.equal(await busy, "done");
    await within(connection.closed, 1_000, "the drained connection to close");
    // A fresh connection, left idle, is closed after idleCloseMs.
    const fresh = await pool.get(server.url);
    assert.notEqual(fresh, connection);
    await within(fresh.closed, 2_000, "the idle connection to close");
  } finally {
    pool.close();
    await server.close();
  }
});

Deno.test("ready() hands out an open connection at once, and nothing once it closes, is dropped or goes away", async () => {
  const server = serve({ methods: {} });
  const pool = new ConnectionPool();
  try {
    assert.equal(pool.ready(server.url), undefined);
    const opening = pool.get(server.url);
    assert.equal(pool.ready(server.url), undefined); // still connecting
    const connection = await opening;
    assert.equal(pool.ready(server.url), connection);
    connection.close();
    assert.equal(pool.ready(server.url), undefined);
    const second = await pool.get(server.url);
    assert.equal(pool.ready(server.url), second);
    pool.drop(server.url);
    assert.equal(pool.ready(server.url), undefined);
    // A server that drains sends rpc.goaway: the connection takes no calls.
    const third = await pool.get(server.url);
    await server.drain(1_000);
    await third.closed;
    assert.equal(pool.ready(server.url), undefined);
  } finally {
    pool.close();
    await server.close();
  }
});

Deno.test("propagateDeadlines: the pool's connections send the time left by default, and not when turned off", async () => {
  const server = serve({
    methods: {
      deadline: withContext(({ deadline }) =>
        deadline === null ? null : deadline - Date.now()
      ),
    },
  });
  const on = new ConnectionPool();
  const off = new ConnectionPool({ propagateDeadlines: false });
  try {
    const left = await (await on.get(server.url)).call("deadline", [], {
      timeoutMs: 5_000,
    });
    assert.ok(
      // The server adds 1 ms for the fraction of a ms Date.now() drops.
      typeof left === "number" && left > 4_000 && left <= 5_001,
      `${left}`,
    );
    const none = await (await off.get(server.url)).call("deadline", [], {
      timeoutMs: 5_000,
    });
    assert.equal(none, null);
  } finally {
    on.close();
    off.close();
    await server.close();
  }
});

Deno.test("a wall clock stepped back an hour does not hold off the redial of a URL that failed", async () => {
  const [port] = freePorts(1);
  const url = `tcp://127.0.0.1:${port}`;
  const wall = shiftableWallClock();
  const pool = new ConnectionPool({ minReconnectMs: 20, maxReconnectMs: 20 });
  let server: ReturnType<typeof serve> | undefined;
  try {
    // Nothing listens yet: the dial fails and the URL backs off 20 ms.
    await assert.rejects(pool.get(url), ConnectionError);
    wall.offsetMs = -3_600_000;
    server = serve({ port, methods: { ping: () => "pong" } });
    await delay(100);
    const connection = await pool.get(url);
    assert.equal(await connection.call("ping"), "pong");
  } finally {
    wall.restore();
    pool.close();
    await server?.close();
  }
});

Deno.test("ready(url, at) counts the connection used at `at`; a pool with its own clock reads that instead", async () => {
  const server = serve({ methods: {} });
  // Real clock: used "now" per the time given, so not idle yet.
  const pool = new ConnectionPool({ idleCloseMs: 100 });
  let now = 0;
  const clocked = new ConnectionPool({ idleCloseMs: 100, now: () => now });
  try {
    const connection = await pool.get(server.url);
    // Used (so it says) 10 s from now: the idle sweeps leave it open.
    assert.equal(
      pool.ready(server.url, performance.now() + 10_000),
      connection,
    );
    await delay(400);
    assert.equal(connection.isClosed, false);
    // Its own clock: `at` (far ahead) is ignored, and the connection, last
    // used at 0 by that clock, is idle once the clock passes 100 ms.
    const other = await clocked.get(server.url);
    assert.equal(clocked.ready(server.url, 1e12), other);
    now = 1_000;
    await within(other.closed, 2_000, "the idle connection to close");
  } finally {
    pool.close();
    clocked.close();
    await server.close();
  }
});
