/**
 * The NDJSON codec: one JSON text per line (private: not part of the public
 * API; the line splitting itself is `ndjson.ts`).
 *
 * @module
 */

import {
  INVALID_REQUEST,
  messageOf,
  PARSE_ERROR,
  RpcError,
} from "../errors.ts";
import type { FrameCodec, FrameDecoder, InboundFrame } from "./_frame_codec.ts";
import { NdjsonDecoder } from "../framing/_ndjson.ts";
import { exactIds, idJson } from "./_json_ids.ts";
import { Refusal } from "../framing/_refusal.ts";

/**
 * A message (or batch) read from JSON text: parsed, with exact ids, or a
 * {@link Refusal} (-32700, id null) when the text is not JSON.
 */
export function parseJsonMessage(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return new Refusal(
      new RpcError(PARSE_ERROR, `Parse error: ${messageOf(error)}`),
      null,
    );
  }
  return exactIds(text, value);
}

/** NDJSON: parts are JSON texts. */
export const ndjsonCodec: FrameCodec<string> = {
  name: "json",
  preamble: new Uint8Array(0),
  result(id, result) {
    return `{"jsonrpc":"2.0","result":${
      JSON.stringify(result) ?? "null"
    },"id":${idJson(id)}}`;
  },
  error(id, error) {
    return `{"jsonrpc":"2.0","error":${JSON.stringify(error)},"id":${
      idJson(id)
    }}`;
  },
  batch(replies) {
    return `[${replies.join(",")}]`;
  },
  message(value) {
    const text = JSON.stringify(value);
    if (text === undefined) {
      throw new TypeError("a message must be an object");
    }
    return text;
  },
  // The line itself: the FrameWriter adds the newline and encodes it.
  frame: (text) => text,
  decoder({ maxFrameBytes }) {
    return new NdjsonMessages(maxFrameBytes);
  },
};

/** Lines as decoded messages: one {@link InboundFrame} made per line. */
class NdjsonMessages implements FrameDecoder {
  readonly #lines: NdjsonDecoder<InboundFrame>;

  constructor(maxFrameBytes: number) {
    this.#lines = new NdjsonDecoder<InboundFrame>({
      maxFrameBytes,
      make: {
        text: (text) => ({ value: parseJsonMessage(text), bytes: text.length }),
        tooLarge: () => ({
          value: new Refusal(
            new RpcError(
              INVALID_REQUEST,
              `Invalid Request: frame exceeds ${maxFrameBytes} bytes; send smaller messages or raise maxFrameBytes`,
            ),
            null,
          ),
          bytes: 0,
          tooLarge: true,
        }),
        badUtf8: () => ({
          value: new Refusal(
            new RpcError(PARSE_ERROR, "Parse error: frame is not valid UTF-8"),
            null,
          ),
          bytes: 0,
        }),
      },
    });
  }

  push(chunk: Uint8Array): InboundFrame[] {
    return this.#lines.push(chunk);
  }

  get partial(): boolean {
    return this.#lines.partial;
  }

  end(): InboundFrame[] {
    return this.#lines.end();
  }
}
