import assert from "node:assert/strict";
import { xxhash32 } from "./_xxhash32.ts";

const utf8 = (text: string) => new TextEncoder().encode(text);

// Expected values from the reference implementation (libxxhash 0.8.1's
// XXH32 and xxh32sum).
Deno.test("xxhash32 matches the reference implementation with seed 0", () => {
  const vectors: [string, number][] = [
    ["", 0x02CC5D05],
    ["a", 0x550D7456],
    ["abc", 0x32D153FF],
    ["123456789", 0x937BAD67],
    ["hello-1", 0x23D7DEAA],
    ["0123456789abcdef", 0xC2C45B69], // one 16-byte stripe
    ["Nobody inspects the spammish repetition", 0xE2293B2F], // 39 bytes
    ["user:42 ünïcødé ✓", 0xC2B0AC83], // UTF-8 bytes
  ];
  for (const [text, expected] of vectors) {
    assert.equal(xxhash32(utf8(text)), expected, JSON.stringify(text));
  }
});

Deno.test("xxhash32 matches the reference implementation with seeds", () => {
  const vectors: [string, number, number][] = [
    ["", 1, 0x0B2CB792],
    ["abc", 0x9E3779B1, 0xA1AE7709],
    ["hello-1", 42, 0x39643522],
    ["0123456789abcdef0123456789abcdef", 0x12345678, 0xE895853C],
    ["Nobody inspects the spammish repetition", 0xFFFFFFFF, 0xE26FE6CD],
  ];
  for (const [text, seed, expected] of vectors) {
    assert.equal(xxhash32(utf8(text), seed), expected, JSON.stringify(text));
  }
});

Deno.test("xxhash32 gives unsigned 32-bit numbers", () => {
  for (let i = 0; i < 1000; i++) {
    const hash = xxhash32(utf8(`key-${i}`), i * 2654435761);
    assert.ok(Number.isInteger(hash) && hash >= 0 && hash < 2 ** 32);
  }
});

Deno.test("xxhash32 of a length hashes only the first bytes", () => {
  const bytes = utf8("abcdef");
  assert.equal(xxhash32(bytes, 0, 3), 0x32D153FF);
  assert.equal(xxhash32(bytes, 7, 0), xxhash32(new Uint8Array(), 7));
  const long = utf8("Nobody inspects the spammish repetition, twice over");
  assert.equal(xxhash32(long, 0, 39), 0xE2293B2F);
});
