/**
 * xxHash32 (XXH32) of bytes, for rendezvous hashing: Yann Collet's
 * xxHash, 32-bit variant, as its specification describes it
 * (github.com/Cyan4973/xxHash, doc/xxhash_spec.md, "XXH32 Algorithm
 * Description"). Fast in JavaScript (32-bit multiplies with Math.imul),
 * deterministic across runtimes, and with a full avalanche, so that
 * nearby inputs and nearby seeds give unrelated outputs. Not part of the
 * public API.
 *
 * @module
 */

const PRIME1 = 0x9E3779B1;
const PRIME2 = 0x85EBCA77;
const PRIME3 = 0xC2B2AE3D;
const PRIME4 = 0x27D4EB2F;
const PRIME5 = 0x165667B1;

/**
 * XXH32 of `bytes` (its first `length` bytes, all by default) with `seed`
 * (an unsigned 32-bit number), as an unsigned 32-bit number: the reference
 * implementation's `XXH32(bytes, length, seed)`, e.g. 0x32D153FF for "abc"
 * and seed 0.
 */
export function xxhash32(
  bytes: Uint8Array,
  seed = 0,
  length = bytes.length,
): number {
  let offset = 0;
  let acc: number;
  if (length >= 16) {
    let v1 = (seed + PRIME1 + PRIME2) | 0;
    let v2 = (seed + PRIME2) | 0;
    let v3 = seed | 0;
    let v4 = (seed - PRIME1) | 0;
    for (; offset <= length - 16; offset += 16) {
      v1 = round(v1, lane(bytes, offset));
      v2 = round(v2, lane(bytes, offset + 4));
      v3 = round(v3, lane(bytes, offset + 8));
      v4 = round(v4, lane(bytes, offset + 12));
    }
    acc = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) | 0;
  } else {
    acc = (seed + PRIME5) | 0;
  }
  acc = (acc + length) | 0;
  for (; offset <= length - 4; offset += 4) {
    acc = Math.imul(
      rotl((acc + Math.imul(lane(bytes, offset), PRIME3)) | 0, 17),
      PRIME4,
    );
  }
  for (; offset < length; offset++) {
    acc = Math.imul(
      rotl((acc + Math.imul(bytes[offset], PRIME5)) | 0, 11),
      PRIME1,
    );
  }
  acc ^= acc >>> 15;
  acc = Math.imul(acc, PRIME2);
  acc ^= acc >>> 13;
  acc = Math.imul(acc, PRIME3);
  acc ^= acc >>> 16;
  return acc >>> 0;
}

function round(acc: number, input: number): number {
  return Math.imul(rotl((acc + Math.imul(input, PRIME2)) | 0, 13), PRIME1);
}

/** The little-endian 32-bit word at `offset`. */
function lane(bytes: Uint8Array, offset: number): number {
  return bytes[offset] | (bytes[offset + 1] << 8) |
    (bytes[offset + 2] << 16) | (bytes[offset + 3] << 24);
}

function rotl(value: number, bits: number): number {
  return (value << bits) | (value >>> (32 - bits));
}
