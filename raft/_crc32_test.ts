import assert from "node:assert/strict";
import { crc32, crc32c } from "./_crc32.ts";

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

Deno.test("crc32c matches the RFC 3720 B.4 vectors and the check value", () => {
  // RFC 3720 appendix B.4: 32 bytes of zeros, of 0xFF, ascending, descending.
  assert.equal(crc32c(new Uint8Array(32)), 0x8a9136aa);
  assert.equal(crc32c(new Uint8Array(32).fill(0xff)), 0x62a8ab43);
  const up = Uint8Array.from({ length: 32 }, (_, i) => i);
  assert.equal(crc32c(up), 0x46dd794e);
  const down = Uint8Array.from({ length: 32 }, (_, i) => 31 - i);
  assert.equal(crc32c(down), 0x113fdb5c);
  // B.4's iSCSI read command PDU (48 bytes).
  // deno-fmt-ignore
  const pdu = Uint8Array.from([
    0x01, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x14, 0, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0x14, 0, 0, 0, 0x18,
    0x28, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0,
  ]);
  assert.equal(crc32c(pdu), 0xd9963a56);
  assert.equal(crc32c(text("123456789")), 0xe3069283);
  assert.equal(crc32c(new Uint8Array(0)), 0);
});

Deno.test("crc32c agrees with a bitwise reference, continues across pieces, checks its seed", () => {
  const reference = (bytes: Uint8Array): number => {
    let c = 0xffffffff;
    for (const b of bytes) {
      c ^= b;
      for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0x82f63b78 & -(c & 1));
    }
    return (c ^ 0xffffffff) >>> 0;
  };
  for (let len = 0; len < 300; len += 7) {
    const bytes = crypto.getRandomValues(new Uint8Array(len));
    assert.equal(crc32c(bytes), reference(bytes));
    const cut = len >> 1;
    assert.equal(
      crc32c(bytes.subarray(cut), crc32c(bytes.subarray(0, cut))),
      reference(bytes),
    );
  }
  // Long inputs take the slicing-by-8 path, from any offset and with any tail.
  for (const [offset, len] of [[0, 64], [3, 71], [1, 4099], [5, 65_501]]) {
    const bytes = crypto.getRandomValues(new Uint8Array(offset + len))
      .subarray(offset);
    assert.equal(
      crc32c(bytes),
      reference(bytes),
      `offset ${offset} length ${len}`,
    );
    assert.equal(crc32(bytes), crc32Reference(bytes));
  }
  for (const seed of [-1, 0x100000000, 1.5, NaN]) {
    assert.throws(() => crc32c(new Uint8Array(1), seed), RangeError);
  }
});
