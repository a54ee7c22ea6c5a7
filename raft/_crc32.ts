/**
 * CRC-32 checksum (IEEE 802.3, reflected polynomial `0xEDB88320`), the same
 * checksum as zlib's `crc32`, gzip, PNG and Ethernet. The write-ahead log
 * stores one per record to detect torn and corrupted writes.
 *
 * @module
 */

/** Reflected form of the IEEE 802.3 generator polynomial 0x04C11DB7. */
const POLYNOMIAL = 0xedb88320;

/** 256-entry lookup table: the CRC of every single byte value. */
const TABLE: Uint32Array = makeTable();

function makeTable(): Uint32Array {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) {
      c = c & 1 ? POLYNOMIAL ^ (c >>> 1) : c >>> 1;
    }
    table[n] = c >>> 0;
  }
  return table;
}

/**
 * Computes the CRC-32 (IEEE 802.3) of `bytes`.
 *
 * To checksum data that arrives in pieces, pass the previous result as
 * `seed`: `crc32(b, crc32(a))` equals `crc32(a + b)`.
 *
 * @param bytes The data to checksum (any length, including 0).
 * @param seed The CRC of the data that precedes `bytes`, an unsigned 32-bit
 *   integer; 0 (the default) starts a new checksum.
 * @returns The checksum as an unsigned 32-bit integer (0 ..= 0xFFFFFFFF).
 *   The empty input with seed 0 gives 0.
 * @throws {RangeError} If `seed` is not an integer in 0 ..= 0xFFFFFFFF.
 *
 * @example Checksum a string, in one go or in pieces
 * ```ts
 * import { crc32 } from "./_crc32.ts";
 * const bytes = new TextEncoder().encode("123456789");
 * console.assert(crc32(bytes) === 0xCBF43926);
 * console.assert(crc32(bytes.subarray(4), crc32(bytes.subarray(0, 4))) === 0xCBF43926);
 * ```
 */
export function crc32(bytes: Uint8Array, seed = 0): number {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new RangeError(
      `crc32: seed must be an unsigned 32-bit integer (a previous crc32 result), got ${seed}`,
    );
  }
  let c = ~seed;
  for (let i = 0; i < bytes.length; i++) {
    c = TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  }
  return ~c >>> 0;
}
