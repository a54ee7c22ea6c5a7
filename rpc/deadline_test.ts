import assert from "node:assert/strict";
import { CANCELLED, DEADLINE_EXCEEDED, RpcError } from "./errors.ts";
import { RpcConnection } from "./connection.ts";
import { dial } from "./dial.ts";
import type { Response } from "./message.ts";
import { delay, fakeStream } from "./_test_util.ts";

// ---------------------------------------------------------------- client side

/** What `promise` rejects with (it must reject with an RpcError). */
function rejection(promise: Promise<unknown>): Promise<RpcError> {
  return promise.then(
    (value) => {
      throw new Error(`resolved with ${JSON.stringify(value)}`);
    },
    (error) => {
      assert.ok(error instanceof RpcError, `not an RpcError: ${error}`);
      return error;
    },
  );
}

/** The lines written to a fake stream. */
function sentLines(fake: ReturnType<typeof fakeStream>): string[] {
  return fake.written().split("\n").filter((line) => line !== "");
}

Deno.test("each request carries the ms left as timeoutMs, rounded up; none without a deadline", async () => {
  const fake = fakeStream();
  const connection = new RpcConnection(fake.stream);
  const unlimited = new RpcConnection(fakeStream().stream, {
    timeoutMs: Infinity,
  });
  try {
    connection.call("a").catch(() => {});
    connection.call("b", ["x"], { timeoutMs: 1234.2 }).catch(() => {});
    connection.call("c", { k: 1 }, { timeoutMs: Infinity }).catch(() => {});
    // Past setTimeout's range the client has no timer: no deadline.
    connection.call("d", [], { timeoutMs: 2 ** 31 }).catch(() => {});
    connection.notify("e", [1]).catch(() => {});
    await delay(0);
    assert.deepEqual(sentLines(fake), [
      '{"jsonrpc":"2.0","method":"a","id":1,"timeoutMs":30000}',
      '{"jsonrpc":"2.0","method":"b","params":["x"],"id":2,"timeoutMs":1235}',
      '{"jsonrpc":"2.0","method":"c","params":{"k":1},"id":3}',
      '{"jsonrpc":"2.0","method":"d","params":[],"id":4}',
      '{"jsonrpc":"2.0","method":"e","params":[1]}',
    ]);
  } finally {
    connection.close();
    unlimited.close();
    await connection.closed;
    await unlimited.closed;
  }
});

Deno.test("rpc.cancel follows a call that timed out and one that was aborted, once each", async () => {
  const fake = fakeStream();
  const unmatched: Response[] = [];
  const connection = new RpcConnection(fake.stream, {
    onUnmatchedResponse: (response) => void unmatched.push(response),
  });
  try {
    const timedOut = await rejection(
      connection.call("slow", [1], { timeoutMs: 20 }),
    );
    assert.equal(timedOut.code, DEADLINE_EXCEEDED);
    const controller = new AbortController();
    const aborted = rejection(
      connection.call("slow", [2], { signal: controller.signal }),
    );
    await delay(0);
    controller.abort();
    // The abort frees the call at once.
    assert.equal(connection.pendingCalls, 0);
    assert.equal((await aborted).code, CANCELLED);
    // A late answer to either is unmatched, and cancels nothing more.
    fake.push('{"jsonrpc":"2.0","result":"late","id":1}\n');
    await delay(10);
    assert.deepEqual(sentLines(fake), [
      '{"jsonrpc":"2.0","method":"slow","params":[1],"id":1,"timeoutMs":20}',
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":1}}',
      '{"jsonrpc":"2.0","method":"slow","params":[2],"id":2,"timeoutMs":30000}',
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":2}}',
    ]);
    assert.deepEqual(unmatched.map((response) => response.id), [1]);
  } finally {
    connection.close();
    await connection.closed;
  }
});

Deno.test("no rpc.cancel for a call that was answered, or never sent", async () => {
  const fake = fakeStream();
  const connection = new RpcConnection(fake.stream, { timeoutMs: 30 });
  try {
    const controller = new AbortController();
    const answered = connection.call("fast", [], { signal: controller.signal });
    await delay(0);
    fake.push('{"jsonrpc":"2.0","result":"ok","id":1}\n');
    assert.equal(await answered, "ok");
    controller.abort(); // after the answer: nothing to cancel
    await delay(50); // past the connection's 30 ms deadline too
    // Never sent: an aborted signal, no time left.
    await assert.rejects(
      connection.call("x", [], { signal: AbortSignal.abort() }),
      (e: unknown) => e instanceof RpcError && e.code === CANCELLED,
    );
    await assert.rejects(
      connection.call("x", [], { timeoutMs: 0 }),
      (e: unknown) => e instanceof RpcError && e.code === DEADLINE_EXCEEDED,
    );
    await delay(10);
    assert.deepEqual(sentLines(fake), [
      '{"jsonrpc":"2.0","method":"fast","params":[],"id":1,"timeoutMs":30}',
    ]);
  } finally {
    connection.close();
    await connection.closed;
  }
});

