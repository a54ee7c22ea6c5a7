import assert from "node:assert/strict";
import { LengthPrefixedDecoder } from "./_length_prefixed.ts";

Deno.test("LengthPrefixedDecoder says when a preamble, length or frame has begun and is not whole", () => {
  const decoder = new LengthPrefixedDecoder(16, new Uint8Array([9, 9]));
  assert.equal(decoder.partial, false);
  decoder.push(new Uint8Array([9]));
  assert.equal(decoder.partial, true, "half a preamble");
  decoder.push(new Uint8Array([9]));
  assert.equal(decoder.partial, false, "the preamble alone");
  decoder.push(new Uint8Array([0, 0]));
  assert.equal(decoder.partial, true, "half a length");
  decoder.push(new Uint8Array([0, 2, 7]));
  assert.equal(decoder.partial, true, "half a frame");
  const found = decoder.push(new Uint8Array([8]));
  assert.deepEqual(found, [{ kind: "frame", payload: new Uint8Array([7, 8]) }]);
  assert.equal(decoder.partial, false);
  decoder.push(new Uint8Array([0, 0, 1, 0])); // 256 > 16: stops
  assert.equal(decoder.partial, false, "stopped");
});
