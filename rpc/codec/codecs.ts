/**
 * The codecs by name, and the one a server hears (private: not part of the
 * public API). NDJSON is built in; CBOR is installed by `rpc/codec/cbor.ts`
 * (the `@rafter/rpc/cbor` entry), which only the registry imports, so that
 * no other entry reaches an npm package (cbor-x).
 *
 * @module
 */

import type { Codec } from "./codec.ts";
import type { FrameCodec, FrameDecoder, InboundFrame } from "./_frame_codec.ts";
import { ndjsonCodec } from "./_ndjson_codec.ts";
import { PARSE_ERROR, RpcError } from "../errors.ts";
import { Refusal } from "../framing/_refusal.ts";

/** The first byte of CBOR's preamble, `d9 d9 f7`. */
const CBOR_FIRST_BYTE = 0xd9;

let cbor: FrameCodec | undefined;

/** Makes `codec` (CBOR) available to every connection of this process. */
export function installCodec(codec: FrameCodec): void {
  if (codec.name === "cbor") cbor = codec;
}

/**
 * The codec called `name` (`"json"` when undefined).
 *
 * @throws {RangeError} for another name, or `"cbor"` when it is not loaded.
 */
export function codecNamed(name: Codec | undefined): FrameCodec {
  if (name === undefined || name === "json") return ndjsonCodec;
  if (name === "cbor") {
    if (cbor !== undefined) return cbor;
    throw new RangeError(
      'the CBOR codec is not loaded: import "@rafter/rpc/cbor" once in this process (it loads cbor-x; no other entry does, so that projects without CBOR install no npm package)',
    );
  }
  throw new RangeError(
    `codec must be "json" or "cbor", got ${JSON.stringify(name)}`,
  );
}

/**
 * The codec a client speaks, from the first byte it sent: CBOR's preamble
 * starts with 0xd9, which no JSON text can start with (it would be a UTF-8
 * lead byte of an Arabic letter); anything else is NDJSON. Without the
 * CBOR codec loaded, everything is NDJSON.
 */
export function codecOfFirstByte(byte: number): FrameCodec {
  return byte === CBOR_FIRST_BYTE && cbor !== undefined ? cbor : ndjsonCodec;
}

/**
 * For a server without the CBOR codec: when a connection's first byte is
 * CBOR's (a client dialed with `codec: "cbor"`), a decoder that answers one
 * NDJSON error naming the cause and reads nothing more (the connection is
 * then closed), instead of a parse error per line of CBOR bytes. Else (or
 * with CBOR loaded) undefined.
 */
export function missingCodecDecoder(byte: number): FrameDecoder | undefined {
  if (byte !== CBOR_FIRST_BYTE || cbor !== undefined) return undefined;
  const fatal =
    'this server has no CBOR codec loaded, and the client opened with CBOR\'s self-describe tag (d9 d9 f7): import "@rafter/rpc/cbor" in the server\'s process, or dial with codec: "json"';
  let answered = false;
  return {
    push(): InboundFrame[] {
      if (answered) return [];
      answered = true;
      return [{
        value: new Refusal(
          new RpcError(
            PARSE_ERROR,
            `Parse error: ${fatal} (the connection is closed)`,
          ),
          null,
        ),
        bytes: 0,
        fatal,
      }];
    },
    end: () => [],
    partial: false,
  };
}
