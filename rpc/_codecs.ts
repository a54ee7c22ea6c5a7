/**
 * The codecs by name, and the one a server hears (private: not part of the
 * public API).
 *
 * @module
 */

import type { Codec } from "./codec.ts";
import type { FrameCodec } from "./_frame_codec.ts";
import { ndjsonCodec } from "./_ndjson_codec.ts";
import { cborCodec } from "./_cbor_codec.ts";

/**
 * The codec called `name` (`"json"` when undefined).
 *
 * @throws {RangeError} for any other name.
 */
export function codecNamed(name: Codec | undefined): FrameCodec {
  if (name === undefined || name === "json") return ndjsonCodec;
  if (name === "cbor") return cborCodec;
  throw new RangeError(
    `codec must be "json" or "cbor", got ${JSON.stringify(name)}`,
  );
}

/**
 * The codec a client speaks, from the first byte it sent: CBOR's preamble
 * starts with 0xd9, which no JSON text can start with (it would be a UTF-8
 * lead byte of an Arabic letter); anything else is NDJSON.
 */
export function codecOfFirstByte(byte: number): FrameCodec {
  return byte === cborCodec.preamble[0] ? cborCodec : ndjsonCodec;
}
