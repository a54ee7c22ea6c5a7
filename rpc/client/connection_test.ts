import assert from "node:assert/strict";
import {
  CANCELLED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  INVALID_PARAMS,
  RpcError,
} from "../errors.ts";
import { RpcConnection } from "./connection.ts";
import { dial } from "../transport/dial.ts";
import type { Response } from "../message.ts";
import { serve, type ServeOptions } from "../../adapter/deno/serve.ts";
import { fakeStream } from "../../testing/rpc.ts";
import { delay, within } from "../../testing/time.ts";

async function withServer(
  options: Partial<ServeOptions>,
  fn: (url: string) => Promise<void>,
): Promise<void> {
  const server = serve({ methods: {}, ...options });
  try {
    await fn(server.url);
  } finally {
    await within(server.close(), 5_000, "server.close()");
  }
}

function isConnectionError(written: boolean, pattern?: RegExp) {
  return (error: unknown) => {
    assert.ok(
      error instanceof ConnectionError,
      `not a ConnectionError: ${error}`,
    );
    assert.equal(error.written, written);
    assert.equal(error.code, -32004);
    if (pattern) assert.match(error.message, pattern);
    return true;
  };
}

/** A free port: listen on port 0, note the port, stop listening. */
function unusedPort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr;
  listener.close();
  return port;
}

Deno.test("200 concurrent calls on one connection each get their own result", async () => {
  await withServer({
    methods: {
      slowDouble: async (n: number) => {
        await delay(Math.random() * 20);
        return n * 2;
      },
    },
  }, async (url) => {
    const connection = await dial(url);
    try {
      const inputs = Array.from({ length: 200 }, (_, i) => i);
      const results = await within(
        Promise.all(
          inputs.map((n) => connection.call<number>("slowDouble", [n])),
        ),
        10_000,
        "200 calls",
      );
      assert.deepEqual(results, inputs.map((n) => n * 2));
      assert.equal(connection.pendingCalls, 0);
    } finally {
      connection.close();
      await connection.closed;
    }
  });
});

Deno.test("an error response rejects with an RpcError carrying code, message and data", async () => {
  await withServer({
    methods: {
      refuse: () => {
        throw new RpcError(-32042, "Refused: try the leader", {
          leaderUrl: "tcp://127.0.0.1:1",
        });
      },
    },
  }, async (url) => {
    const connection = await dial(url);
    try {
      const error = await connection.call("refuse").catch((e) => e);
      assert.ok(error instanceof RpcError);
      assert.equal(error.code, -32042);
      assert.equal(error.message, "Refused: try the leader");
      assert.deepEqual(error.data, { leaderUrl: "tcp://127.0.0.1:1" });
      await assert.rejects(
        connection.call("nope"),
        (e: unknown) => e instanceof RpcError && e.code === -32601,
      );
      // The connection is still fine.
      assert.equal(await connection.call("rpc.ping"), "pong");
    } finally {
      connection.close();
      await connection.closed;
    }
  });
});

Deno.test("dial to a port nobody listens on rejects with written=false", async () => {
  const url = `tcp://127.0.0.1:${unusedPort()}`;
  await assert.rejects(
    dial(url),
    isConnectionError(false, new RegExp(`^cannot connect to ${url}: `)),
  );
});

Deno.test("dial with a malformed URL or a failing dialer rejects with written=false", async () => {
  await assert.rejects(
    dial("http://127.0.0.1:80"),
    isConnectionError(
      false,
      /^cannot connect to http:\/\/127\.0\.0\.1:80: invalid endpoint URL/,
    ),
  );
  const cause = new Error("no route");
  const error = await dial("tcp://10.0.0.1:1", {
    dialer: () => Promise.reject(cause),
  }).catch((e) => e);
  isConnectionError(false, /no route/)(error);
  assert.equal(error.cause, cause);
});

Deno.test("dial gives up after connectTimeoutMs and aborts the dialer", async () => {
  let aborted = false;
  const error = await dial("tcp://192.0.2.1:7001", {
    connectTimeoutMs: 30,
    dialer: (_url, options) =>
      new Promise((_, reject) => {
        options?.signal?.addEventListener("abort", () => {
          aborted = true;
          reject(options.signal?.reason);
        });
      }),
  }).catch((e) => e);
  isConnectionError(
    false,
    /^cannot connect to tcp:\/\/192\.0\.2\.1:7001: no connection within 30 ms$/,
  )(error);
  assert.ok(aborted);
});

