import assert from "node:assert/strict";
import { INVALID_PARAMS, RpcError } from "../errors.ts";
import type { Methods } from "./dispatcher.ts";
import {
  type RpcServer,
  serve,
  type ServeOptions,
} from "../../adapter/deno/serve.ts";
import type { RpcSession } from "./server_connection.ts";
import { exchange, RawClient, withRawServer } from "../../testing/rpc.ts";
import { delay, within } from "../../testing/time.ts";

/** The methods of the examples in section 7 of the JSON-RPC 2.0 spec, and more. */
function specMethods(log: unknown[] = []): Methods {
  return {
    subtract: (a: number | { minuend: number; subtrahend: number }, b = 0) =>
      typeof a === "object" ? a.minuend - a.subtrahend : a - b,
    sum: (...numbers: number[]) => numbers.reduce((x, y) => x + y, 0),
    update: (...args: unknown[]) => void log.push(["update", args]),
    notify_hello: (n: number) => void log.push(["notify_hello", n]),
    notify_sum: (...numbers: number[]) =>
      void log.push(["notify_sum", numbers]),
    get_data: () => ["hello", 5],
    echo: (value: unknown) => value,
    checked: (name: unknown) => {
      if (typeof name !== "string") {
        throw new RpcError(
          INVALID_PARAMS,
          "Invalid params: name must be a string",
          { param: "name" },
        );
      }
      return name;
    },
    crash: () => {
      throw new Error("the database is on fire");
    },
  };
}

function withServer(
  fn: (server: RpcServer, client: RawClient) => Promise<void>,
  options: Partial<ServeOptions> = {},
): Promise<void> {
  return withRawServer({ methods: specMethods(), ...options }, fn);
}

function parseErrorOf(text: string): string {
  try {
    JSON.parse(text);
  } catch (error) {
    return `{"jsonrpc":"2.0","error":{"code":-32700,"message":${
      JSON.stringify(`Parse error: ${(error as Error).message}`)
    }},"id":null}`;
  }
  throw new Error("valid JSON");
}

const PING = '{"jsonrpc":"2.0","method":"rpc.ping","id":"ping"}';
const PONG = '{"jsonrpc":"2.0","result":"pong","id":"ping"}';

Deno.test("serve listens on an ephemeral port of 127.0.0.1 and answers rpc.ping", async () => {
  await withServer(async (server, client) => {
    assert.equal(server.hostname, "127.0.0.1");
    assert.ok(server.port > 0);
    assert.equal(server.url, `tcp://127.0.0.1:${server.port}`);
    await exchange(client, PING, PONG);
  });
});

Deno.test("a user method can override rpc.ping", async () => {
  await withServer(async (_server, client) => {
    await exchange(
      client,
      PING,
      '{"jsonrpc":"2.0","result":"custom","id":"ping"}',
    );
  }, { methods: { "rpc.ping": () => "custom" } });
});

Deno.test("invalid JSON gets -32700 with id null", async () => {
  await withServer(async (_server, client) => {
    const text = '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]';
    await exchange(client, text, parseErrorOf(text));
    // A batch that is not valid JSON gets one parse error.
    const batch =
      '[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0", "method"]';
    await exchange(client, batch, parseErrorOf(batch));
    await exchange(client, PING, PONG);
  });
});

Deno.test("an invalid Request object gets -32600 with id null", async () => {
  await withServer(async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc": "2.0", "method": 1, "params": "bar"}',
      '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: \\"method\\" must be a string"},"id":null}',
    );
  });
});

Deno.test("an unknown method gets -32601", async () => {
  await withServer(async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}',
      '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: no method \\"foobar\\" on this server"},"id":"1"}',
    );
  });
});

Deno.test("a method's RpcError is sent exactly (invalid params)", async () => {
  await withServer(async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"checked","params":[42],"id":3}',
      '{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params: name must be a string","data":{"param":"name"}},"id":3}',
    );
  });
});

Deno.test("a method that throws gets -32603 and is reported", async () => {
  const reported: [string, string][] = [];
  await withServer(async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"crash","id":4}',
      '{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error: the database is on fire"},"id":4}',
    );
  }, {
    onInternalError: (error, method) =>
      void reported.push([method, (error as Error).message]),
  });
  assert.deepEqual(reported, [["crash", "the database is on fire"]]);
});

Deno.test("a notification gets no response, even when it fails", async () => {
  const log: unknown[] = [];
  await withServer(async (_server, client) => {
    await client.send(
      '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}',
    );
    await client.send('{"jsonrpc": "2.0", "method": "foobar"}');
    await client.send('{"jsonrpc": "2.0", "method": "crash"}');
    await client.send('{"jsonrpc": "2.0", "method": "checked", "params": [1]}');
    // The first line to come back answers the request sent after them.
    await exchange(client, PING, PONG);
  }, { methods: specMethods(log), onInternalError: () => {} });
  assert.deepEqual(log, [["update", [1, 2, 3, 4, 5]]]);
});

