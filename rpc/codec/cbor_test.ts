import "./cbor.ts";
import assert from "node:assert/strict";
import {
  CANCELLED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  type RpcError,
} from "../errors.ts";
import { dial } from "../transport/dial.ts";
import { RpcConnection } from "../client/connection.ts";
import { type RpcServer, serve } from "../../adapter/deno/serve.ts";
import { type CallContext, withContext } from "../server/method.ts";
import { cborCodec } from "./_cbor_codec.ts";
import {
  CBOR_PREAMBLE,
  cborFrame,
  concat,
  decodeCbor,
  exchange,
  fakeStream,
  hex,
  lengthPrefixed,
  RawClient,
  RawFrameClient,
} from "../../testing/rpc.ts";
import { within } from "../../testing/time.ts";

/** Runs `fn` with a server and a raw CBOR client (preamble sent); closes both. */
async function withCborServer(
  options: Partial<Parameters<typeof serve>[0]>,
  fn: (server: RpcServer, client: RawFrameClient) => Promise<void>,
): Promise<void> {
  const server = serve({ methods: {}, ...options });
  const client = await RawFrameClient.connect(server.port);
  try {
    await fn(server, client);
  } finally {
    client.close();
    await within(server.close(), 5_000, "server.close()");
  }
}

const add = (a: number, b: number) => a + b;

/** `{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}`, by hand. */
const ADD_REQUEST = hex(
  "a4 67 6a736f6e727063 63 322e30 66 6d6574686f64 63 616464" +
    " 66 706172616d73 82 01 02 62 6964 01",
);
/** `{"jsonrpc":"2.0","result":3,"id":1}`, by hand. */
const ADD_RESPONSE = hex(
  "a3 67 6a736f6e727063 63 322e30 66 726573756c74 03 62 6964 01",
);

Deno.test("cbor: a request written byte by byte gets its response byte for byte", async () => {
  await withCborServer({ methods: { add } }, async (_server, client) => {
    const frame = lengthPrefixed(ADD_REQUEST);
    assert.deepEqual(frame.subarray(0, 4), hex("00 00 00 26"));
    for (const byte of frame) await client.write(Uint8Array.of(byte));
    assert.deepEqual(await client.frame(), ADD_RESPONSE);
    // Two frames in one write, and the next one whole.
    await client.write(concat(frame, frame));
    assert.deepEqual(await client.frame(), ADD_RESPONSE);
    assert.deepEqual(await client.frame(), ADD_RESPONSE);
  });
});

Deno.test("cbor: a batch gets one array of responses in request order; notifications get none", async () => {
  const logged: string[] = [];
  const methods = {
    add,
    log: (text: string) => void logged.push(text),
    slow: async (ms: number) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return ms;
    },
  };
  await withCborServer({ methods }, async (_server, client) => {
    await client.send([
      { jsonrpc: "2.0", method: "slow", params: [30], id: "a" },
      { jsonrpc: "2.0", method: "log", params: ["hi"] },
      { jsonrpc: "2.0", method: "nope", id: 2 },
      { jsonrpc: "2.0", method: "add", params: [2, 3], id: 3 },
    ]);
    assert.deepEqual(await client.message(), [
      { jsonrpc: "2.0", result: 30, id: "a" },
      {
        jsonrpc: "2.0",
        error: {
          code: -32601,
          message: 'Method not found: no method "nope" on this server',
        },
        id: 2,
      },
      { jsonrpc: "2.0", result: 5, id: 3 },
    ]);
    assert.deepEqual(logged, ["hi"]);
    await client.send([]);
    assert.deepEqual(await client.message(), {
      jsonrpc: "2.0",
      error: {
        code: -32600,
        message: "Invalid Request: a batch must hold at least one request",
      },
      id: null,
    });
  });
});