Deno.test("the server closing the socket mid-call rejects with written=true", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const serverSide = (async () => {
    const conn = await listener.accept();
    const buffer = new Uint8Array(1024);
    let received = "";
    while (!received.includes("\n")) {
      const count = await conn.read(buffer);
      if (count === null) break;
      received += new TextDecoder().decode(buffer.subarray(0, count));
    }
    conn.close();
    return received;
  })();
  try {
    const url = `tcp://127.0.0.1:${listener.addr.port}`;
    const connection = await dial(url);
    await assert.rejects(
      within(connection.call("greet", ["Ada"]), 5_000, "the call"),
      isConnectionError(
        true,
        new RegExp(
          `^connection to ${url} closed before the response to "greet": the peer closed the connection$`,
        ),
      ),
    );
    await within(connection.closed, 2_000, "closed");
    assert.ok(connection.isClosed);
    assert.equal(
      await serverSide,
      '{"jsonrpc":"2.0","method":"greet","params":["Ada"],"id":1,"timeoutMs":30000}\n',
    );
  } finally {
    listener.close();
  }
});

Deno.test("calls after close reject with written=false and send nothing", async () => {
  const fake = fakeStream();
  const connection = new RpcConnection(fake.stream, { url: "tcp://x:1" });
  const pending = connection.call("first");
  await delay(0);
  assert.equal(fake.chunks.length, 1);
  connection.close();
  await assert.rejects(
    pending,
    isConnectionError(true, /close\(\) was called$/),
  );
  await assert.rejects(
    connection.call("second"),
    isConnectionError(
      false,
      /^connection to tcp:\/\/x:1 is closed; "second" was not sent$/,
    ),
  );
  await assert.rejects(connection.notify("third"), isConnectionError(false));
  await connection.closed;
  assert.ok(fake.closed);
  assert.equal(fake.chunks.length, 1);
});

Deno.test("a call still queued in the writer when the connection ends was not sent (written=false)", async () => {
  const fake = fakeStream();
  const connection = new RpcConnection(fake.stream, { url: "tcp://x:1" });
  const pending = connection.call("greet");
  connection.close(); // same tick: the frame has not reached the stream
  await assert.rejects(
    pending,
    isConnectionError(
      false,
      /^connection to tcp:\/\/x:1 closed before "greet" was sent: close\(\) was called$/,
    ),
  );
  await connection.closed;
  assert.equal(fake.chunks.length, 0);
});

Deno.test("when the peer ends the connection during a write, that write's calls may have run and the ones queued behind it were not sent", async () => {
  const fed = Promise.withResolvers<void>();
  const chunks: string[] = [];
  let closed = false;
  let release = () => {};
  const readable = new ReadableStream<Uint8Array>({
    start: (controller) => void fed.promise.then(() => controller.close()),
  });
  const stream = {
    readable,
    // The first write is handed over and does not complete (a full
    // socket) until the stream is closed; later ones fail, as a closed
    // socket's do.
    writable: new WritableStream<Uint8Array>({
      write: (chunk) => {
        if (closed) throw new Error("stream closed");
        chunks.push(new TextDecoder().decode(chunk));
        return new Promise<void>((resolve) => release = resolve);
      },
    }),
    close: () => {
      closed = true;
      release();
    },
  };
  const connection = new RpcConnection(stream, { url: "tcp://x:1" });
  const first = connection.call("first");
  await delay(0);
  assert.equal(chunks.length, 1);
  const second = connection.call("second");
  await delay(0);
  assert.equal(chunks.length, 1, "the second waits behind the first write");
  fed.resolve(); // the peer closes its side
  await assert.rejects(
    first,
    isConnectionError(true, /the response to "first": the peer closed/),
  );
  await assert.rejects(
    second,
    isConnectionError(false, /before "second" was sent: the peer closed/),
  );
  await connection.closed;
  assert.deepEqual(chunks.map((c) => JSON.parse(c).method), ["first"]);
});