Deno.test("an empty batch gets a single -32600", async () => {
  await withServer(async (_server, client) => {
    await exchange(
      client,
      "[]",
      '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: a batch must hold at least one request"},"id":null}',
    );
  });
});

Deno.test("a batch of notifications gets nothing back", async () => {
  const log: unknown[] = [];
  await withServer(async (_server, client) => {
    await client.send(
      '[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]',
    );
    await exchange(client, PING, PONG);
  }, { methods: specMethods(log) });
  assert.deepEqual(log, [["notify_sum", [1, 2, 4]], ["notify_hello", 7]]);
});

Deno.test("the spec's mixed batch gets its responses in order", async () => {
  await withServer(async (_server, client) => {
    await exchange(
      client,
      '[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},' +
        '{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},' +
        '{"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},' +
        '{"foo": "boo"},' +
        '{"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},' +
        '{"jsonrpc": "2.0", "method": "get_data", "id": "9"}]',
      '[{"jsonrpc":"2.0","result":7,"id":"1"},' +
        '{"jsonrpc":"2.0","result":19,"id":"2"},' +
        '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: \\"jsonrpc\\" must be exactly \\"2.0\\""},"id":null},' +
        '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: no method \\"foo.get\\" on this server"},"id":"5"},' +
        '{"jsonrpc":"2.0","result":["hello",5],"id":"9"}]',
    );
  });
});

Deno.test("batches of non-objects get one -32600 per member", async () => {
  const invalid =
    '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: a request must be a JSON object"},"id":null}';
  await withServer(async (_server, client) => {
    await exchange(client, "[1]", `[${invalid}]`);
    await exchange(client, "[1,2]", `[${invalid},${invalid}]`);
    await exchange(client, "[1,2,3]", `[${invalid},${invalid},${invalid}]`);
  });
});

Deno.test("ids that are strings, numbers and null come back as sent", async () => {
  await withServer(async (_server, client) => {
    for (const id of ['"abc"', '""', "0", "42", "-7", "1.5", "null"]) {
      await exchange(
        client,
        `{"jsonrpc":"2.0","method":"echo","params":["x"],"id":${id}}`,
        `{"jsonrpc":"2.0","result":"x","id":${id}}`,
      );
    }
    // An id that is not a string, number or null makes the request invalid.
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"echo","params":["x"],"id":[1]}',
      '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: \\"id\\" must be a string, a number or null when present"},"id":null}',
    );
  });
});

Deno.test("positional and named params reach the method", async () => {
  await withServer(async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
      '{"jsonrpc":"2.0","result":19,"id":1}',
    );
    await exchange(
      client,
      '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
      '{"jsonrpc":"2.0","result":-19,"id":2}',
    );
    await exchange(
      client,
      '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}',
      '{"jsonrpc":"2.0","result":19,"id":3}',
    );
    await exchange(
      client,
      '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}',
      '{"jsonrpc":"2.0","result":19,"id":4}',
    );
  });
});

Deno.test("an oversize frame gets -32600 and the connection stays usable", async () => {
  await withServer(async (_server, client) => {
    const big = JSON.stringify({
      jsonrpc: "2.0",
      method: "echo",
      params: ["x".repeat(500)],
      id: 1,
    });
    await exchange(
      client,
      big,
      '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: frame exceeds 256 bytes; send smaller messages or raise maxFrameBytes"},"id":null}',
    );
    await exchange(client, PING, PONG);
  }, { maxFrameBytes: 256 });
});

Deno.test("a frame that is not UTF-8 gets -32700", async () => {
  await withServer(async (_server, client) => {
    await client.write(new Uint8Array([0x7b, 0xff, 0x7d, 0x0a]));
    assert.equal(
      await client.line(),
      '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: frame is not valid UTF-8"},"id":null}',
    );
    await exchange(client, PING, PONG);
  });
});

Deno.test("a frame split across two writes with a delay is one request", async () => {
  await withServer(async (_server, client) => {
    await client.write('{"jsonrpc":"2.0","method":"echo",');
    await delay(30);
    await client.write('"params":["joined"],"id":9}\n');
    assert.equal(
      await client.line(),
      '{"jsonrpc":"2.0","result":"joined","id":9}',
    );
  });
});

