import assert from "node:assert/strict";
import { crc32 } from "./_crc32.ts";

const text = (s: string) => new TextEncoder().encode(s);

/** Bit-at-a-time reference implementation, independent of the table. */
function crc32Reference(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return (c ^ 0xffffffff) >>> 0;
}

Deno.test("crc32 matches the standard check value and known vectors", () => {
  assert.equal(crc32(text("123456789")), 0xcbf43926);
  assert.equal(crc32(new Uint8Array(0)), 0);
  assert.equal(crc32(text("a")), 0xe8b7be43);
  assert.equal(
    crc32(text("The quick brown fox jumps over the lazy dog")),
    0x414fa339,
  );
  // 32 zero bytes and 32 0xFF bytes (values from Python's zlib.crc32).
  assert.equal(crc32(new Uint8Array(32)), 0x190a55ad);
  assert.equal(crc32(new Uint8Array(32).fill(0xff)), 0xff6cab0b);
});

Deno.test("crc32 result is unsigned", () => {
  for (const s of ["123456789", "a", "hello world", "\u00ff\u00fe"]) {
    const c = crc32(text(s));
    assert.ok(c >= 0 && c <= 0xffffffff && Number.isInteger(c));
  }
});

Deno.test("crc32 agrees with a bitwise reference on random data", () => {
  for (let len = 0; len < 300; len += 7) {
    const bytes = crypto.getRandomValues(new Uint8Array(len));
    assert.equal(crc32(bytes), crc32Reference(bytes));
  }
});

Deno.test("crc32 seed continues a checksum across pieces", () => {
  const bytes = crypto.getRandomValues(new Uint8Array(1000));
  const whole = crc32(bytes);
  for (const cut of [0, 1, 4, 500, 999, 1000]) {
    assert.equal(
      crc32(bytes.subarray(cut), crc32(bytes.subarray(0, cut))),
      whole,
    );
  }
  assert.equal(crc32(new Uint8Array(0), whole), whole);
});

Deno.test("crc32 rejects a seed that is not an unsigned 32-bit integer", () => {
  for (const seed of [-1, 0x100000000, 1.5, NaN]) {
    assert.throws(() => crc32(new Uint8Array(1), seed), RangeError);
  }
});
