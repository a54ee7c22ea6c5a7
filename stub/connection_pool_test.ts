import assert from "node:assert/strict";
import { ConnectionError } from "../rpc/errors.ts";
import { serve } from "../rpc/serve.ts";
import { freePorts } from "../raft/_test_util.ts";
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

Deno.test("a URL nobody listens on rejects with ConnectionError written=false and is not cached", async () => {
  const [port] = freePorts(1);
  const url = `tcp://127.0.0.1:${port}`;
  const pool = new ConnectionPool({ connectTimeoutMs: 1_000 });
  await assert.rejects(pool.get(url), (error: unknown) => {
    assert.ok(error instanceof ConnectionError);
    assert.equal(error.written, false);
    assert.match(error.message, new RegExp(`^cannot connect to ${url}: `));
    return true;
  });
  // Once something listens there, the next get connects.
  const server = serve({ port, methods: {} });
  try {
    const connection = await pool.get(url);
    assert.equal(await connection.call("rpc.ping"), "pong");
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