Deno.test("a multi-byte character split across writes survives", async () => {
  await withServer(async (_server, client) => {
    const bytes = new TextEncoder().encode(
      '{"jsonrpc":"2.0","method":"echo","params":["a🙂€b"],"id":1}\n',
    );
    const smile = bytes.indexOf(0xf0);
    await client.write(bytes.subarray(0, smile + 2)); // half of 🙂
    await delay(20);
    await client.write(bytes.subarray(smile + 2, smile + 5)); // the rest and 1 byte of €
    await delay(20);
    await client.write(bytes.subarray(smile + 5));
    assert.equal(
      await client.line(),
      '{"jsonrpc":"2.0","result":"a🙂€b","id":1}',
    );
  });
});

Deno.test("requests on one connection run concurrently and answer as they finish", async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  await withServer(async (_server, client) => {
    await client.send('{"jsonrpc":"2.0","method":"wait","id":"slow"}');
    await exchange(client, PING, PONG);
    release();
    assert.equal(
      await client.line(),
      '{"jsonrpc":"2.0","result":"done","id":"slow"}',
    );
  }, {
    methods: {
      wait: async () => {
        await gate;
        return "done";
      },
    },
  });
});

Deno.test("maxInFlight bounds the requests running at once on a connection", async () => {
  let running = 0;
  let peak = 0;
  await withServer(async (_server, client) => {
    const requests = Array.from(
      { length: 20 },
      (_, i) => `{"jsonrpc":"2.0","method":"work","id":${i}}`,
    );
    await client.write(requests.join("\n") + "\n");
    const ids = new Set<number>();
    for (let i = 0; i < 20; i++) ids.add(JSON.parse((await client.line())!).id);
    assert.equal(ids.size, 20);
  }, {
    maxInFlight: 3,
    methods: {
      work: async () => {
        running++;
        peak = Math.max(peak, running);
        await delay(5);
        running--;
        return null;
      },
    },
  });
  assert.equal(peak, 3);
});

Deno.test("a client that half-closes still gets its responses", async () => {
  await withServer(async (_server, client) => {
    await client.send(
      '{"jsonrpc":"2.0","method":"slowEcho","params":[1],"id":1}',
    );
    await client.write(
      '{"jsonrpc":"2.0","method":"slowEcho","params":[2],"id":2}',
    ); // no newline
    await client.closeWrite();
    const rest = await client.rest();
    assert.deepEqual(
      rest.trimEnd().split("\n").sort(),
      [
        '{"jsonrpc":"2.0","result":1,"id":1}',
        '{"jsonrpc":"2.0","result":2,"id":2}',
      ],
    );
  }, {
    methods: {
      slowEcho: async (value: unknown) => {
        await delay(20);
        return value;
      },
    },
  });
});

Deno.test("the idle timeout closes a silent connection", async () => {
  await withServer(async (_server, client) => {
    await exchange(client, PING, PONG);
    assert.equal(await client.rest(2_000), "");
  }, { idleTimeoutMs: 50 });
});

Deno.test("the idle timeout counts from when the connection went quiet: busy past it stays open, then closes no sooner than the timeout", async () => {
  // Gaps of a fifth of the timeout, busy for longer than it: a loaded
  // machine may stretch a gap a few times over and still stay under it.
  const idleTimeoutMs = 1_000;
  await withServer(async (_server, client) => {
    const busy = performance.now();
    for (let i = 0; i < 6; i++) {
      await exchange(client, PING, PONG);
      await delay(idleTimeoutMs / 5);
    }
    await exchange(client, PING, PONG);
    assert.ok(performance.now() - busy > idleTimeoutMs);
    const quiet = performance.now();
    assert.equal(await client.rest(10_000), "");
    const waited = performance.now() - quiet;
    // The server's clock starts when it answered, a little before the
    // client read the answer.
    assert.ok(
      waited >= idleTimeoutMs * 0.95,
      `closed ${waited} ms after the last answer`,
    );
  }, { idleTimeoutMs });
});

Deno.test("a peer that leaves mid-response crashes nothing", async () => {
  let finished!: () => void;
  const done = new Promise<void>((resolve) => finished = resolve);
  await withServer(async (server, client) => {
    await client.send('{"jsonrpc":"2.0","method":"big","id":1}');
    await delay(10);
    client.close();
    await within(done, 2_000, "the method to finish");
    await delay(20);
    // The server still serves others.
    const other = await RawClient.connect(server.port);
    try {
      await exchange(other, PING, PONG);
    } finally {
      other.close();
    }
  }, {
    methods: {
      big: async () => {
        await delay(40);
        finished();
        return "x".repeat(4 * 1024 * 1024);
      },
    },
  });
});

