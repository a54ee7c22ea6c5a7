/**
 * The base64 of snapshot chunks: the runtime's native codec and the
 * portable one give the same text and the same bytes back.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  base64ToBytes,
  base64ToBytesPortable,
  bytesToBase64,
  bytesToBase64Portable,
} from "./snapshot_file.ts";

Deno.test("snapshot chunk base64: native and portable codecs agree both ways, over every length mod 3 and past the portable codec's 32 KiB slices", () => {
  for (
    const length of [
      0,
      1,
      2,
      3,
      4,
      5,
      0x8000 - 1,
      0x8000,
      0x8000 + 1,
      (1 << 20) + 2,
    ]
  ) {
    const bytes = new Uint8Array(length);
    for (let i = 0; i < length; i += 65536) {
      crypto.getRandomValues(bytes.subarray(i, i + 65536));
    }
    const text = bytesToBase64(bytes);
    assert.equal(text, bytesToBase64Portable(bytes), `length ${length}`);
    assert.equal(text.length, 4 * Math.ceil(length / 3));
    assert.deepEqual(base64ToBytes(text), bytes, `length ${length}`);
    assert.deepEqual(base64ToBytesPortable(text), bytes, `length ${length}`);
  }
  assert.equal(bytesToBase64(new Uint8Array([0xfb, 0xff, 0x00])), "+/8A");
});

Deno.test("snapshot chunk base64: text that is not base64 throws in both codecs", () => {
  assert.throws(() => base64ToBytes("not base64!"));
  assert.throws(() => base64ToBytesPortable("not base64!"));
});
