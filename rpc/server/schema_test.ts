import assert from "node:assert/strict";
import { z } from "zod";
import * as v from "valibot";
import { handleText, type Methods } from "./dispatcher.ts";
import { INVALID_PARAMS, RpcError } from "../errors.ts";
import { type CallContext, method, withContext } from "./method.ts";
import { valibotBasics, zodBasics } from "../../testing/schemas.ts";
import { serve } from "../../adapter/deno/serve.ts";
import type { StandardSchemaV1 } from "./standard_schema.ts";
import { RawClient } from "../../testing/rpc.ts";
import { within } from "../../testing/time.ts";

/** Calls `method` with `params` (JSON text) through handleText, id 1. */
function call(
  methods: Methods,
  name: string,
  params?: string,
  options = {},
): Promise<string | null> {
  return handleText(
    `{"jsonrpc":"2.0","method":"${name}"${
      params === undefined ? "" : `,"params":${params}`
    },"id":1}`,
    methods,
    options,
  );
}

function invalid(message: string, issues: unknown[]): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    error: {
      code: -32602,
      message: `Invalid params: ${message}`,
      data: { issues },
    },
    id: 1,
  });
}

const result = (value: unknown) =>
  JSON.stringify({ jsonrpc: "2.0", result: value, id: 1 });

// ------------------------------------------------------------------ zod

const zodMethods = {
  ...zodBasics,
  nested: method(
    z.tuple([z.object({ user: z.object({ email: z.string() }) })]),
    ({ user }) => user.email,
  ),
  unique: method(
    z.tuple([
      z.string().refine(
        (s) => Promise.resolve(s !== "taken"),
        "that name is taken",
      ),
    ]),
    (name) => name,
  ),
  five: method(
    z.tuple([z.number(), z.number(), z.number(), z.number(), z.number()]),
    (...numbers) => numbers.length,
  ),
  odd: method(
    {
      named: z.object({
        "a b": z.string(),
        items: z.array(z.object({ id: z.number() })),
      }),
    },
    () => "ok",
  ),
};

Deno.test("zod, positional: greet(42) is answered -32602 with the path, greet('Ada') runs", async () => {
  const message = "Invalid input: expected string, received number";
  assert.equal(
    await call(zodMethods, "greet", "[42]"),
    invalid(`[0]: ${message}`, [{ path: [0], message }]),
  );
  assert.equal(
    await call(zodMethods, "greet", '["Ada"]'),
    result("Hello, Ada!"),
  );
  assert.equal(await call(zodMethods, "add", "[1,2]"), result(3));
  // Missing params are the empty argument list; named params are one argument.
  assert.equal(
    await call(zodMethods, "greet"),
    invalid("Too small: expected array to have >=1 items", [{
      path: [],
      message: "Too small: expected array to have >=1 items",
    }]),
  );
  const object = "Invalid input: expected string, received object";
  assert.equal(
    await call(zodMethods, "greet", '{"name":"Ada"}'),
    invalid(
      `[0]: ${object} (the method takes positional params, an array, and named params, an object, were sent)`,
      [{ path: [0], message: object }],
    ),
  );
});

Deno.test("zod, named: paths start with the member; the stub's one-object array is accepted", async () => {
  const message = "Invalid input: expected string, received number";
  assert.equal(
    await call(zodMethods, "signUp", '{"name":42}'),
    invalid(`name: ${message}`, [{ path: ["name"], message }]),
  );
  assert.equal(
    await call(zodMethods, "signUp", '{"name":"Ada","age":36}'),
    result("Ada (36)"),
  );
  assert.equal(
    await call(zodMethods, "signUp", '[{"name":"Ada"}]'),
    result("Ada (?)"),
  );
  const missing = "Invalid input: expected string, received undefined";
  for (const params of [undefined, "[]", "{}"]) {
    assert.equal(
      await call(zodMethods, "signUp", params),
      invalid(`name: ${missing}`, [{ path: ["name"], message: missing }]),
    );
  }
  const array = "Invalid input: expected object, received array";
  assert.equal(
    await call(zodMethods, "signUp", '["Ada",36]'),
    invalid(array, [{ path: [], message: array }]),
  );
});