Deno.test("a missing deadline rejects with DEADLINE_EXCEEDED and ignores the late response", async () => {
  const fake = fakeStream();
  const unmatched: Response[] = [];
  const connection = new RpcConnection(fake.stream, {
    timeoutMs: 30,
    onUnmatchedResponse: (response) => void unmatched.push(response),
  });
  try {
    const error = await connection.call("greet").catch((e) => e);
    assert.ok(error instanceof RpcError);
    assert.equal(error.code, DEADLINE_EXCEEDED);
    assert.equal(
      error.message,
      'Deadline exceeded: no response to "greet" within 30 ms',
    );
    assert.deepEqual(error.data, { timeoutMs: 30, written: true });
    // Per-call deadline overrides the connection's (said by the error, not
    // timed: a busy machine may fire any timer late).
    await assert.rejects(
      connection.call("greet", [], { timeoutMs: 5 }),
      (e: unknown) =>
        e instanceof RpcError && e.code === DEADLINE_EXCEEDED &&
        e.message === 'Deadline exceeded: no response to "greet" within 5 ms',
    );
    fake.push('{"jsonrpc":"2.0","result":"late","id":1}\n');
    await delay(10);
    assert.deepEqual(unmatched, [{ jsonrpc: "2.0", result: "late", id: 1 }]);
    assert.ok(!connection.isClosed);
    // No time left: rejected without sending.
    const sent = fake.chunks.length;
    await assert.rejects(
      connection.call("greet", [], { timeoutMs: 0 }),
      (e: unknown) => e instanceof RpcError && e.code === DEADLINE_EXCEEDED,
    );
    await delay(0);
    assert.equal(fake.chunks.length, sent);
  } finally {
    connection.close();
    await connection.closed;
  }
});

Deno.test("aborting a call rejects with CANCELLED", async () => {
  const fake = fakeStream();
  const connection = new RpcConnection(fake.stream);
  try {
    const controller = new AbortController();
    const pending = connection.call("greet", ["x"], {
      signal: controller.signal,
    });
    await delay(0);
    controller.abort(new Error("user left"));
    const error = await pending.catch((e) => e);
    assert.ok(error instanceof RpcError);
    assert.equal(error.code, CANCELLED);
    assert.equal(error.message, 'Cancelled: the call to "greet" was aborted');
    assert.deepEqual(error.data, { written: true });
    assert.equal((error.cause as Error).message, "user left");
    assert.equal(connection.pendingCalls, 0);

    // An already-aborted signal rejects at once, without writing.
    const sent = fake.chunks.length;
    const early = await connection.call("greet", [], {
      signal: AbortSignal.abort(),
    }).catch((e) => e);
    assert.ok(early instanceof RpcError);
    assert.equal(early.code, CANCELLED);
    assert.deepEqual(early.data, { written: false });
    await delay(0);
    assert.equal(fake.chunks.length, sent);
  } finally {
    connection.close();
    await connection.closed;
  }
});

Deno.test("params that JSON cannot encode are refused before sending", async () => {
  const fake = fakeStream();
  const connection = new RpcConnection(fake.stream);
  try {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    for (const params of [[1n], cycle]) {
      await assert.rejects(
        connection.call("greet", params as unknown[]),
        (e: unknown) =>
          e instanceof RpcError && e.code === INVALID_PARAMS &&
          /cannot be encoded as JSON/.test(e.message),
      );
    }
    await assert.rejects(
      connection.call("greet", "text" as unknown as unknown[]),
      (e: unknown) => e instanceof RpcError && e.code === INVALID_PARAMS,
    );
    await assert.rejects(
      connection.notify("greet", [1n]),
      (e: unknown) => e instanceof RpcError && e.code === INVALID_PARAMS,
    );
    await delay(0);
    assert.equal(fake.chunks.length, 0);
    assert.ok(!connection.isClosed);
  } finally {
    connection.close();
    await connection.closed;
  }
});

