/**
 * The CBOR codec: after the self-describe tag `d9 d9 f7` that a client
 * sends first, each frame is a 4-byte big-endian length and one CBOR item
 * (private: not part of the public API; `codec.ts` documents the wire
 * format and the value rules).
 *
 * @module
 */

// cbor-x's self-contained build, not its package root: under Node resolution
// the root loads node:module (for an optional native string decoder) and
// node:stream; this build needs no module, compiles no code at run time
// (new Function, which workerd forbids) and carries its types.
import { Decoder, Encoder } from "cbor-x/index-no-eval";
import {
  INVALID_REQUEST,
  messageOf,
  PARSE_ERROR,
  RpcError,
} from "../errors.ts";
import { CANCEL_METHOD } from "../message.ts";
import type { FrameCodec, FrameDecoder, InboundFrame } from "./_frame_codec.ts";
import {
  type Chunk,
  LengthPrefixedDecoder,
  PREFIX_BYTES,
} from "../framing/_length_prefixed.ts";
import { type ItemScan, scanCbor } from "./_cbor_json.ts";
import { jsonValue } from "./_json_value.ts";
import { Refusal } from "../framing/_refusal.ts";

/** The CBOR self-describe tag 55799, which opens a CBOR connection. */
const PREAMBLE = new Uint8Array([0xd9, 0xd9, 0xf7]);

// Standard maps with the shortest heads; no records, no extensions.
const encoder = new Encoder({ useRecords: false, variableMapSize: true });
const decoder = new Decoder({ useRecords: false, mapsAsObjects: true });

/** CBOR: parts are plain JSON values (objects, arrays), with bigint ids. */
export const cborCodec: {
  frame(part: unknown): Uint8Array;
} & FrameCodec<unknown> = {
  name: "cbor",
  preamble: PREAMBLE,
  result(id, result) {
    return { jsonrpc: "2.0", result: jsonValue(result), id };
  },
  error(id, error) {
    return { jsonrpc: "2.0", error: jsonValue(error), id };
  },
  batch(replies) {
    return replies;
  },
  message(value) {
    return jsonValue(value);
  },
  frame(part) {
    const item = encoder.encode(part);
    const frame = new Uint8Array(PREFIX_BYTES + item.length);
    new DataView(frame.buffer).setUint32(0, item.length);
    frame.set(item, PREFIX_BYTES);
    return frame;
  },
  decoder({ maxFrameBytes, preamble }) {
    return new CborMessages(maxFrameBytes, preamble);
  },
};

/** Length-prefixed frames as decoded messages. */
class CborMessages implements FrameDecoder {
  readonly #frames: LengthPrefixedDecoder;
  readonly #maxFrameBytes: number;

  constructor(maxFrameBytes: number, preamble: boolean) {
    this.#frames = new LengthPrefixedDecoder(
      maxFrameBytes,
      preamble ? PREAMBLE : new Uint8Array(0),
    );
    this.#maxFrameBytes = maxFrameBytes;
  }

  push(chunk: Uint8Array): InboundFrame[] {
    return this.#frames.push(chunk).map((found) => this.#message(found));
  }

  get partial(): boolean {
    return this.#frames.partial;
  }

  end(): InboundFrame[] {
    return this.#frames.end().map((found) => this.#message(found));
  }

  #message(found: Chunk): InboundFrame {
    switch (found.kind) {
      case "frame":
        return {
          value: decodeItem(found.payload),
          bytes: found.payload.length,
        };
      case "tooLarge": {
        const fatal =
          `a frame of ${found.length} bytes exceeds maxFrameBytes (${this.#maxFrameBytes} bytes)`;
        return refused(
          INVALID_REQUEST,
          `Invalid Request: ${fatal}; send smaller messages or raise maxFrameBytes (the connection is closed)`,
          fatal,
          true,
        );
      }
      case "badPreamble": {
        const fatal =
          `a CBOR connection must open with the self-describe tag d9 d9 f7, and this one opened with ${
            hex(found.received)
          }`;
        return refused(PARSE_ERROR, `Parse error: ${fatal}`, fatal);
      }
      case "truncated": {
        const fatal = found.length === undefined
          ? `the connection ended inside a frame's ${PREFIX_BYTES}-byte length (${found.received} bytes of it)`
          : `the connection ended inside a frame (${found.received} of its ${found.length} bytes)`;
        return refused(PARSE_ERROR, `Parse error: ${fatal}`, fatal);
      }
    }
  }
}

function refused(
  code: number,
  message: string,
  fatal: string,
  tooLarge?: true,
): InboundFrame {
  return {
    value: new Refusal(new RpcError(code, message), null),
    bytes: 0,
    fatal,
    tooLarge,
  };
}

function hex(bytes: Uint8Array): string {
  return [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join(
    " ",
  );
}

/**
 * One frame's item as a message (or batch): checked to be a JSON value,
 * then decoded by cbor-x; a {@link Refusal} for what cannot run.
 */
function decodeItem(payload: Uint8Array): unknown {
  const scan = scanCbor(payload);
  if (scan.malformed !== undefined) return malformed(scan.malformed);
  const { items, bigints } = scan;
  try {
    if (!scan.batch) {
      const [item] = items;
      return item.issue === undefined
        ? message(decoder.decode(payload), bigints)
        : refusal(item);
    }
    if (items.every((item) => item.issue === undefined)) {
      const batch = decoder.decode(payload) as unknown[];
      return bigints ? batch.map((member) => message(member, true)) : batch;
    }
    return items.map((item) =>
      item.issue === undefined
        ? message(
          decoder.decode(payload.subarray(item.start, item.end)),
          bigints,
        )
        : refusal(item)
    );
  } catch (error) {
    return malformed(messageOf(error));
  }
}

function malformed(reason: string): Refusal {
  return new Refusal(
    new RpcError(PARSE_ERROR, `Parse error: malformed CBOR: ${reason}`),
    null,
  );
}

function refusal(item: ItemScan): Refusal {
  return new Refusal(
    new RpcError(INVALID_REQUEST, `Invalid Request: ${item.issue}`),
    item.id ?? null,
  );
}

/**
 * A decoded message with its bigints (8-byte integers) as JSON reads them:
 * the nearest double, except the message's `id` and an `rpc.cancel`'s
 * `params.id`, which stay exact beyond ±(2^53 − 1).
 */
function message(value: unknown, bigints: boolean): unknown {
  if (!bigints || typeof value !== "object" || value === null) {
    return bigints ? numbers(value) : value;
  }
  if (Array.isArray(value)) return numbers(value);
  const record = value as Record<string, unknown>;
  const cancel = record.method === CANCEL_METHOD;
  for (const key in record) {
    const member = record[key];
    if (key === "id") record.id = exactId(member);
    else if (key === "params" && cancel && isRecord(member)) {
      for (const name in member) {
        member[name] = name === "id"
          ? exactId(member.id)
          : numbers(member[name]);
      }
    } else record[key] = numbers(member);
  }
  return record;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function exactId(value: unknown): unknown {
  if (typeof value !== "bigint") return numbers(value);
  const number = Number(value);
  return Number.isSafeInteger(number) ? number : value;
}

/** `value` with every bigint in it replaced by the nearest double. */
function numbers(value: unknown): unknown {
  if (typeof value === "bigint") return Number(value);
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = numbers(value[i]);
    return value;
  }
  const record = value as Record<string, unknown>;
  for (const key in record) record[key] = numbers(record[key]);
  return record;
}
