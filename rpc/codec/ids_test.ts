import "./cbor.ts";
import assert from "node:assert/strict";
import { RpcConnection } from "../client/connection.ts";
import { handleText } from "../server/dispatcher.ts";
import type { RequestId, Response } from "../message.ts";
import { type CallContext, withContext } from "../server/method.ts";
import { serve } from "../../adapter/deno/serve.ts";
import {
  cborFrame,
  exchange,
  fakeStream,
  hex,
  lengthPrefixed,
  type RawClient,
  RawFrameClient,
  withRawServer,
} from "../../testing/rpc.ts";
import { delay, within } from "../../testing/time.ts";

const PING_2_53 = '{"jsonrpc":"2.0","method":"rpc.ping","id":9007199254740992}';
const PING_2_53_PLUS_1 =
  '{"jsonrpc":"2.0","method":"rpc.ping","id":9007199254740993}';

/** The next `count` lines, sorted (responses come in completion order). */
async function lines(client: RawClient, count: number): Promise<string[]> {
  const read: string[] = [];
  for (let i = 0; i < count; i++) read.push((await client.line())!);
  return read.sort();
}

Deno.test("json: an integer id above 2^53 is echoed digit for digit, and 2^53 and 2^53+1 in flight get their own ids", async () => {
  await withRawServer({}, async (_server, client) => {
    await exchange(
      client,
      PING_2_53_PLUS_1,
      '{"jsonrpc":"2.0","result":"pong","id":9007199254740993}',
    );
    await client.write(`${PING_2_53}\n${PING_2_53_PLUS_1}\n`);
    assert.deepEqual(await lines(client, 2), [
      '{"jsonrpc":"2.0","result":"pong","id":9007199254740992}',
      '{"jsonrpc":"2.0","result":"pong","id":9007199254740993}',
    ]);
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"rpc.ping","id":-123456789012345678901234567890}',
      '{"jsonrpc":"2.0","result":"pong","id":-123456789012345678901234567890}',
    );
    // The slow path leaves nested "id" members and escaped names alone.
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"rpc.ping","params":{"id":1,"x":["}",{"id":2}]} , "\\u0069d" : 18446744073709551617 }',
      '{"jsonrpc":"2.0","result":"pong","id":18446744073709551617}',
    );
  });
});

Deno.test("json: ids above 2^53 in a batch are echoed exactly, each with its member", async () => {
  await withRawServer({}, async (_server, client) => {
    await exchange(
      client,
      `[${PING_2_53_PLUS_1}, {"jsonrpc":"2.0","method":"rpc.ping","id":7},{"jsonrpc":"2.0","method":"rpc.ping","id":-9007199254740993},{"jsonrpc":"2.0","method":"nope","id":9007199254740995}]`,
      '[{"jsonrpc":"2.0","result":"pong","id":9007199254740993},{"jsonrpc":"2.0","result":"pong","id":7},{"jsonrpc":"2.0","result":"pong","id":-9007199254740993},{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: no method \\"nope\\" on this server"},"id":9007199254740995}]',
    );
  });
});

Deno.test("json: a numeric id a double would change is refused with -32600 and id null; one it keeps is echoed", async () => {
  await withRawServer({}, async (_server, client) => {
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"rpc.ping","id":1.5}',
      '{"jsonrpc":"2.0","result":"pong","id":1.5}',
    );
    await exchange(
      client,
      '{"jsonrpc":"2.0","method":"rpc.ping","id":0.10}',
      '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: the id 0.10 would not come back as it was sent (a double reads it as 0.1); send an integer or a string id"},"id":null}',
    );
    await exchange(
      client,
      '[{"jsonrpc":"2.0","method":"rpc.ping","id":9007199254740993.0},{"jsonrpc":"2.0","method":"rpc.ping","id":1e400}]',
      '[{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: the id 9007199254740993.0 would not come back as it was sent (a double reads it as 9007199254740992); send an integer or a string id"},"id":null},{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: the id 1e400 would not come back as it was sent (a double reads it as null); send an integer or a string id"},"id":null}]',
    );
  });
});