Deno.test("requests of one tick share one write; responses may come in any order", async () => {
  const fake = fakeStream();
  const unmatched: Response[] = [];
  const connection = new RpcConnection(fake.stream, {
    onUnmatchedResponse: (response) => void unmatched.push(response),
  });
  try {
    const calls = [1, 2, 3].map((n) => connection.call("echo", [n]));
    await delay(0);
    assert.equal(fake.chunks.length, 1);
    assert.equal(
      fake.written(),
      '{"jsonrpc":"2.0","method":"echo","params":[1],"id":1,"timeoutMs":30000}\n' +
        '{"jsonrpc":"2.0","method":"echo","params":[2],"id":2,"timeoutMs":30000}\n' +
        '{"jsonrpc":"2.0","method":"echo","params":[3],"id":3,"timeoutMs":30000}\n',
    );
    fake.push('{"jsonrpc":"2.0","result":"c","id":3}\nnot json\n{"id":1}\n');
    fake.push(
      '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}\n',
    );
    fake.push(
      '[{"jsonrpc":"2.0","result":"a","id":1},{"jsonrpc":"2.0","result":"b","id":"2"}]\n',
    );
    fake.push('{"jsonrpc":"2.0","result":"b","id":2}\n');
    assert.deepEqual(await Promise.all(calls), ["a", "b", "c"]);
    assert.deepEqual(unmatched.map((response) => response.id), [null, "2"]);
  } finally {
    connection.close();
    await connection.closed;
  }
});

Deno.test("a received frame over maxFrameBytes closes the connection", async () => {
  await withServer(
    { methods: { big: () => "x".repeat(10_000) } },
    async (url) => {
      const connection = await dial(url, { maxFrameBytes: 1_000 });
      await assert.rejects(
        connection.call("big"),
        isConnectionError(
          true,
          /received a frame larger than maxFrameBytes \(1000 bytes\)$/,
        ),
      );
      await within(connection.closed, 2_000, "closed");
      assert.ok(connection.isClosed);
    },
  );
});

Deno.test("notify reaches the server without a response", async () => {
  const seen: unknown[] = [];
  await withServer({
    methods: { log: (...args: unknown[]) => void seen.push(args) },
  }, async (url) => {
    const connection = await dial(url);
    try {
      await connection.notify("log", ["a", 1]);
      await connection.notify("log");
      assert.equal(await connection.call("rpc.ping"), "pong");
      assert.deepEqual(seen, [["a", 1], []]);
    } finally {
      connection.close();
      await connection.closed;
    }
  });
});

Deno.test("the server's idle timeout closes the connection and closed resolves", async () => {
  await withServer({ idleTimeoutMs: 50 }, async (url) => {
    const connection = await dial(url);
    assert.equal(await connection.call("rpc.ping"), "pong");
    await within(connection.closed, 2_000, "the idle timeout");
    assert.ok(connection.isClosed);
    await assert.rejects(connection.call("rpc.ping"), isConnectionError(false));
  });
});

Deno.test("closing the server rejects outstanding calls with written=true", async () => {
  let started!: () => void;
  const running = new Promise<void>((resolve) => started = resolve);
  const server = serve({
    methods: {
      hang: () => {
        started();
        return new Promise(() => {});
      },
    },
  });
  const connection = await dial(server.url);
  const pending = connection.call("hang");
  await within(running, 2_000, "the method to start");
  await within(server.close(), 2_000, "server.close()");
  await assert.rejects(pending, isConnectionError(true));
  await connection.closed;
});

Deno.test("RpcConnection refuses a bad timeoutMs or maxFrameBytes", () => {
  for (
    const options of [{ timeoutMs: 0 }, { timeoutMs: Number.NaN }, {
      maxFrameBytes: -1,
    }]
  ) {
    const fake = fakeStream();
    assert.throws(() => new RpcConnection(fake.stream, options), RangeError);
  }
});

Deno.test("server notifications reach onNotification in order; rpc.goaway is not passed on", async () => {
  const fake = fakeStream();
  const seen: unknown[] = [];
  const connection = new RpcConnection(fake.stream, {
    onNotification: (method, params) => seen.push([method, params]),
  });
  fake.push(
    '{"jsonrpc":"2.0","method":"event","params":{"n":1}}\n' +
      '[{"jsonrpc":"2.0","method":"event","params":[2]},{"jsonrpc":"2.0","method":"noparams"}]\n' +
      '{"jsonrpc":"2.0","method":"bad","params":3}\n' +
      '{"jsonrpc":"2.0","method":"request","id":9}\n',
  );
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual(seen, [
    ["event", { n: 1 }],
    ["event", [2]],
    ["noparams", undefined],
  ]);
  connection.close();
  await connection.closed;
});
