import assert from "node:assert/strict";
import fc from "fast-check";
import { ndjsonCodec } from "./_ndjson_codec.ts";

/** What the request text must equal: `JSON.stringify` of the request object. */
function objectText(
  method: string,
  params: object | undefined,
  id: number | undefined,
  timeoutMs: number | undefined,
): string {
  const request: Record<string, unknown> = { jsonrpc: "2.0", method };
  if (params !== undefined) request.params = params;
  if (id !== undefined) request.id = id;
  if (timeoutMs !== undefined) request.timeoutMs = timeoutMs;
  return JSON.stringify(request);
}

const request = ndjsonCodec.request!;

Deno.test("the NDJSON request text is JSON.stringify of the request object, for any params", () => {
  fc.assert(
    fc.property(
      fc.string(),
      fc.option(
        fc.oneof(
          fc.array(fc.jsonValue()),
          fc.dictionary(fc.string(), fc.jsonValue()),
        ),
        { nil: undefined },
      ),
      fc.option(fc.maxSafeNat(), { nil: undefined }),
      fc.option(fc.integer({ min: 1, max: 2_147_483_647 }), { nil: undefined }),
      (method, params, id, timeoutMs) => {
        // Twice: the second time with the method's text remembered.
        for (let i = 0; i < 2; i++) {
          assert.equal(
            request(method, params, id, timeoutMs),
            objectText(method, params, id, timeoutMs),
          );
        }
      },
    ),
  );
});

Deno.test("the NDJSON request text calls toJSON as the object would, and fails with the object's error", () => {
  const keys: string[] = [];
  const params = {
    toJSON(key: string) {
      keys.push(key);
      return key === "params" ? { seen: key } : undefined;
    },
  };
  assert.equal(
    request("m", params, 1, undefined),
    '{"jsonrpc":"2.0","method":"m","params":{"seen":"params"},"id":1}',
  );
  assert.deepEqual(keys, ["params"]);
  const date = new Date(0);
  assert.equal(request("m", [date], 2, 5), objectText("m", [date], 2, 5));
  const nested = { when: date, text: "é\u2028😀", none: undefined };
  assert.equal(request("é", nested, 3, 7), objectText("é", nested, 3, 7));
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  let expected: unknown;
  try {
    objectText("m", cycle, 1, undefined);
  } catch (error) {
    expected = error;
  }
  assert.throws(
    () => request("m", cycle, 1, undefined),
    (error: Error) =>
      error instanceof TypeError &&
      error.message === (expected as Error).message,
  );
  assert.throws(() => request("m", [1n], 1, undefined), TypeError);
});