Deno.test("json: a withContext method sees an id above 2^53 as a bigint", async () => {
  const seen: RequestId[] = [];
  const reply = await handleText(PING_2_53_PLUS_1.replace("rpc.ping", "id"), {
    id: withContext((context: CallContext) => {
      seen.push(context.id);
      return typeof context.id;
    }),
  });
  assert.deepEqual(seen, [9007199254740993n]);
  assert.equal(
    reply,
    '{"jsonrpc":"2.0","result":"bigint","id":9007199254740993}',
  );
});

/** A method that runs until its call is cancelled, then says which id it was. */
const waitUntilCancelled = {
  wait: withContext((context: CallContext) =>
    new Promise((resolve) => {
      const timer = setTimeout(() => resolve("timed out"), 5_000);
      context.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        resolve(`cancelled ${context.id}`);
      });
    })
  ),
};

Deno.test("json: rpc.cancel of an id above 2^53 cancels that call only, not the one whose id rounds the same", async () => {
  await withRawServer({ methods: waitUntilCancelled }, async (_s, client) => {
    await client.write(
      '{"jsonrpc":"2.0","method":"wait","id":9007199254740992}\n' +
        '{"jsonrpc":"2.0","method":"wait","id":9007199254740993}\n',
    );
    await delay(20);
    await client.send(
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":9007199254740993}}',
    );
    assert.equal(
      await client.line(),
      '{"jsonrpc":"2.0","result":"cancelled 9007199254740993","id":9007199254740993}',
    );
    await client.send(
      '{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":9007199254740992}}',
    );
    assert.equal(
      await client.line(),
      '{"jsonrpc":"2.0","result":"cancelled 9007199254740992","id":9007199254740992}',
    );
  });
});

Deno.test("json client: a response whose id is not a safe integer matches no call and reaches onUnmatchedResponse exactly", async () => {
  const fake = fakeStream();
  const unmatched: Response[] = [];
  const connection = new RpcConnection(fake.stream, {
    onUnmatchedResponse: (response) => unmatched.push(response),
  });
  try {
    const call = connection.call("rpc.ping");
    fake.push(
      '{"jsonrpc":"2.0","result":"not yours","id":9007199254740993}\n' +
        '{"jsonrpc":"2.0","result":"not yours either","id":1.5}\n' +
        '{"jsonrpc":"2.0","result":"pong","id":1}\n',
    );
    assert.equal(await within(call, 2_000, "the call"), "pong");
    assert.deepEqual(unmatched.map((response) => response.id), [
      9007199254740993n,
      1.5,
    ]);
  } finally {
    connection.close();
    await connection.closed;
  }
});

// ---------------------------------------------------------------- CBOR

const JSONRPC_2 = "67 6a736f6e727063 63 322e30"; // "jsonrpc": "2.0"
const ID = "62 6964"; // "id"

/** `{"jsonrpc":"2.0","method":"rpc.ping","id":<id>}` with `id` as CBOR hex. */
function cborPing(id: string): string {
  return `a3 ${JSONRPC_2} 66 6d6574686f64 68 7270632e70696e67 ${ID} ${id}`;
}

/** `{"jsonrpc":"2.0","result":"pong","id":<id>}` with `id` as CBOR hex. */
function cborPong(id: string): Uint8Array {
  return hex(`a3 ${JSONRPC_2} 66 726573756c74 64 706f6e67 ${ID} ${id}`);
}

const U64_2_53 = "1b 0020000000000000";
const U64_2_53_PLUS_1 = "1b 0020000000000001";
const NEG_2_53_MINUS_2 = "3b 0020000000000001"; // -1 - (2^53 + 1)

/** A server and a raw CBOR client for `fn`; both closed after. */
async function withCborClient(
  methods: Parameters<typeof serve>[0]["methods"],
  fn: (client: RawFrameClient) => Promise<void>,
): Promise<void> {
  const server = serve({ methods });
  const client = await RawFrameClient.connect(server.port);
  try {
    await fn(client);
  } finally {
    client.close();
    await within(server.close(), 5_000, "server.close()");
  }
}

