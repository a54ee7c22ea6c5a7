import "../../rpc/codec/cbor.ts";
import assert from "node:assert/strict";
import { dial } from "../../rpc/transport/dial.ts";
import { serve } from "./serve.ts";
import { fromNodeSocket, nodeTcpDialer } from "./tcp.ts";
import { connect, createServer, type Socket } from "node:net";
import { directOf } from "../../rpc/transport/conn_stream.ts";

// Runs the node:net adapter under Deno's Node compatibility; the npm
// package test runs it under Node itself.

Deno.test("node adapter: serve() and the node:net dialer carry calls, large frames both ways, and close cleanly", async () => {
  const server = await serve({
    methods: {
      echo: (value: unknown) => value,
      size: (text: string) => text.length,
    },
  });
  try {
    assert.match(server.url, /^tcp:\/\/127\.0\.0\.1:\d+$/);
    const connection = await dial(server.url, { dialer: nodeTcpDialer });
    try {
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, i) => connection.call("echo", [i])),
      );
      assert.deepEqual(answers, Array.from({ length: 100 }, (_, i) => i));
      // 900 KiB each way: more than one socket write and read, under the
      // 1 MiB frame limit.
      const big = "x".repeat(900 * 1024);
      assert.equal(await connection.call("size", [big]), big.length);
      assert.equal(
        (await connection.call("echo", [big]) as string).length,
        big.length,
      );
    } finally {
      connection.close();
    }
  } finally {
    await server.close();
  }
});

Deno.test("node adapter: a refused connection and an aborted dial reject", async () => {
  const server = await serve({ methods: {} });
  const url = server.url;
  await server.close();
  await assert.rejects(nodeTcpDialer(url), /ECONNREFUSED|refused/i);
  const controller = new AbortController();
  controller.abort(new Error("given up"));
  await assert.rejects(
    nodeTcpDialer(url, { signal: controller.signal }),
    /given up/,
  );
});

Deno.test("node adapter: drain() sends rpc.goaway and finishes once the client has left", async () => {
  const server = await serve({ methods: { ping2: () => "pong" } });
  const connection = await dial(server.url, { dialer: nodeTcpDialer });
  assert.equal(await connection.call("ping2"), "pong");
  const drained = server.drain(2_000);
  await connection.closed;
  await drained;
});

Deno.test("node adapter: serve() hears CBOR and NDJSON clients on one port, over the node:net dialer", async () => {
  const server = await serve({ methods: { echo: (value: unknown) => value } });
  const [cbor, json] = await Promise.all([
    dial(server.url, { dialer: nodeTcpDialer, codec: "cbor" }),
    dial(server.url, { dialer: nodeTcpDialer }),
  ]);
  try {
    const sent = {
      id: Number.MAX_SAFE_INTEGER,
      items: [{ sku: "a", price: 1.5 }],
    };
    assert.deepEqual(await cbor.call("echo", [sent]), sent);
    assert.deepEqual(await json.call("echo", [sent]), sent);
    const big = "é".repeat(400 * 1024);
    assert.equal(await cbor.call("echo", [big]), big);
  } finally {
    cbor.close();
    json.close();
    await server.close();
  }
});

Deno.test("node adapter: fromNodeSocket's direct reads stop the socket after 16 unread chunks, resume when read, and deliver every byte before the end", async () => {
  const total = 4 * 1024 * 1024;
  const { promise: accepted, resolve: accept } = Promise.withResolvers<
    Socket
  >();
  const server = createServer((socket) => accept(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  const sender = connect({ host: "127.0.0.1", port });
  const socket = await accepted;
  const receiver = fromNodeSocket(socket);
  try {
    const direct = directOf(receiver)!;
    assert.ok(direct !== undefined);
    const chunk = new Uint8Array(64 * 1024).fill(7);
    let written = 0;
    for (; written < total; written += chunk.length) sender.write(chunk);
    // Nobody reads: once 16 chunks wait, the receiving socket is paused.
    for (let i = 0; i < 400 && !socket.isPaused(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.ok(socket.isPaused(), "the socket was never paused");
    sender.end();
    let received = 0;
    for (let i = 0; i < 100_000; i++) {
      const got = await direct.read();
      if (got === null) break;
      received += got.length;
    }
    assert.equal(received, written);
    assert.equal(await direct.read(), null);
  } finally {
    receiver.close();
    sender.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
});
