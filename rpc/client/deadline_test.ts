import assert from "node:assert/strict";
import { CANCELLED, DEADLINE_EXCEEDED, RpcError } from "../errors.ts";
import { RpcConnection } from "./connection.ts";
import { dial } from "../transport/dial.ts";
import { handleText, type Methods } from "../server/dispatcher.ts";
import type { Response } from "../message.ts";
import { type CallContext, withContext } from "../server/method.ts";
import { serve } from "../../adapter/deno/serve.ts";
import {
  closeListening,
  exchange,
  fakeStream,
  RawClient,
  silentServer,
  withRawServer,
} from "../../testing/rpc.ts";
import { delay, within } from "../../testing/time.ts";

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

Deno.test("calls on one connection each expire at their own deadline, in order, whatever order they were made in", async () => {
  const fake = fakeStream();
  const connection = new RpcConnection(fake.stream);
  try {
    const start = performance.now();
    const settledAt = new Map<string, number>();
    const track = (name: string, timeoutMs: number) =>
      rejection(connection.call(name, [], { timeoutMs })).then((error) => {
        settledAt.set(name, performance.now() - start);
        return error;
      });
    const long = track("long", 60);
    const short = track("short", 15);
    const answered = connection.call("answered", [], { timeoutMs: 20 });
    await delay(0);
    fake.push('{"jsonrpc":"2.0","result":"ok","id":3}\n');
    assert.equal(await answered, "ok");
    const [longError, shortError] = await within(
      Promise.all([long, short]),
      2_000,
      "both deadlines",
    );
    assert.equal(shortError.code, DEADLINE_EXCEEDED);
    assert.deepEqual(shortError.data, { timeoutMs: 15, written: true });
    assert.deepEqual(longError.data, { timeoutMs: 60, written: true });
    assert.ok(
      settledAt.get("short")! >= 14,
      `short after ${settledAt.get("short")} ms`,
    );
    assert.ok(settledAt.get("short")! < settledAt.get("long")!);
    assert.ok(
      settledAt.get("long")! >= 59,
      `long after ${settledAt.get("long")} ms`,
    );
    await delay(5);
    // Each abandoned call was cancelled; the answered one was not.
    assert.deepEqual(sentLines(fake).slice(3), [
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":2}}',
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":1}}',
    ]);
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
    close: () => closeListening(listener, conns, done),
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

// ---------------------------------------------------------------- server side

/** Rejects with the signal's reason once it aborts. */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), {
      once: true,
    });
  });
}

/**
 * A method table whose `wait` (a withContext method) runs until its
 * signal aborts, recording when and why; `count` counts its runs.
 */
function waitingMethods() {
  const aborts: { id: unknown; at: number; reason: unknown }[] = [];
  const contexts: CallContext[] = [];
  const started: unknown[] = [];
  let runs = 0;
  const methods: Methods = {
    wait: withContext(async (context: CallContext) => {
      contexts.push(context);
      started.push(context.id);
      context.signal.addEventListener("abort", () =>
        aborts.push({
          id: context.id,
          at: performance.now(),
          reason: context.signal.reason,
        }));
      return await untilAborted(context.signal);
    }),
    count: () => ++runs,
    context: withContext((context: CallContext) => ({
      id: context.id,
      deadlineIn: context.deadline === null
        ? null
        : Math.round((context.deadline - Date.now()) / 100) * 100,
      session: typeof context.session?.id,
      aborted: context.signal.aborted,
    })),
  };
  return {
    methods,
    aborts,
    contexts,
    started,
    get runs() {
      return runs;
    },
  };
}

