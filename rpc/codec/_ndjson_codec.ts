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
  request: requestText,
  // The line itself: the FrameWriter adds the newline and encodes it.
  frame: (text) => text,
  decoder({ maxFrameBytes }) {
    return new NdjsonMessages(maxFrameBytes);
  },
};

/** The last method {@link requestText} wrote, and its JSON text. */
let lastMethod = "";
let lastMethodJson = '""';

/**
 * A request's JSON text, written around `JSON.stringify(params)`: the same
 * text as `JSON.stringify` of the request object (members in the order
 * jsonrpc, method, params, id, timeoutMs, undefined ones left out), without
 * building that object or writing its constant members each time. Params
 * with a `toJSON` method (which `JSON.stringify` would call with the key
 * "params") and params that fail to encode go through the object, so the
 * text and the error are exactly the object's. `id` and `timeoutMs` are
 * integers (written as `JSON.stringify` writes them).
 */
function requestText(
  method: string,
  params: object | undefined,
  id: number | undefined,
  timeoutMs: number | undefined,
): string {
  let paramsJson: string | undefined;
  if (params !== undefined) {
    if (typeof (params as { toJSON?: unknown }).toJSON === "function") {
      return requestObjectText(method, params, id, timeoutMs);
    }
    try {
      paramsJson = JSON.stringify(params);
    } catch {
      return requestObjectText(method, params, id, timeoutMs);
    }
  }
  if (method !== lastMethod) {
    lastMethodJson = JSON.stringify(method);
    lastMethod = method;
  }
  let text = `{"jsonrpc":"2.0","method":${lastMethodJson}`;
  if (paramsJson !== undefined) text += `,"params":${paramsJson}`;
  if (id !== undefined) text += `,"id":${id}`;
  if (timeoutMs !== undefined) text += `,"timeoutMs":${timeoutMs}`;
  return text + "}";
}

/** {@link requestText} through the request object. */
function requestObjectText(
  method: string,
  params: object | undefined,
  id: number | undefined,
  timeoutMs: number | undefined,
): string {
  const request: Record<string, unknown> = { jsonrpc: "2.0", method };
  if (params !== undefined) request.params = params;
  if (id !== undefined) request.id = id;
  if (timeoutMs !== undefined) request.timeoutMs = timeoutMs;
  return ndjsonCodec.message(request);
}

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
