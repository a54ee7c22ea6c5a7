import assert from "node:assert/strict";
import { handleText, type Methods } from "./dispatcher.ts";
import { INVALID_PARAMS, RpcError } from "../errors.ts";

const quiet = { onInternalError: () => {} };

const methods: Methods = {
  subtract: (a: number, b: number) => a - b,
  named: ({ minuend, subtrahend }: { minuend: number; subtrahend: number }) =>
    minuend - subtrahend,
  nothing: () => undefined,
  arity: (...args: unknown[]) => args.length,
  slow: async (value: unknown) => {
    await Promise.resolve();
    return value;
  },
  bigint: () => 1n,
  cycle: () => {
    const value: Record<string, unknown> = {};
    value.self = value;
    return value;
  },
  fn: () => () => 1,
  refuse: () => {
    throw new RpcError(INVALID_PARAMS, "Invalid params: no", { hint: "yes" });
  },
  badData: () => {
    throw new RpcError(-32000, "with bigint data", 1n);
  },
  crash: () => {
    throw new Error("boom");
  },
  crashAsync: () => Promise.reject("plain string"),
  self(this: Methods) {
    return Object.hasOwn(this, "self");
  },
};

Deno.test("handleText answers a request, and nothing for a notification", async () => {
  assert.equal(
    await handleText(
      '{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}',
      methods,
    ),
    '{"jsonrpc":"2.0","result":19,"id":1}',
  );
  assert.equal(
    await handleText(
      '{"jsonrpc":"2.0","method":"named","params":{"subtrahend":23,"minuend":42},"id":"a"}',
      methods,
    ),
    '{"jsonrpc":"2.0","result":19,"id":"a"}',
  );
  assert.equal(
    await handleText(
      '{"jsonrpc":"2.0","method":"subtract","params":[1,2]}',
      methods,
    ),
    null,
  );
  assert.equal(
    await handleText('{"jsonrpc":"2.0","method":"arity","id":null}', methods),
    '{"jsonrpc":"2.0","result":0,"id":null}',
  );
  assert.equal(
    await handleText('{"jsonrpc":"2.0","method":"nothing","id":0}', methods),
    '{"jsonrpc":"2.0","result":null,"id":0}',
  );
  assert.equal(
    await handleText('{"jsonrpc":"2.0","method":"self","id":0}', methods),
    '{"jsonrpc":"2.0","result":true,"id":0}',
  );
});

Deno.test("handleText never calls inherited names", async () => {
  for (
    const name of ["toString", "__proto__", "constructor", "hasOwnProperty"]
  ) {
    assert.equal(
      await handleText(
        JSON.stringify({ jsonrpc: "2.0", method: name, id: 1 }),
        methods,
      ),
      `{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found: no method \\"${name}\\" on this server"},"id":1}`,
    );
  }
});

Deno.test("handleText sends a thrown RpcError exactly", async () => {
  assert.equal(
    await handleText('{"jsonrpc":"2.0","method":"refuse","id":1}', methods),
    '{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params: no","data":{"hint":"yes"}},"id":1}',
  );
});

Deno.test("handleText turns other failures into -32603 and reports them", async () => {
  const seen: [unknown, string][] = [];
  const options = {
    onInternalError: (error: unknown, method: string) => {
      seen.push([error, method]);
    },
  };
  assert.equal(
    await handleText(
      '{"jsonrpc":"2.0","method":"crash","id":1}',
      methods,
      options,
    ),
    '{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error: boom"},"id":1}',
  );
  assert.equal(
    await handleText(
      '{"jsonrpc":"2.0","method":"crashAsync","id":2}',
      methods,
      options,
    ),
    '{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error: plain string"},"id":2}',
  );
  // A notification that fails is reported but not answered.
  assert.equal(
    await handleText('{"jsonrpc":"2.0","method":"crash"}', methods, options),
    null,
  );
  assert.deepEqual(seen.map(([, method]) => method), [
    "crash",
    "crashAsync",
    "crash",
  ]);
});

Deno.test("handleText answers -32603 when a result cannot be encoded", async () => {
  for (const method of ["bigint", "cycle"]) {
    const reply = await handleText(
      JSON.stringify({ jsonrpc: "2.0", method, id: 7 }),
      methods,
      quiet,
    );
    const parsed = JSON.parse(reply!);
    assert.equal(parsed.error.code, -32603);
    assert.match(
      parsed.error.message,
      /^Internal error: the result of ".+" cannot be encoded as JSON/,
    );
    assert.equal(parsed.id, 7);
  }
  assert.equal(
    await handleText('{"jsonrpc":"2.0","method":"fn","id":1}', methods, quiet),
    '{"jsonrpc":"2.0","result":null,"id":1}',
  );
  const reply = JSON.parse(
    (await handleText(
      '{"jsonrpc":"2.0","method":"badData","id":1}',
      methods,
      quiet,
    ))!,
  );
  assert.equal(reply.error.code, -32603);
});

Deno.test("handleText keeps batch order whatever the completion order", async () => {
  // Each call waits on a gate the test opens, in an order unlike the
  // batch's (no timers: a loaded machine cannot reorder them).
  const order: number[] = [];
  const gates = new Map<number, () => void>();
  const allStarted = Promise.withResolvers<void>();
  const table: Methods = {
    wait: async (n: number) => {
      await new Promise<void>((resolve) => {
        gates.set(n, resolve);
        if (gates.size === 3) allStarted.resolve();
      });
      order.push(n);
      return n;
    },
  };
  const batch = [30, 1, 15].map((n, i) => ({
    jsonrpc: "2.0",
    method: "wait",
    params: [n],
    id: i,
  }));
  const answer = handleText(JSON.stringify(batch), table);
  await allStarted.promise;
  for (const n of [1, 15, 30]) {
    gates.get(n)!();
    // Let that call finish before the next gate opens.
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  assert.equal(
    await answer,
    '[{"jsonrpc":"2.0","result":30,"id":0},{"jsonrpc":"2.0","result":1,"id":1},{"jsonrpc":"2.0","result":15,"id":2}]',
  );
  assert.deepEqual(order, [1, 15, 30]);
});

Deno.test("handleText answers invalid requests with their id when it is valid", async () => {
  assert.equal(
    await handleText('{"jsonrpc":"2.0","method":7,"id":"x"}', methods),
    '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: \\"method\\" must be a string"},"id":"x"}',
  );
  assert.equal(
    await handleText('{"jsonrpc":"1.0","method":"subtract","id":{}}', methods),
    '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: \\"jsonrpc\\" must be exactly \\"2.0\\""},"id":null}',
  );
  assert.equal(
    await handleText("null", methods),
    '{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: a request must be a JSON object"},"id":null}',
  );
  assert.equal(
    await handleText("[[]]", methods),
    '[{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: a request must be a JSON object"},"id":null}]',
  );
});
