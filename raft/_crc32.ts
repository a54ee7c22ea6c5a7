/**
 * CRC-32 checksums: {@link crc32} (IEEE 802.3, reflected polynomial
 * `0xEDB88320`), the same checksum as zlib's `crc32`, gzip, PNG and Ethernet,
 * which the old single-file write-ahead log used; and {@link crc32c}
 * (Castagnoli, reflected polynomial `0x82F63B78`, RFC 3720 §12.1 / B.4), which
 * the segmented write-ahead log and the snapshot files store, as etcd and
 * iSCSI do (better error detection for the same cost).
 *
 * @module
 */

/** Reflected form of the IEEE 802.3 generator polynomial 0x04C11DB7. */
const POLYNOMIAL = 0xedb88320;

/** Reflected form of the Castagnoli polynomial 0x1EDC6F41 (RFC 3720). */
const POLYNOMIAL_C = 0x82f63b78;

/** 256-entry lookup tables: the CRC of every single byte value. */
const TABLE: Uint32Array = makeTable(POLYNOMIAL);
const TABLE_C: Uint32Array = makeTable(POLYNOMIAL_C);

function makeTable(polynomial: number): Uint32Array {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) {
      c = c & 1 ? polynomial ^ (c >>> 1) : c >>> 1;
    }
    table[n] = c >>> 0;
  }
  return table;
}

/** The table-driven CRC loop shared by both checksums. */
/**
 * Eight tables for slicing-by-8 (Kounavis and Berry, "A Systematic
 * Approach to Building High Performance Software-based CRC Generators",
 * 2005): table k maps a byte to its CRC after k more zero bytes, so eight
 * input bytes take eight lookups and one step instead of eight steps.
 */
function makeSlices(table: Uint32Array): Uint32Array[] {
  const slices = [table];
  for (let k = 1; k < 8; k++) {
    const previous = slices[k - 1];
    const next = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      next[n] = (previous[n] >>> 8) ^ table[previous[n] & 0xff];
    }
    slices.push(next);
  }
  return slices;
}

const SLICES = new Map<Uint32Array, Uint32Array[]>();

function update(
  table: Uint32Array,
  name: string,
  bytes: Uint8Array,
  seed: number,
): number {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new RangeError(
      `${name}: seed must be an unsigned 32-bit integer (a previous ${name} result), got ${seed}`,
    );
  }
  let c = ~seed;
  let i = 0;
  const end = bytes.length;
  if (end >= 64) {
    let slices = SLICES.get(table);
    if (slices === undefined) SLICES.set(table, slices = makeSlices(table));
    const [t0, t1, t2, t3, t4, t5, t6, t7] = slices;
    for (const last = end - 8; i <= last; i += 8) {
      const low = c ^
        (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) |
          (bytes[i + 3] << 24));
      c = t7[low & 0xff] ^ t6[(low >>> 8) & 0xff] ^ t5[(low >>> 16) & 0xff] ^
        t4[low >>> 24] ^ t3[bytes[i + 4]] ^ t2[bytes[i + 5]] ^
        t1[bytes[i + 6]] ^ t0[bytes[i + 7]];
    }
  }
  for (; i < end; i++) {
    c = table[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  }
  return ~c >>> 0;
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
 * import assert from "node:assert/strict";
 * import { crc32 } from "./_crc32.ts";
 * const bytes = new TextEncoder().encode("123456789");
 * assert.equal(crc32(bytes), 0xCBF43926);
 * assert.equal(crc32(bytes.subarray(4), crc32(bytes.subarray(0, 4))), 0xCBF43926);
 * ```
 */
export function crc32(bytes: Uint8Array, seed = 0): number {
  return update(TABLE, "crc32", bytes, seed);
}

/**
 * Computes the CRC-32C (Castagnoli; RFC 3720 §12.1, check values in B.4) of
 * `bytes`: initial value and final XOR `0xFFFFFFFF`, reflected.
 *
 * To checksum data that arrives in pieces, pass the previous result as
 * `seed`: `crc32c(b, crc32c(a))` equals `crc32c(a + b)`.
 *
 * @param bytes The data to checksum (any length, including 0).
 * @param seed The CRC-32C of the data that precedes `bytes`, an unsigned
 *   32-bit integer; 0 (the default) starts a new checksum.
 * @returns The checksum as an unsigned 32-bit integer (0 ..= 0xFFFFFFFF).
 *   The empty input with seed 0 gives 0.
 * @throws {RangeError} If `seed` is not an integer in 0 ..= 0xFFFFFFFF.
 *
 * @example The standard check value, in one go or in pieces
 * ```ts
 * import assert from "node:assert/strict";
 * import { crc32c } from "./_crc32.ts";
 * const bytes = new TextEncoder().encode("123456789");
 * assert.equal(crc32c(bytes), 0xE3069283);
 * assert.equal(crc32c(bytes.subarray(4), crc32c(bytes.subarray(0, 4))), 0xE3069283);
 * ```
 */
export function crc32c(bytes: Uint8Array, seed = 0): number {
  return update(TABLE_C, "crc32c", bytes, seed);
}