/** The payloads of the next `count` frames, in hex, sorted. */
async function frames(
  client: RawFrameClient,
  count: number,
): Promise<string[]> {
  const read: string[] = [];
  for (let i = 0; i < count; i++) {
    read.push(hexOf((await client.frame())!));
  }
  return read.sort();
}

function hexOf(bytes: Uint8Array): string {
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("cbor: a 64-bit integer id above 2^53 is echoed as the same integer, and 2^53 and 2^53+1 in flight get their own ids", async () => {
  await withCborClient({}, async (client) => {
    await client.write(lengthPrefixed(hex(cborPing(U64_2_53_PLUS_1))));
    assert.deepEqual(await client.frame(), cborPong(U64_2_53_PLUS_1));
    await client.write(lengthPrefixed(hex(cborPing(U64_2_53))));
    await client.write(lengthPrefixed(hex(cborPing(U64_2_53_PLUS_1))));
    await client.write(lengthPrefixed(hex(cborPing(NEG_2_53_MINUS_2))));
    assert.deepEqual(
      await frames(client, 3),
      [U64_2_53, U64_2_53_PLUS_1, NEG_2_53_MINUS_2].map((id) =>
        hexOf(cborPong(id))
      ).sort(),
    );
    // A small id written in 8 bytes is the same small id.
    await client.write(lengthPrefixed(hex(cborPing("1b 0000000000000007"))));
    assert.deepEqual(await client.frame(), cborPong("07"));
  });
});

Deno.test("cbor: ids above 2^53 in a batch are echoed exactly, each with its member", async () => {
  await withCborClient({}, async (client) => {
    await client.write(lengthPrefixed(hex(
      `83 ${cborPing(U64_2_53_PLUS_1)} ${cborPing("07")} ${
        cborPing(NEG_2_53_MINUS_2)
      }`,
    )));
    assert.deepEqual(
      await client.frame(),
      hex(
        `83 ${hexOf(cborPong(U64_2_53_PLUS_1))} ${hexOf(cborPong("07"))} ${
          hexOf(cborPong(NEG_2_53_MINUS_2))
        }`,
      ),
    );
  });
});

Deno.test("cbor: rpc.cancel of a 64-bit id cancels that call only", async () => {
  await withCborClient(waitUntilCancelled, async (client) => {
    await client.send({ jsonrpc: "2.0", method: "wait", id: 2n ** 53n });
    await client.send({ jsonrpc: "2.0", method: "wait", id: 2n ** 53n + 1n });
    await delay(20);
    await client.send({
      jsonrpc: "2.0",
      method: "rpc.cancel",
      params: { id: 2n ** 53n + 1n },
    });
    assert.deepEqual(await client.message(), {
      jsonrpc: "2.0",
      result: "cancelled 9007199254740993",
      id: 2n ** 53n + 1n,
    });
    await client.send({
      jsonrpc: "2.0",
      method: "rpc.cancel",
      params: { id: 2n ** 53n },
    });
    assert.deepEqual(await client.message(), {
      jsonrpc: "2.0",
      result: "cancelled 9007199254740992",
      id: 2n ** 53n,
    });
  });
});

Deno.test("cbor client: a response id it cannot represent matches no call; a small id in 8 bytes matches its call", async () => {
  const fake = fakeStream();
  const unmatched: Response[] = [];
  const connection = new RpcConnection(fake.stream, {
    codec: "cbor",
    onUnmatchedResponse: (response) => unmatched.push(response),
  });
  try {
    const call = connection.call("rpc.ping");
    fake.pushBytes(cborFrame({
      jsonrpc: "2.0",
      result: "not yours",
      id: 2n ** 53n + 1n,
    }));
    fake.pushBytes(cborFrame({ jsonrpc: "2.0", result: "pong", id: 1n }));
    assert.equal(await within(call, 2_000, "the call"), "pong");
    assert.deepEqual(unmatched.map((response) => response.id), [
      9007199254740993n,
    ]);
  } finally {
    connection.close();
    await connection.closed;
  }
});
