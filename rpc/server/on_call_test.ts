import assert from "node:assert/strict";
import { type CallInfo, handleText, type Methods } from "./dispatcher.ts";
import { withContext } from "./method.ts";
import { serveStream } from "./server_connection.ts";
import { RpcError } from "../errors.ts";
import { fromDenoConn } from "../../adapter/deno/tcp.ts";
import { dial } from "../transport/dial.ts";

const methods: Methods = {
  add: (a: number, b: number) => a + b,
  refuse: () => {
    throw new RpcError(-32042, "no");
  },
  crash: () => {
    throw new Error("bug");
  },
  seen: withContext((context, value: unknown) => ({
    value,
    deadline: context.deadline,
    aborted: context.signal.aborted,
  })),
};

function recorder(): { calls: CallInfo[]; onCall(call: CallInfo): void } {
  const calls: CallInfo[] = [];
  return { calls, onCall: (call) => void calls.push(call) };
}

const quiet = { onInternalError: () => {} };

Deno.test("onCall: one report per call with its method and outcome: ok, error code, unknown method, notification", async () => {
  const { calls, onCall } = recorder();
  const options = { ...quiet, onCall };
  assert.equal(
    await handleText(
      '{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}',
      methods,
      options,
    ),
    '{"jsonrpc":"2.0","result":3,"id":1}',
  );
  await handleText(
    '{"jsonrpc":"2.0","method":"refuse","id":2}',
    methods,
    options,
  );
  await handleText(
    '{"jsonrpc":"2.0","method":"crash","id":3}',
    methods,
    options,
  );
  await handleText(
    '{"jsonrpc":"2.0","method":"nope","id":4}',
    methods,
    options,
  );
  assert.equal(
    await handleText(
      '{"jsonrpc":"2.0","method":"refuse"}',
      methods,
      options,
    ),
    null,
  );
  // A batch: each member on its own; a frame that is no request: none.
  await handleText(
    '[{"jsonrpc":"2.0","method":"add","params":[1,1],"id":5},{"jsonrpc":"2.0","method":"nope"}]',
    methods,
    options,
  );
  await handleText('{"jsonrpc":"2.0","id":6}', methods, options);
  assert.deepEqual(
    calls.map(({ method, outcome, code }) => ({ method, outcome, code })),
    [
      { method: "add", outcome: "ok", code: undefined },
      { method: "refuse", outcome: "error", code: -32042 },
      { method: "crash", outcome: "error", code: -32603 },
      { method: "nope", outcome: "error", code: -32601 },
      { method: "refuse", outcome: "notification", code: undefined },
      // Members are reported as they finish.
      { method: "nope", outcome: "notification", code: undefined },
      { method: "add", outcome: "ok", code: undefined },
    ],
  );
  for (const call of calls) {
    assert.ok(call.durationMs >= 0 && Number.isFinite(call.durationMs));
    assert.equal(call.bytesIn, undefined);
  }
});

Deno.test("onCall: a throwing hook does not change the answer, is logged once, and withContext calls keep their context", async () => {
  const logged: unknown[][] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => void logged.push(args);
  let calls = 0;
  const onCall = () => {
    calls++;
    throw new Error("hook bug");
  };
  try {
    for (let id = 1; id <= 3; id++) {
      assert.equal(
        await handleText(
          `{"jsonrpc":"2.0","method":"add","params":[${id},1],"id":${id}}`,
          methods,
          { onCall },
        ),
        `{"jsonrpc":"2.0","result":${id + 1},"id":${id}}`,
      );
    }
    const receivedAt = Date.now();
    const reply = JSON.parse(
      (await handleText(
        '{"jsonrpc":"2.0","method":"seen","params":["x"],"id":9,"timeoutMs":60000}',
        methods,
        { onCall, receivedAt },
      ))!,
    );
    assert.deepEqual(reply.result, {
      value: "x",
      deadline: receivedAt + 60_000 + 1,
      aborted: false,
    });
  } finally {
    console.error = original;
  }
  assert.equal(calls, 4);
  assert.equal(logged.length, 1);
  assert.match(String(logged[0][0]), /onCall hook threw/);
});

Deno.test("onCall on a server connection: a one-message frame is reported with its bytes in and out", async () => {
  const { calls, onCall } = recorder();
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const client = dial(`tcp://127.0.0.1:${listener.addr.port}`);
  const conn = await listener.accept();
  const finished = serveStream(fromDenoConn(conn), methods, {
    ...quiet,
    onCall,
  });
  const connection = await client;
  try {
    assert.equal(await connection.call("add", [2, 3]), 5);
    await assert.rejects(connection.call("refuse"), { code: -32042 });
  } finally {
    connection.close();
    await finished;
    listener.close();
  }
  const add = calls.find((call) => call.method === "add")!;
  assert.equal(add.outcome, "ok");
  // What the client sent and got for it, newline included.
  assert.ok(add.bytesIn! > '{"method":"add","params":[2,3]}'.length);
  assert.equal(add.bytesOut, '{"jsonrpc":"2.0","result":5,"id":1}\n'.length);
  const refuse = calls.find((call) => call.method === "refuse")!;
  assert.equal(refuse.outcome, "error");
  assert.equal(refuse.code, -32042);
  assert.ok(refuse.bytesOut! > 0);
});