Deno.test("cbor: a connection that ends inside a frame gets -32700 and is closed; the server goes on", async () => {
  const server = serve({ methods: { add } });
  try {
    const inFrame = await RawFrameClient.connect(server.port);
    await inFrame.write(concat(hex("00 00 00 64"), new Uint8Array(10)));
    await inFrame.closeWrite();
    assert.deepEqual(await inFrame.message(), {
      jsonrpc: "2.0",
      error: {
        code: -32700,
        message:
          "Parse error: the connection ended inside a frame (10 of its 100 bytes)",
      },
      id: null,
    });
    assert.equal(await inFrame.frame(), null);
    inFrame.close();

    const inLength = await RawFrameClient.connect(server.port);
    await inLength.write(hex("00 00"));
    await inLength.closeWrite();
    assert.deepEqual(await inLength.message(), {
      jsonrpc: "2.0",
      error: {
        code: -32700,
        message:
          "Parse error: the connection ended inside a frame's 4-byte length (2 bytes of it)",
      },
      id: null,
    });
    assert.equal(await inLength.frame(), null);
    inLength.close();

    const fine = await RawFrameClient.connect(server.port);
    await fine.write(lengthPrefixed(ADD_REQUEST));
    assert.deepEqual(await fine.frame(), ADD_RESPONSE);
    fine.close();
  } finally {
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("cbor: a length above maxFrameBytes is refused at once with -32600 and the connection closed, the frame never read", async () => {
  await withCborServer(
    { methods: { add }, maxFrameBytes: 1024 },
    async (_server, client) => {
      // Only the preamble and the 4 bytes of the length are sent.
      await client.write(hex("ff ff ff ff"));
      assert.deepEqual(await client.message(), {
        jsonrpc: "2.0",
        error: {
          code: -32600,
          message:
            "Invalid Request: a frame of 4294967295 bytes exceeds maxFrameBytes (1024 bytes); send smaller messages or raise maxFrameBytes (the connection is closed)",
        },
        id: null,
      });
      // Whatever follows is dropped unread, and the server closes.
      await client.write(new Uint8Array(64 * 1024));
      assert.equal(await client.frame(3_000), null);
    },
  );
});

Deno.test("cbor: a client whose request is over the server's limit learns the limit, not just a closed connection", async () => {
  const server = serve({
    methods: { echo: (x: unknown) => x },
    maxFrameBytes: 64 * 1024,
  });
  const connection = await dial(server.url, { codec: "cbor" });
  try {
    const big = Array.from(
      { length: 4096 },
      (_, i) => ({ i, text: "x".repeat(40) }),
    );
    const error = await connection.call("echo", [big]).then(
      () => assert.fail("the call succeeded"),
      (error) => error,
    );
    assert.ok(error instanceof ConnectionError, String(error));
    assert.equal(error.written, true);
    assert.match(
      error.message,
      /after refusing a frame: Invalid Request: a frame of \d+ bytes exceeds maxFrameBytes \(65536 bytes\); send smaller messages or raise maxFrameBytes/,
    );
  } finally {
    connection.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("cbor: malformed CBOR gets -32700 naming the fault, and the connection goes on", async () => {
  await withCborServer({ methods: { add } }, async (_server, client) => {
    const cases: [string, string][] = [
      ["", "the frame is empty"],
      ["1c", "byte 0 has the reserved argument 28"],
      ["a1 61", "the frame ends before the items announced"],
      ["81 62 61", "the frame ends inside a string"],
      ["82 81 01", "the frame ends inside its item"],
      ["01 02", "1 bytes follow the item"],
      ["62 c3 28", "a text string is not valid UTF-8"],
      ["ff", "byte 0 is a break out of place"],
      ["9f 01 bf 61 61 ff", "byte 5 is a break out of place"],
      ["7f 61 61 ff", "indefinite-length strings are not supported"],
      [
        "9b 00 00 00 01 00 00 00 00",
        "the frame ends before the items announced",
      ],
    ];
    for (const [bytes, reason] of cases) {
      await client.write(lengthPrefixed(hex(bytes)));
      assert.deepEqual(await client.message(), {
        jsonrpc: "2.0",
        error: {
          code: -32700,
          message: `Parse error: malformed CBOR: ${reason}`,
        },
        id: null,
      }, bytes);
    }
    await client.write(lengthPrefixed(ADD_REQUEST));
    assert.deepEqual(await client.frame(), ADD_RESPONSE);
  });
});

Deno.test("cbor: values JSON cannot represent are refused with -32600 saying which, with the request's id; a batch refuses only that member", async () => {
  const ran: unknown[] = [];
  const methods = { take: (...args: unknown[]) => (ran.push(args), "ran") };
  /** A request for `take` whose params are the CBOR item `params`, id 5. */
  const take = (params: string) =>
    "a4 67 6a736f6e727063 63 322e30 66 6d6574686f64 64 74616b65" +
    ` 66 706172616d73 ${params} 62 6964 05`;
  await withCborServer({ methods }, async (_server, client) => {
    const cases: [string, string][] = [
      [
        "81 42 0102",
        "a CBOR byte string has no JSON equivalent; send text (base64, say) or an array of numbers",
      ],
      [
        "81 f7",
        "undefined has no JSON equivalent; send null or leave the member out",
      ],
      [
        "81 c1 1a 00000000",
        "a CBOR tag (1) has no JSON equivalent; send the value without it",
      ],
      [
        "a1 01 02",
        "a map key that is not a text string has no JSON equivalent (JSON member names are strings)",
      ],
      ["81 f9 7e00", "NaN and infinities have no JSON equivalent"],
      ["81 fb 7ff0000000000000", "NaN and infinities have no JSON equivalent"],
      [
        "a1 69 5f5f70726f746f5f5f 01",
        'the map key "__proto__" is not accepted (JavaScript would not read it as a member)',
      ],
      ["81 f0", "the CBOR simple value 16 has no JSON equivalent"],
      [
        "81 " + "81 ".repeat(1_000) + "01",
        "the item is nested deeper than 1000 levels",
      ],
    ];
    for (const [params, issue] of cases) {
      await client.write(lengthPrefixed(hex(take(params))));
      assert.deepEqual(await client.message(), {
        jsonrpc: "2.0",
        error: { code: -32600, message: `Invalid Request: ${issue}` },
        id: 5,
      }, params.slice(0, 40));
    }
    assert.deepEqual(ran, []);
    // A batch: [take([1]), take(byte string), take(["ok"])], ids 5 each.
    await client.write(lengthPrefixed(hex(
      `83 ${take("81 01")} ${take("81 42 0102")} ${take("81 62 6f6b")}`,
    )));
    assert.deepEqual(await client.message(), [
      { jsonrpc: "2.0", result: "ran", id: 5 },
      {
        jsonrpc: "2.0",
        error: {
          code: -32600,
          message:
            "Invalid Request: a CBOR byte string has no JSON equivalent; send text (base64, say) or an array of numbers",
        },
        id: 5,
      },
      { jsonrpc: "2.0", result: "ran", id: 5 },
    ]);
    assert.deepEqual(ran, [[1], ["ok"]]);
  });
});

Deno.test("cbor: a connection that starts with 0xd9 but not the whole preamble is refused and closed", async () => {
  const server = serve({ methods: { add } });
  const client = await RawFrameClient.connect(server.port, false);
  try {
    await client.write(hex("d9 d9 00 00 00 00 01"));
    assert.deepEqual(await client.message(), {
      jsonrpc: "2.0",
      error: {
        code: -32700,
        message:
          "Parse error: a CBOR connection must open with the self-describe tag d9 d9 f7, and this one opened with d9 d9 00",
      },
      id: null,
    });
    await client.closeWrite();
    assert.equal(await client.frame(), null);
  } finally {
    client.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("cbor: a CBOR client and an NDJSON client on the same port at the same time", async () => {
  const server = serve({ methods: { add } });
  const cbor = await RawFrameClient.connect(server.port);
  const ndjson = await RawClient.connect(server.port);
  const [cborConnection, jsonConnection] = await Promise.all([
    dial(server.url, { codec: "cbor" }),
    dial(server.url),
  ]);
  try {
    // Interleaved on the wire: each connection is answered in its own codec.
    await cbor.write(lengthPrefixed(ADD_REQUEST).subarray(0, 10));
    await exchange(
      ndjson,
      '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}',
      '{"jsonrpc":"2.0","result":3,"id":1}',
    );
    await cbor.write(lengthPrefixed(ADD_REQUEST).subarray(10));
    assert.deepEqual(await cbor.frame(), ADD_RESPONSE);
    const sums = await Promise.all(
      Array.from(
        { length: 200 },
        (_, i) =>
          (i % 2 === 0 ? cborConnection : jsonConnection).call<number>("add", [
            i,
            1,
          ]),
      ),
    );
    assert.deepEqual(sums, Array.from({ length: 200 }, (_, i) => i + 1));
  } finally {
    cbor.close();
    ndjson.close();
    cborConnection.close();
    jsonConnection.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

/** A server whose `wait` runs until its signal aborts, recording why. */
function waitingServer() {
  const seen: { id: unknown; deadline: number | null; reason: number }[] = [];
  const server = serve({
    methods: {
      add,
      wait: withContext((context: CallContext) =>
        new Promise((resolve) => {
          const timer = setTimeout(() => resolve("not aborted"), 5_000);
          context.signal.addEventListener("abort", () => {
            clearTimeout(timer);
            seen.push({
              id: context.id,
              deadline: context.deadline,
              reason: (context.signal.reason as RpcError).code,
            });
            resolve("aborted");
          });
        })
      ),
      slow: async (ms: number) => {
        await new Promise((resolve) => setTimeout(resolve, ms));
        return ms;
      },
    },
  });
  return { server, seen };
}

Deno.test("cbor: deadlines (timeoutMs) and rpc.cancel reach the server as over JSON", async () => {
  const { server, seen } = waitingServer();
  const raw = await RawFrameClient.connect(server.port);
  const connection = await dial(server.url, { codec: "cbor" });
  try {
    const before = Date.now();
    await raw.send({ jsonrpc: "2.0", method: "wait", id: 1, timeoutMs: 30 });
    assert.deepEqual(await raw.message(), {
      jsonrpc: "2.0",
      result: "aborted",
      id: 1,
    });
    assert.equal(seen[0].reason, DEADLINE_EXCEEDED);
    assert.ok(seen[0].deadline! >= before + 30, "the deadline is timeoutMs");
    assert.ok(seen[0].deadline! <= Date.now() + 1);
    await raw.send({ jsonrpc: "2.0", method: "wait", id: 2 });
    await raw.send({ jsonrpc: "2.0", method: "rpc.cancel", params: { id: 2 } });
    assert.deepEqual(await raw.message(), {
      jsonrpc: "2.0",
      result: "aborted",
      id: 2,
    });
    assert.deepEqual(seen[1], { id: 2, deadline: null, reason: CANCELLED });

    // Through RpcConnection: its deadline, and its signal sending rpc.cancel.
    const late = await connection.call("wait", [], { timeoutMs: 30 }).then(
      () => assert.fail("resolved"),
      (error: RpcError) => error,
    );
    assert.equal(late.code, DEADLINE_EXCEEDED);
    const controller = new AbortController();
    const cancelled = connection.call("wait", [], {
      signal: controller.signal,
      timeoutMs: 10_000,
    });
    setTimeout(() => controller.abort(), 30);
    await cancelled.then(
      () => assert.fail("resolved"),
      (error: RpcError) => assert.equal(error.code, CANCELLED),
    );
    for (let i = 0; i < 100 && seen.length < 4; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.deepEqual(seen.slice(2).map((s) => s.id), [1, 2]);
    assert.equal(seen[3].reason, CANCELLED);
    assert.equal(await connection.call("add", [2, 2]), 4);
  } finally {
    raw.close();
    connection.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("cbor: responses are written as they complete, and a batch works through RpcConnection", async () => {
  const { server } = waitingServer();
  const connection = await dial(server.url, { codec: "cbor" });
  try {
    const order: number[] = [];
    await Promise.all([
      connection.call<number>("slow", [60]).then((ms) => order.push(ms)),
      connection.call<number>("slow", [1]).then((ms) => order.push(ms)),
    ]);
    assert.deepEqual(order, [1, 60]);
    const results = await connection.batch([
      { method: "add", params: [1, 2] },
      { method: "add", params: [1, 2], notification: true },
      { method: "missing" },
    ]);
    assert.deepEqual(results.slice(0, 2), [
      { ok: true, value: 3 },
      { ok: true, value: undefined },
    ]);
    assert.equal(!results[2].ok && results[2].error.code, -32601);
  } finally {
    connection.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("cbor: a draining server's rpc.goaway reaches a CBOR client, which finishes its calls and closes", async () => {
  const { server } = waitingServer();
  const connection = await dial(server.url, { codec: "cbor" });
  try {
    const slow = connection.call<number>("slow", [80]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const drained = server.drain(5_000);
    assert.equal(await slow, 80);
    await within(connection.closed, 2_000, "the client to close");
    assert.equal(connection.isClosed, true);
    await within(drained, 2_000, "the drain");
  } finally {
    connection.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("cbor: results and params mean what JSON would send", async () => {
  const methods = {
    shapes: () => ({
      dropped: undefined,
      date: new Date(0),
      list: [undefined, () => 1, NaN],
      nested: { map: new Map([[1, 2]]) },
    }),
    big: () => 1n,
    echo: (...args: unknown[]) => args,
  };
  const server = serve({ methods, onInternalError: () => {} });
  const [cbor, json] = await Promise.all([
    dial(server.url, { codec: "cbor" }),
    dial(server.url),
  ]);
  try {
    const expected = {
      date: "1970-01-01T00:00:00.000Z",
      list: [null, null, null],
      nested: { map: {} },
    };
    assert.deepEqual(await json.call("shapes"), expected);
    assert.deepEqual(await cbor.call("shapes"), expected);
    for (const connection of [json, cbor]) {
      const error = await connection.call("big").then(
        () => assert.fail("resolved"),
        (e: RpcError) => e,
      );
      assert.equal(error.code, -32603);
      assert.match(error.message, /cannot be encoded as JSON/);
      assert.deepEqual(
        await connection.call("echo", [{ at: new Date(0), skip: undefined }]),
        [{ at: "1970-01-01T00:00:00.000Z" }],
      );
    }
  } finally {
    cbor.close();
    json.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("cbor: 8-byte integers in params read as the nearest double, as JSON.parse reads the same digits", async () => {
  const seen: unknown[] = [];
  await withCborServer(
    { methods: { take: (...args: unknown[]) => (seen.push(...args), null) } },
    async (_server, client) => {
      // params [5 as 8 bytes, 2^53 + 1, -(2^64)]
      await client.write(lengthPrefixed(hex(
        "a4 67 6a736f6e727063 63 322e30 66 6d6574686f64 64 74616b65" +
          " 66 706172616d73 83 1b 0000000000000005 1b 0020000000000001" +
          " 3b ffffffffffffffff 62 6964 01",
      )));
      assert.deepEqual(await client.message(), {
        jsonrpc: "2.0",
        result: null,
        id: 1,
      });
      assert.deepEqual(seen, [
        5,
        JSON.parse("9007199254740993"),
        JSON.parse("-18446744073709551616"),
      ]);
    },
  );
});

Deno.test("cbor: a connection refuses a codec it does not know", () => {
  assert.throws(
    () =>
      new RpcConnection(fakeStream().stream, {
        codec: "xml" as unknown as "json",
      }),
    new RangeError('codec must be "json" or "cbor", got "xml"'),
  );
});

Deno.test("cbor decoder: frames split anywhere decode the same, and a frame is buffered only up to its length", () => {
  const frames = concat(
    CBOR_PREAMBLE,
    cborFrame({
      jsonrpc: "2.0",
      method: "a",
      params: ["é".repeat(100)],
      id: 1,
    }),
    cborFrame([{ jsonrpc: "2.0", method: "b" }]),
  );
  const expected = [
    { jsonrpc: "2.0", method: "a", params: ["é".repeat(100)], id: 1 },
    [{ jsonrpc: "2.0", method: "b" }],
  ];
  for (const size of [1, 2, 3, 7, 64, frames.length]) {
    const decoder = cborCodec.decoder({ maxFrameBytes: 1024, preamble: true });
    const values: unknown[] = [];
    for (let i = 0; i < frames.length; i += size) {
      for (const frame of decoder.push(frames.slice(i, i + size))) {
        values.push(frame.value);
      }
    }
    assert.deepEqual(values, expected, `chunks of ${size}`);
    assert.deepEqual(decoder.end(), []);
  }
  assert.deepEqual(
    decodeCbor(cborCodec.frame({ a: [1] }).subarray(4)),
    { a: [1] },
  );
});

Deno.test("cbor: neither the core nor the Deno entry loads cbor-x, and the error says how to get CBOR", async () => {
  const script = `
    import { connect } from "./mod.ts";
    import "./adapter/deno/mod.ts";
    import { RpcConnection } from "./rpc/transport/mod.ts";
    const stream = { readable: new ReadableStream(), writable: new WritableStream(), close() {} };
    try { new RpcConnection(stream, { codec: "cbor" }); console.log("no error"); }
    catch (error) { console.log(error.name + ": " + error.message); }
    // connect() refuses it at once too, not at its first call.
    try { connect("tcp://127.0.0.1:1", { codec: "cbor" }); console.log("no error"); }
    catch (error) { console.log(error.name); }`;
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--ext=ts", script],
    cwd: new URL("../../", import.meta.url),
    stdout: "piped",
    stderr: "inherit",
  }).output();
  assert.equal(output.code, 0);
  assert.equal(
    new TextDecoder().decode(output.stdout).trim(),
    'RangeError: the CBOR codec is not loaded: import "@rafter/rpc/cbor" once in this process (it loads cbor-x; no other entry does, so that projects without CBOR install no npm package)\nRangeError',
  );
});