Deno.test("close() ends open connections and resolves finished", async () => {
  const server = serve({ methods: specMethods() });
  const clients = await Promise.all(
    [1, 2, 3].map(() => RawClient.connect(server.port)),
  );
  try {
    for (const client of clients) await exchange(client, PING, PONG);
    await within(server.close(), 2_000, "server.close()");
    await server.finished;
    for (const client of clients) assert.equal(await client.rest(2_000), "");
    await assert.rejects(
      Deno.connect({ hostname: "127.0.0.1", port: server.port }),
    );
  } finally {
    for (const client of clients) client.close();
    await server.close();
  }
});

Deno.test("aborting the signal closes the server", async () => {
  const controller = new AbortController();
  const server = serve({ methods: {}, signal: controller.signal });
  const client = await RawClient.connect(server.port);
  try {
    await exchange(client, PING, PONG);
    controller.abort();
    await within(server.finished, 2_000, "server.finished");
    assert.equal(await client.rest(2_000), "");
  } finally {
    client.close();
  }
});

Deno.test("serve refuses bad limits before listening", () => {
  for (
    const limits of [
      { maxFrameBytes: 0 },
      { maxFrameBytes: 1.5 },
      { maxInFlight: 0 },
      { idleTimeoutMs: -1 },
      { idleTimeoutMs: Number.NaN },
    ]
  ) {
    assert.throws(() => serve({ methods: {}, ...limits }), RangeError);
  }
});

Deno.test("a per-connection method table pushes notifications to its own client only", async () => {
  const sessions: number[] = [];
  const server = serve({
    methods: (session) => {
      sessions.push(session.id);
      return {
        subscribe: (topic: string) => {
          // Pushed before the response: the client sees both, in this order.
          session.notify("event", { topic, session: session.id });
          return "subscribed";
        },
      };
    },
  });
  const a = await RawClient.connect(server.port);
  const b = await RawClient.connect(server.port);
  try {
    await a.send(
      '{"jsonrpc":"2.0","method":"subscribe","params":["x"],"id":1}',
    );
    const first = await a.line();
    const second = await a.line();
    assert.equal(
      first,
      `{"jsonrpc":"2.0","method":"event","params":{"topic":"x","session":${
        JSON.parse(first!).params.session
      }}}`,
    );
    assert.equal(second, '{"jsonrpc":"2.0","result":"subscribed","id":1}');
    // rpc.ping is still added to a per-connection table.
    await exchange(b, PING, PONG);
    assert.equal(sessions.length, 2);
    assert.notEqual(sessions[0], sessions[1]);
  } finally {
    a.close();
    b.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("a session's signal aborts when its client leaves, and notify then returns false", async () => {
  const seen = Promise.withResolvers<RpcSession>();
  const server = serve({
    methods: (session) => ({ hello: () => void seen.resolve(session) }),
  });
  const client = await RawClient.connect(server.port);
  try {
    await client.send('{"jsonrpc":"2.0","method":"hello","id":1}');
    const session = await within(seen.promise, 5_000, "the call");
    assert.equal(session.signal.aborted, false);
    assert.match(session.remoteAddress ?? "", /^127\.0\.0\.1:\d+$/);
    client.close();
    await within(
      new Promise((resolve) =>
        session.signal.addEventListener("abort", resolve)
      ),
      5_000,
      "the session's end",
    );
    assert.equal(session.notify("late", []), false);
  } finally {
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("onMethodNotFound may close the session before -32601 is sent", async () => {
  const missing: string[] = [];
  const server = serve({
    methods: { known: () => 1 },
    onMethodNotFound: (method, session) => {
      missing.push(method);
      session.close();
    },
  });
  const client = await RawClient.connect(server.port);
  try {
    await client.send('{"jsonrpc":"2.0","method":"raft.step","params":[[]]}');
    assert.equal(await client.rest(), "");
    assert.deepEqual(missing, ["raft.step"]);
  } finally {
    client.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("advertise names the address clients dial; a wildcard listen without it is flagged", async () => {
  const advertised = serve({
    hostname: "0.0.0.0",
    advertise: "127.0.0.1",
    methods: {},
  });
  const plain = serve({ hostname: "0.0.0.0", methods: {} });
  try {
    assert.equal(advertised.url, `tcp://127.0.0.1:${advertised.port}`);
    assert.equal(advertised.wildcard, false);
    assert.equal(plain.url, `tcp://0.0.0.0:${plain.port}`);
    assert.equal(plain.wildcard, true);
    assert.throws(
      () => serve({ advertise: "0.0.0.0", methods: {} }),
      /wildcard address cannot be dialed/,
    );
  } finally {
    await advertised.close();
    await plain.close();
  }
});