Deno.test("zod: the handler gets the transformed value; nested and odd paths; async refinements", async () => {
  assert.equal(await call(zodMethods, "length", '["four"]'), result(40));
  const number = "Invalid input: expected string, received number";
  assert.equal(
    await call(zodMethods, "nested", '[{"user":{"email":5}}]'),
    invalid(`[0].user.email: ${number}`, [{
      path: [0, "user", "email"],
      message: number,
    }]),
  );
  const notNumber = "Invalid input: expected number, received string";
  assert.equal(
    await call(
      zodMethods,
      "odd",
      '{"a b":1,"items":[{"id":1},{"id":"x"}]}',
    ),
    invalid(`["a b"]: ${number}; items[1].id: ${notNumber}`, [
      { path: ["a b"], message: number },
      { path: ["items", 1, "id"], message: notNumber },
    ]),
  );
  assert.equal(
    await call(zodMethods, "unique", '["taken"]'),
    invalid("[0]: that name is taken", [{
      path: [0],
      message: "that name is taken",
    }]),
  );
  assert.equal(await call(zodMethods, "unique", '["free"]'), result("free"));
});

Deno.test("the message lists 3 issues and counts the rest; data has them all", async () => {
  const message = "Invalid input: expected number, received string";
  assert.equal(
    await call(zodMethods, "five", '["a","b","c","d","e"]'),
    invalid(
      `[0]: ${message}; [1]: ${message}; [2]: ${message}; and 2 more`,
      [0, 1, 2, 3, 4].map((i) => ({ path: [i], message })),
    ),
  );
});

// -------------------------------------------------------------- valibot

const valibotMethods = {
  ...valibotBasics,
  trimmed: method(
    v.tuple([v.pipe(v.string(), v.trim(), v.minLength(1, "empty name"))]),
    (name) => `[${name}]`,
  ),
  unique: method(
    v.tupleAsync([
      v.pipeAsync(
        v.string(),
        v.checkAsync(
          (s) => Promise.resolve(s !== "taken"),
          "that name is taken",
        ),
      ),
    ]),
    (name) => name,
  ),
};

Deno.test("valibot, positional: messages and paths of its issues", async () => {
  const message = "Invalid type: Expected string but received 42";
  assert.equal(
    await call(valibotMethods, "greet", "[42]"),
    invalid(`[0]: ${message}`, [{ path: [0], message }]),
  );
  assert.equal(
    await call(valibotMethods, "greet", '["Ada"]'),
    result("Hello, Ada!"),
  );
  assert.equal(
    await call(valibotMethods, "trimmed", '["  Ada "]'),
    result("[Ada]"),
  );
  assert.equal(
    await call(valibotMethods, "trimmed", '["   "]'),
    invalid("[0]: empty name", [{ path: [0], message: "empty name" }]),
  );
  assert.equal(
    await call(valibotMethods, "unique", '["taken"]'),
    invalid("[0]: that name is taken", [{
      path: [0],
      message: "that name is taken",
    }]),
  );
});

Deno.test("valibot, named: paths start with the member", async () => {
  const message = "Invalid type: Expected string but received 42";
  assert.equal(
    await call(valibotMethods, "signUp", '{"name":42}'),
    invalid(`name: ${message}`, [{ path: ["name"], message }]),
  );
  const missing = 'Invalid key: Expected "name" but received undefined';
  assert.equal(
    await call(valibotMethods, "signUp"),
    invalid(`name: ${missing}`, [{ path: ["name"], message: missing }]),
  );
  assert.equal(
    await call(valibotMethods, "signUp", '{"name":"Ada","age":36}'),
    result("Ada (36)"),
  );
});

// ----------------------------------------------------------------- more

Deno.test("validation over TCP: the exact wire text", async () => {
  const server = serve({ methods: zodMethods });
  const client = await RawClient.connect(server.port);
  try {
    await client.send(
      '{"jsonrpc":"2.0","method":"greet","params":[42],"id":3,"timeoutMs":1000}',
    );
    assert.equal(
      await client.line(),
      '{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params: [0]: Invalid input: expected string, received number","data":{"issues":[{"path":[0],"message":"Invalid input: expected string, received number"}]}},"id":3}',
    );
    await client.send(
      '{"jsonrpc":"2.0","method":"signUp","params":{"name":1},"id":4}',
    );
    assert.equal(
      await client.line(),
      '{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params: name: Invalid input: expected string, received number","data":{"issues":[{"path":["name"],"message":"Invalid input: expected string, received number"}]}},"id":4}',
    );
  } finally {
    client.close();
    await within(server.close(), 5_000, "server.close()");
  }
});