/** Waits until `condition()` holds, polling. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await delay(1);
  }
}

const PING = '{"jsonrpc":"2.0","method":"rpc.ping","id":"ping"}';
const PONG = '{"jsonrpc":"2.0","result":"pong","id":"ping"}';

Deno.test("a withContext method sees its id, its deadline from timeoutMs, and its session", async () => {
  const table = waitingMethods();
  await withRawServer({ methods: table.methods }, async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"context","id":"a","timeoutMs":5000}',
      '{"jsonrpc":"2.0","result":{"id":"a","deadlineIn":5000,"session":"number","aborted":false},"id":"a"}',
    );
    // No timeoutMs: no deadline. A timeoutMs that is not a number is ignored.
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"context","id":1}',
      '{"jsonrpc":"2.0","result":{"id":1,"deadlineIn":null,"session":"number","aborted":false},"id":1}',
    );
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"context","id":2,"timeoutMs":"soon"}',
      '{"jsonrpc":"2.0","result":{"id":2,"deadlineIn":null,"session":"number","aborted":false},"id":2}',
    );
  });
});

Deno.test("a request whose deadline passed is not run: -32003", async () => {
  const table = waitingMethods();
  await withRawServer({ methods: table.methods }, async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"count","id":1,"timeoutMs":0}',
      `{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the client's deadline passed before the call ran (timeoutMs 0)","data":{"timeoutMs":0,"started":false}},"id":1}`,
    );
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"count","id":2,"timeoutMs":-5}',
      `{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the client's deadline passed before the call ran (timeoutMs -5)","data":{"timeoutMs":-5,"started":false}},"id":2}`,
    );
    // An expired notification is not run either, and gets nothing.
    await client.send('{"jsonrpc":"2.0","method":"count","timeoutMs":0}');
    await client.send(PING);
    assert.equal(await client.line(), PONG);
    assert.equal(table.runs, 0);
    // The method table is fine: with time left it runs.
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"count","id":3,"timeoutMs":1000}',
      '{"jsonrpc":"2.0","result":1,"id":3}',
    );
  });
});

Deno.test("a request that waited for a slot past its deadline is not run", async () => {
  const table = waitingMethods();
  const release = Promise.withResolvers<void>();
  await withRawServer({
    maxInFlight: 1,
    methods: {
      ...table.methods,
      hold: () => release.promise.then(() => "held"),
    },
  }, async (_server, client) => {
    await client.write(
      '{"jsonrpc":"2.0","method":"hold","id":1}\n' +
        '{"jsonrpc":"2.0","method":"count","id":2,"timeoutMs":30}\n',
    );
    await delay(60);
    release.resolve();
    assert.equal(
      await client.line(),
      '{"jsonrpc":"2.0","result":"held","id":1}',
    );
    assert.equal(
      await client.line(),
      `{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the client's deadline passed before the call ran (timeoutMs 30)","data":{"timeoutMs":30,"started":false}},"id":2}`,
    );
    assert.equal(table.runs, 0);
  });
});

Deno.test("the deadline aborts a running withContext method: -32003", async () => {
  const table = waitingMethods();
  await withRawServer({ methods: table.methods }, async (_server, client) => {
    const sent = performance.now();
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"wait","id":1,"timeoutMs":40}',
      `{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the call ran past the client's deadline (timeoutMs 40)","data":{"timeoutMs":40,"started":true}},"id":1}`,
    );
    const stoppedAfter = table.aborts[0].at - sent;
    assert.ok(
      stoppedAfter >= 35 && stoppedAfter < 40 + 50,
      `aborted after ${stoppedAfter} ms`,
    );
  });
});

Deno.test("maxDeadlineMs caps a request's timeoutMs and gives one to requests without", async () => {
  const table = waitingMethods();
  await withRawServer(
    { methods: table.methods, maxDeadlineMs: 30 },
    async (_server, client) => {
      const answer = (id: number) =>
        `{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the call ran past the server's limit of 30 ms per call","data":{"maxDeadlineMs":30,"started":true}},"id":${id}}`;
      await exchange(
        client,
        '{"jsonrpc":"2.0","method":"wait","id":1,"timeoutMs":60000}',
        answer(1),
      );
      await exchange(
        client,
        '{"jsonrpc":"2.0","method":"wait","id":2}',
        answer(2),
      );
      // A shorter timeoutMs is the client's.
      await exchange(
        client,
        '{"jsonrpc":"2.0","method":"wait","id":3,"timeoutMs":10}',
        `{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the call ran past the client's deadline (timeoutMs 10)","data":{"timeoutMs":10,"started":true}},"id":3}`,
      );
    },
  );
  assert.throws(
    () => serve({ methods: {}, maxDeadlineMs: 0 }),
    /maxDeadlineMs must be a positive number of ms, got 0/,
  );
});

Deno.test("rpc.cancel aborts the running call within 50 ms and the reason is answered", async () => {
  const table = waitingMethods();
  await withRawServer({ methods: table.methods }, async (_server, client) => {
    await client.send(
      '{"jsonrpc":"2.0","method":"wait","id":7,"timeoutMs":60000}',
    );
    await until(() => table.started.length === 1, "the call to start");
    const sent = performance.now();
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":7}}',
      '{"jsonrpc":"2.0","error":{"code":-32005,"message":"Cancelled: the client cancelled the call (rpc.cancel)"},"id":7}',
    );
    const stoppedAfter = table.aborts[0].at - sent;
    assert.ok(stoppedAfter < 50, `aborted after ${stoppedAfter} ms`);
  });
});

Deno.test("rpc.cancel is built in: no response, unknown ids ignored; as a request it says whether it cancelled", async () => {
  const missing: string[] = [];
  const table = waitingMethods();
  await withRawServer({
    methods: table.methods,
    onMethodNotFound: (method) => void missing.push(method),
  }, async (_server, client) => {
    // Unknown ids, ids of another type, params it cannot read: ignored.
    await client.send(
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":99}}',
    );
    await client.send('{"jsonrpc":"2.0","method":"rpc.cancel","params":[1]}');
    await client.send('{"jsonrpc":"2.0","method":"rpc.cancel"}');
    await client.send(PING);
    assert.equal(await client.line(), PONG);
    await client.send('{"jsonrpc":"2.0","method":"wait","id":"w"}');
    await until(() => table.started.length === 1, "the call to start");
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":"x"},"id":"c1"}',
      '{"jsonrpc":"2.0","result":false,"id":"c1"}',
    );
    await client.send(
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":"w"},"id":"c2"}',
    );
    const lines = [await client.line(), await client.line()].sort();
    assert.deepEqual(lines, [
      '{"jsonrpc":"2.0","error":{"code":-32005,"message":"Cancelled: the client cancelled the call (rpc.cancel)"},"id":"w"}',
      '{"jsonrpc":"2.0","result":true,"id":"c2"}',
    ]);
    // Finished: cancelling it again finds nothing.
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":"w"},"id":"c3"}',
      '{"jsonrpc":"2.0","result":false,"id":"c3"}',
    );
  });
  assert.deepEqual(missing, []);
  assert.equal(table.aborts.length, 1);
});

Deno.test("rpc.cancel reaches only the calls of its own connection", async () => {
  const table = waitingMethods();
  await withRawServer({ methods: table.methods }, async (server, a) => {
    const b = await RawClient.connect(server.port);
    try {
      await a.send('{"jsonrpc":"2.0","method":"wait","id":1}');
      await b.send('{"jsonrpc":"2.0","method":"wait","id":1}');
      await until(() => table.started.length === 2, "both calls to start");
      await a.send('{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":1}}');
      assert.equal(
        await a.line(),
        '{"jsonrpc":"2.0","error":{"code":-32005,"message":"Cancelled: the client cancelled the call (rpc.cancel)"},"id":1}',
      );
      await delay(20);
      assert.equal(table.aborts.length, 1);
      const [aborted, running] = [true, false].map((state) =>
        table.contexts.filter((c) => c.signal.aborted === state)
      );
      assert.equal(aborted.length, 1);
      assert.equal(running.length, 1);
      assert.notEqual(aborted[0].session!.id, running[0].session!.id);
      // b's call still runs: cancel it from b.
      await b.send('{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":1}}');
      assert.match((await b.line())!, /"code":-32005/);
    } finally {
      b.close();
    }
  });
});

Deno.test("rpc.cancel runs at once when every slot is taken; a waiting request it names is answered without running", async () => {
  const table = waitingMethods();
  await withRawServer(
    { methods: table.methods, maxInFlight: 1 },
    async (_server, client) => {
      await client.send('{"jsonrpc":"2.0","method":"wait","id":1}');
      await until(() => table.started.length === 1, "the call to start");
      // Both wait behind call 1; the cancels overtake them.
      await client.write(
        '{"jsonrpc":"2.0","method":"count","id":2}\n' +
          '{"jsonrpc":"2.0","method":"count","id":3}\n' +
          '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":2}}\n' +
          '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":1}}\n',
      );
      assert.deepEqual(
        [await client.line(), await client.line(), await client.line()],
        [
          '{"jsonrpc":"2.0","error":{"code":-32005,"message":"Cancelled: the client cancelled the call (rpc.cancel)"},"id":1}',
          '{"jsonrpc":"2.0","error":{"code":-32005,"message":"Cancelled: the client cancelled the call before it ran (rpc.cancel)"},"id":2}',
          '{"jsonrpc":"2.0","result":1,"id":3}',
        ],
      );
      assert.equal(table.runs, 1); // only id 3 ran
    },
  );
});

Deno.test("each batch member has its own signal and deadline", async () => {
  const table = waitingMethods();
  await withRawServer({ methods: table.methods }, async (_server, client) => {
    await client.send(
      '[{"jsonrpc":"2.0","method":"wait","id":"a","timeoutMs":30},' +
        '{"jsonrpc":"2.0","method":"wait","id":"b"},' +
        '{"jsonrpc":"2.0","method":"count","id":"c"}]',
    );
    await until(() => table.aborts.length === 1, "a's deadline");
    assert.equal(table.contexts[1].signal.aborted, false);
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":"b"}}',
      `[{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the call ran past the client's deadline (timeoutMs 30)","data":{"timeoutMs":30,"started":true}},"id":"a"},` +
        '{"jsonrpc":"2.0","error":{"code":-32005,"message":"Cancelled: the client cancelled the call (rpc.cancel)"},"id":"b"},' +
        '{"jsonrpc":"2.0","result":1,"id":"c"}]',
    );
  });
});

Deno.test("the connection closing aborts the signals of its calls within 50 ms", async () => {
  const table = waitingMethods();
  await withRawServer({ methods: table.methods }, async (_server, client) => {
    await client.send('{"jsonrpc":"2.0","method":"wait","id":1}');
    await client.send('{"jsonrpc":"2.0","method":"wait"}'); // a notification
    await until(() => table.started.length === 2, "the calls to start");
    const closed = performance.now();
    client.close();
    await until(() => table.aborts.length === 2, "the aborts");
    for (const abort of table.aborts) {
      assert.ok(
        abort.at - closed < 50,
        `aborted after ${abort.at - closed} ms`,
      );
      assert.ok(abort.reason instanceof RpcError);
      assert.equal(abort.reason.code, CANCELLED);
      assert.equal(
        abort.reason.message,
        "Cancelled: the connection ended before the call finished",
      );
    }
  });
});

Deno.test("closing the server aborts the signals of the calls under way", async () => {
  const table = waitingMethods();
  const server = serve({ methods: table.methods });
  const client = await RawClient.connect(server.port);
  try {
    await client.send('{"jsonrpc":"2.0","method":"wait","id":1}');
    await until(() => table.started.length === 1, "the call to start");
    await within(server.close(), 2_000, "server.close()");
    assert.equal(table.aborts.length, 1);
  } finally {
    client.close();
  }
});

Deno.test("a handler that throws once aborted is answered with the reason and not reported", async () => {
  const reported: unknown[] = [];
  await withRawServer({
    onInternalError: (error) => void reported.push(error),
    methods: {
      fetchy: withContext(async ({ signal }: CallContext) => {
        await untilAborted(signal).catch(() => {});
        throw new DOMException("The operation was aborted", "AbortError");
      }),
    },
  }, async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"fetchy","id":1,"timeoutMs":20}',
      `{"jsonrpc":"2.0","error":{"code":-32003,"message":"Deadline exceeded: the call ran past the client's deadline (timeoutMs 20)","data":{"timeoutMs":20,"started":true}},"id":1}`,
    );
  });
  assert.deepEqual(reported, []);
});

Deno.test("plain handlers are called as before: no context, this is the table", async () => {
  await withRawServer({
    methods: {
      self(this: Methods, ...args: unknown[]) {
        return [Object.hasOwn(this, "self"), args];
      },
      ctx: withContext(function (this: Methods, _c: CallContext, n: number) {
        return [Object.hasOwn(this, "ctx"), n];
      }),
    },
  }, async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"self","params":[1,2],"id":1,"timeoutMs":1000}',
      '{"jsonrpc":"2.0","result":[true,[1,2]],"id":1}',
    );
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"ctx","params":[5],"id":2}',
      '{"jsonrpc":"2.0","result":[true,5],"id":2}',
    );
  });
});

// ---------------------------------------------------------- client and server

Deno.test("a slow method stops within 50 ms of the client's abort, and of its timeout", async () => {
  const table = waitingMethods();
  const server = serve({ methods: table.methods });
  const connection = await dial(server.url);
  try {
    const controller = new AbortController();
    const call = rejection(
      connection.call("wait", [], { signal: controller.signal }),
    );
    await until(() => table.started.length === 1, "the call to start");
    const abortedAt = performance.now();
    controller.abort();
    assert.equal((await call).code, CANCELLED);
    await until(() => table.aborts.length === 1, "the server-side abort");
    const afterAbort = table.aborts[0].at - abortedAt;
    assert.ok(afterAbort < 50, `stopped ${afterAbort} ms after the abort`);
    assert.equal((table.aborts[0].reason as RpcError).code, CANCELLED);

    const timedOut = await rejection(
      connection.call("wait", [], { timeoutMs: 60 }),
    );
    const timedOutAt = performance.now();
    assert.equal(timedOut.code, DEADLINE_EXCEEDED);
    await until(() => table.aborts.length === 2, "the server-side abort");
    const afterTimeout = table.aborts[1].at - timedOutAt;
    assert.ok(afterTimeout < 50, `stopped ${afterTimeout} ms after`);
    assert.equal(connection.pendingCalls, 0);
    assert.equal(await connection.call("rpc.ping"), "pong");
  } finally {
    connection.close();
    await connection.closed;
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("a slow method stops within 50 ms when the client closes its connection", async () => {
  const table = waitingMethods();
  const server = serve({ methods: table.methods });
  const connection = await dial(server.url);
  try {
    const call = rejection(connection.call("wait"));
    await until(() => table.started.length === 1, "the call to start");
    const closedAt = performance.now();
    connection.close();
    assert.equal((await call).code, -32004);
    await until(() => table.aborts.length === 1, "the server-side abort");
    const after = table.aborts[0].at - closedAt;
    assert.ok(after < 50, `stopped ${after} ms after the close`);
  } finally {
    await connection.closed;
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("the server never gives up on a call before the client's deadline: it aborts only once its clock has passed receipt + timeoutMs + 1 ms", async () => {
  const receivedAt = new Map<number, number>();
  /** Per call: ms from receipt to the abort, and the timeoutMs sent. */
  const waited: { ms: number; timeoutMs: number }[] = [];
  const methods: Methods = {
    wait: withContext(({ signal, id }, timeoutMs: number) =>
      new Promise((_, reject) => {
        signal.addEventListener("abort", () => {
          waited.push({
            ms: Date.now() - receivedAt.get(id as number)!,
            timeoutMs,
          });
          reject(signal.reason);
        });
      })
    ),
  };
  const replies = await Promise.all(
    Array.from({ length: 20 }, (_, id) => {
      const timeoutMs = 5 + id;
      receivedAt.set(id, Date.now());
      return handleText(
        `{"jsonrpc":"2.0","method":"wait","params":[${timeoutMs}],"id":${id},"timeoutMs":${timeoutMs}}`,
        methods,
        { receivedAt: receivedAt.get(id) },
      );
    }),
  );
  assert.equal(waited.length, 20);
  // Date.now() drops the fraction of a ms: the request may have come in up
  // to 1 ms after receivedAt, and the client's timer runs from its send.
  const early = waited.filter(({ ms, timeoutMs }) => ms < timeoutMs + 1);
  assert.deepEqual(early, []);
  for (const reply of replies) {
    assert.match(reply!, /"code":-32003,.*"started":true/);
  }
});

Deno.test("a deadline's message rounds its ms (a timeout left over from a deadline is fractional); the error's data keeps it exact", async () => {
  const server = silentServer();
  const connection = await dial(server.url);
  try {
    await assert.rejects(
      connection.call("slow", [], { timeoutMs: 40.637 }),
      (error: RpcError) => {
        assert.equal(error.code, DEADLINE_EXCEEDED);
        assert.match(error.message, /within 41 ms$/);
        assert.equal((error.data as { timeoutMs: number }).timeoutMs, 40.637);
        return true;
      },
    );
  } finally {
    connection.close();
    await server.close();
  }
});