Deno.test("a call abandoned while its connection closes sends no rpc.cancel", async () => {
  const fake = fakeStream();
  const connection = new RpcConnection(fake.stream);
  const controller = new AbortController();
  const pending = rejection(
    connection.call("x", [], { signal: controller.signal }),
  );
  await delay(0);
  connection.close();
  controller.abort();
  assert.equal((await pending).code, -32004);
  await connection.closed;
  assert.deepEqual(sentLines(fake), [
    '{"jsonrpc":"2.0","method":"x","params":[],"id":1,"timeoutMs":30000}',
  ]);
});

Deno.test("propagateDeadlines: false sends neither timeoutMs nor rpc.cancel", async () => {
  const fake = fakeStream();
  const connection = new RpcConnection(fake.stream, {
    propagateDeadlines: false,
  });
  try {
    await assert.rejects(
      connection.call("slow", [], { timeoutMs: 10 }),
      (e: unknown) => e instanceof RpcError && e.code === DEADLINE_EXCEEDED,
    );
    const controller = new AbortController();
    const aborted = rejection(
      connection.call("slow", [], { signal: controller.signal }),
    );
    await delay(0);
    controller.abort();
    assert.equal((await aborted).code, CANCELLED);
    await delay(10);
    assert.deepEqual(sentLines(fake), [
      '{"jsonrpc":"2.0","method":"slow","params":[],"id":1}',
      '{"jsonrpc":"2.0","method":"slow","params":[],"id":2}',
    ]);
  } finally {
    connection.close();
    await connection.closed;
  }
});

/**
 * A plain JSON-RPC 2.0 server that knows nothing of Rafter: `echo`
 * answers, `hang` never does, other requests get -32601, notifications
 * nothing. Keeps every line it read.
 */
function plainServer() {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const received: string[] = [];
  const conns: Deno.Conn[] = [];
  const done = (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      (async () => {
        let buffer = "";
        const decoder = new TextDecoder();
        for await (const chunk of conn.readable) {
          buffer += decoder.decode(chunk, { stream: true });
          for (
            let n = buffer.indexOf("\n");
            n !== -1;
            n = buffer.indexOf("\n")
          ) {
            const line = buffer.slice(0, n);
            buffer = buffer.slice(n + 1);
            received.push(line);
            const { method, params, id } = JSON.parse(line);
            if (id === undefined || method === "hang") continue;
            const reply = method === "echo"
              ? { jsonrpc: "2.0", result: params[0], id }
              : {
                jsonrpc: "2.0",
                error: { code: -32601, message: "Method not found" },
                id,
              };
            await conn.write(
              new TextEncoder().encode(JSON.stringify(reply) + "\n"),
            );
          }
        }
      })().catch(() => {});
    }
  })().catch(() => {});
  return {
    url: `tcp://127.0.0.1:${listener.addr.port}`,
    received,
    async close() {
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch {
          // Closed by the client already.
        }
      }
      await done;
    },
  };
}

Deno.test("a plain JSON-RPC 2.0 server ignores timeoutMs and rpc.cancel", async () => {
  const server = plainServer();
  const unmatched: Response[] = [];
  const connection = await dial(server.url, {
    onUnmatchedResponse: (response) => void unmatched.push(response),
  });
  try {
    assert.equal(
      await connection.call("echo", ["x"], { timeoutMs: 1_000 }),
      "x",
    );
    await assert.rejects(
      connection.call("hang", undefined, { timeoutMs: 50 }),
      (e: unknown) => e instanceof RpcError && e.code === DEADLINE_EXCEEDED,
    );
    assert.equal(
      await connection.call("echo", ["y"], { timeoutMs: 1_000 }),
      "y",
    );
    assert.deepEqual(server.received, [
      '{"jsonrpc":"2.0","method":"echo","params":["x"],"id":1,"timeoutMs":1000}',
      '{"jsonrpc":"2.0","method":"hang","id":2,"timeoutMs":50}',
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":2}}',
      '{"jsonrpc":"2.0","method":"echo","params":["y"],"id":3,"timeoutMs":1000}',
    ]);
    // The cancel got no answer: nothing arrived that matched no call.
    assert.deepEqual(unmatched, []);
  } finally {
    connection.close();
    await connection.closed;
    await server.close();
  }
});