Deno.test("method() with a withContext handler: the context first, then the validated params", async () => {
  const seen: unknown[] = [];
  const methods = {
    double: method(
      z.tuple([z.coerce.number()]),
      withContext((context: CallContext, n: number) => {
        seen.push([context.id, context.deadline !== null, typeof n]);
        return n * 2;
      }),
    ),
  };
  assert.equal(
    await handleText(
      '{"jsonrpc":"2.0","method":"double","params":["21"],"id":"x","timeoutMs":500}',
      methods,
    ),
    '{"jsonrpc":"2.0","result":42,"id":"x"}',
  );
  assert.deepEqual(seen, [["x", true, "number"]]);
  // Called directly: validated, with a context that never aborts.
  assert.equal(await methods.double(4), 8);
  assert.deepEqual(seen[1], [null, false, "number"]);
});

Deno.test("declared methods called directly validate and transform too", async () => {
  assert.equal(await zodMethods.greet("Ada"), "Hello, Ada!");
  assert.equal(await zodMethods.length("four"), 40);
  assert.equal(await zodMethods.signUp({ name: "Ada" }), "Ada (?)");
  const error = await zodMethods.greet(42 as unknown as string).catch((e) => e);
  assert.ok(error instanceof RpcError);
  assert.equal(error.code, INVALID_PARAMS);
  assert.equal(
    error.message,
    "Invalid params: [0]: Invalid input: expected string, received number",
  );
});

Deno.test("a schema whose validate throws is an internal error, reported", async () => {
  const broken: StandardSchemaV1<[string]> = {
    "~standard": {
      version: 1,
      vendor: "test",
      validate: () => {
        throw new Error("schema bug");
      },
    },
  };
  const reported: unknown[] = [];
  assert.equal(
    await call({ m: method(broken, (s) => s) }, "m", '["x"]', {
      onInternalError: (error: unknown) => reported.push(error),
    }),
    '{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error: schema bug"},"id":1}',
  );
  assert.equal(reported.length, 1);
  // Symbols and { key } segments in paths; an issue list that is empty.
  const odd: StandardSchemaV1<unknown[]> = {
    "~standard": {
      version: 1,
      vendor: "test",
      validate: (value) =>
        (value as unknown[]).length === 0 ? { issues: [] } : {
          issues: [{
            message: "odd",
            path: [{ key: 0 }, Symbol("tag"), { key: "x" }],
          }],
        },
    },
  };
  assert.equal(
    await call({ m: method(odd, () => 1) }, "m", "[1]"),
    invalid("[0].tag.x: odd", [{ path: [0, "tag", "x"], message: "odd" }]),
  );
  assert.equal(
    await call({ m: method(odd, () => 1) }, "m", "[]"),
    invalid("the params do not match the method's schema", []),
  );
});

Deno.test("method() refuses what is not a schema, and a second schema", () => {
  const schema = z.tuple([z.string()]);
  const bad: unknown[] = [
    null,
    {},
    { params: {} },
    { params: schema, named: schema },
    z.string,
  ];
  for (const declaration of bad) {
    assert.throws(
      () => method(declaration as typeof schema, () => 1),
      TypeError,
    );
  }
  assert.throws(
    () => method(schema, "nope" as unknown as () => 1),
    /takes the handler as its second argument/,
  );
  assert.throws(
    () => method(schema, method(schema, (s) => s)),
    /already declared with a schema/,
  );
  assert.throws(
    () => withContext(42 as unknown as () => 1),
    /withContext takes a function/,
  );
});

Deno.test("named params sent to a positional schema: the error says the method takes an array", async () => {
  const text = await call(zodMethods, "add", `{"a":2,"b":3}`);
  const { error } = JSON.parse(text!);
  assert.equal(error.code, INVALID_PARAMS);
  assert.match(
    error.message,
    /^Invalid params: .+ \(the method takes positional params, an array, and named params, an object, were sent\)$/,
  );
  // Positional params that fail get no such hint.
  const wrong = JSON.parse((await call(zodMethods, "add", `[1, "x"]`))!);
  assert.doesNotMatch(wrong.error.message, /named params/);
});
