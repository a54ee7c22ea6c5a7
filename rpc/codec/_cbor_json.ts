/**
 * Which CBOR items are JSON values (private: not part of the public API).
 *
 * A check of one frame's bytes, before any decoding, that it holds exactly
 * one well-formed CBOR item (RFC 8949 §5.3.1) made only of what JSON has:
 * maps with text keys, arrays, text strings (valid UTF-8), integers, finite
 * floats, false, true, null. cbor-x then decodes only such items, so none
 * of its extensions (tags for dates, sets, records, shared references,
 * packed strings) can give a message a meaning JSON could not. It reads
 * each byte once, without recursion, and decodes nothing but the heads and
 * the `id` members.
 *
 * @module
 */

import type { RequestId } from "../message.ts";

/** Items nested deeper than this are refused (cbor-x decodes recursively). */
export const MAX_CBOR_DEPTH = 1_000;

/** One message: the whole item, or one member of a batch. */
export interface ItemScan {
  /** Where it starts in the frame (its first byte, a tag's if tagged). */
  start: number;
  /** Where it ends (the byte after its last). */
  end: number;
  /** Why it is not a JSON value (the first reason found), if it is not. */
  issue?: string;
  /**
   * Its `id` member, when it is a map and that member a valid id (text,
   * finite number, null): the id to answer a refusal with.
   */
  id?: RequestId;
}

/** What {@link scanCbor} found. */
export type CborScan =
  | { malformed: string }
  | {
    malformed?: undefined;
    /** Whether the item is an array: a batch, whose members are `items`. */
    batch: boolean;
    /** The whole item, or the members of a batch. */
    items: ItemScan[];
    /** Whether some integer was written in 8 bytes (cbor-x gives a bigint). */
    bigints: boolean;
  };

/** An array or map being read. */
interface Level {
  /** Items left in it (a map's keys and values both count); Infinity: until a break. */
  left: number;
  map: boolean;
  /** For a map: the next item is a key. */
  key: boolean;
  /** It is a message (the whole item, or a batch member) whose `id` is looked for. */
  message: boolean;
  /** The next item is the value of the message's `id` member. */
  idNext: boolean;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
const PROTO = new TextEncoder().encode("__proto__");
const ARGUMENT_BYTES = [1, 2, 4, 8];

const NOT_TEXT_KEY =
  "a map key that is not a text string has no JSON equivalent (JSON member names are strings)";

/**
 * Checks that `bytes` is one CBOR item within the JSON data model.
 *
 * @returns `malformed` with the reason when the bytes are not one
 * well-formed item (or a text string is not UTF-8); otherwise the item (or
 * each batch member) with the first reason, if any, it is not a JSON value.
 */
export function scanCbor(bytes: Uint8Array): CborScan {
  const end = bytes.length;
  if (end === 0) return { malformed: "the frame is empty" };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const stack: Level[] = [];
  const whole: ItemScan = { start: 0, end };
  const members: ItemScan[] = [];
  let item = whole;
  let batch = false;
  let inMember = false;
  let bigints = false;
  let tagged = false;
  let pos = 0;
  /** The innermost open array or map. */
  let top: Level | undefined;
  const flag = (issue: string) => {
    item.issue ??= issue;
  };
  for (;;) {
    if (pos >= end) return { malformed: "the frame ends inside its item" };
    const head = pos;
    const initial = bytes[pos++];
    const major = initial >> 5;
    const info = initial & 0x1f;
    if (batch && stack.length === 1 && !inMember && initial !== 0xff) {
      item = { start: head, end };
      inMember = true;
    }
    let arg = info;
    let long = false;
    if (info >= 24 && info <= 27) {
      const size = ARGUMENT_BYTES[info - 24];
      if (end - pos < size) {
        return { malformed: "the frame ends inside a head" };
      }
      arg = size === 1
        ? bytes[pos]
        : size === 2
        ? view.getUint16(pos)
        : size === 4
        ? view.getUint32(pos)
        : view.getUint32(pos) * 2 ** 32 + view.getUint32(pos + 4);
      long = size === 8;
      pos += size;
    } else if (info >= 28 && info <= 30) {
      return { malformed: `byte ${head} has the reserved argument ${info}` };
    } else if (info === 31 && (major <= 1 || major === 6)) {
      return { malformed: `byte ${head} has no indefinite form` };
    }
    const isKey = top !== undefined && top.map && top.key;
    const idNext = top !== undefined && top.idNext;
    if (major === 6) {
      tagged = true;
      flag(
        `a CBOR tag (${
          long ? "beyond 2^32" : arg
        }) has no JSON equivalent; send the value without it`,
      );
      continue; // the tagged item follows
    }
    const wasTagged = tagged;
    tagged = false;
    switch (major) {
      case 0:
      case 1:
        if (long) bigints = true;
        if (isKey) flag(NOT_TEXT_KEY);
        else if (idNext) item.id = integerAt(view, head, major, arg, long);
        break;
      case 2:
      case 3: {
        if (info === 31) {
          return {
            malformed: "indefinite-length strings are not supported",
          };
        }
        if (arg > end - pos) {
          return { malformed: "the frame ends inside a string" };
        }
        const start = pos;
        pos += arg;
        if (major === 2) {
          flag(
            "a CBOR byte string has no JSON equivalent; send text (base64, say) or an array of numbers",
          );
          if (idNext) item.id = undefined;
          break;
        }
        if (!isUtf8(bytes, start, pos)) {
          return { malformed: "a text string is not valid UTF-8" };
        }
        if (isKey) {
          if (arg === PROTO.length && equals(bytes, start, PROTO)) {
            flag(
              'the map key "__proto__" is not accepted (JavaScript would not read it as a member)',
            );
          }
          // "id"
          top!.idNext = top!.message && arg === 2 && bytes[start] === 0x69 &&
            bytes[start + 1] === 0x64;
        } else if (idNext) {
          item.id = utf8.decode(bytes.subarray(start, pos));
        }
        break;
      }
      case 4:
      case 5: {
        if (isKey) flag(NOT_TEXT_KEY);
        if (idNext) item.id = undefined;
        if (stack.length >= MAX_CBOR_DEPTH) {
          flag(`the item is nested deeper than ${MAX_CBOR_DEPTH} levels`);
        }
        const left = info === 31 ? Infinity : major === 5 ? arg * 2 : arg;
        if (left !== Infinity && left > end - pos) {
          return { malformed: "the frame ends before the items announced" };
        }
        if (stack.length === 0 && major === 4 && !wasTagged) batch = true;
        if (left === 0) break;
        top = {
          left,
          map: major === 5,
          key: true,
          message: major === 5 && stack.length === (batch ? 1 : 0),
          idNext: false,
        };
        stack.push(top);
        continue;
      }
      default: // 7: simple values, floats, break
        if (info === 31) {
          if (
            top === undefined || top.left !== Infinity ||
            (top.map && !top.key) || wasTagged
          ) {
            return { malformed: `byte ${head} is a break out of place` };
          }
          stack.pop();
          top = stack[stack.length - 1];
          break;
        }
        if (isKey) flag(NOT_TEXT_KEY);
        if (info === 22) {
          if (idNext) item.id = null;
        } else if (info >= 25 && info <= 27) {
          const value = info === 25
            ? halfFloat(arg)
            : info === 26
            ? view.getFloat32(head + 1)
            : view.getFloat64(head + 1);
          if (!Number.isFinite(value)) {
            flag("NaN and infinities have no JSON equivalent");
          } else if (idNext) item.id = value;
        } else {
          if (idNext) item.id = undefined;
          if (info === 23) {
            flag(
              "undefined has no JSON equivalent; send null or leave the member out",
            );
          } else if (info !== 20 && info !== 21) {
            flag(`the CBOR simple value ${arg} has no JSON equivalent`);
          }
        }
    }
    // An item is complete: count it in the levels it completes.
    for (;;) {
      const level = top;
      if (level === undefined) {
        if (pos !== end) {
          return { malformed: `${end - pos} bytes follow the item` };
        }
        return batch && whole.issue === undefined
          ? { batch: true, items: members, bigints }
          : { batch: false, items: [whole], bigints };
      }
      if (batch && stack.length === 1 && inMember) {
        item.end = pos;
        members.push(item);
        inMember = false;
        item = whole;
      }
      if (level.map) {
        if (!level.key) level.idNext = false;
        level.key = !level.key;
      }
      if (level.left === Infinity || --level.left > 0) break;
      stack.pop();
      top = stack[stack.length - 1];
    }
  }
}

/** The integer whose head is at `head`: a number, or a bigint beyond ±(2^53 − 1). */
function integerAt(
  view: DataView,
  head: number,
  major: number,
  arg: number,
  long: boolean,
): number | bigint {
  if (!long) return major === 0 ? arg : -1 - arg;
  const unsigned = view.getBigUint64(head + 1);
  const value = major === 0 ? unsigned : -1n - unsigned;
  const number = Number(value);
  return Number.isSafeInteger(number) ? number : value;
}

function isUtf8(bytes: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    if (bytes[i] >= 0x80) {
      try {
        utf8.decode(bytes.subarray(start, end));
        return true;
      } catch {
        return false;
      }
    }
  }
  return true;
}

function equals(bytes: Uint8Array, start: number, expected: Uint8Array) {
  for (let i = 0; i < expected.length; i++) {
    if (bytes[start + i] !== expected[i]) return false;
  }
  return true;
}

/** An IEEE 754 half-precision float from its 16 bits. */
function halfFloat(bits: number): number {
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  const magnitude = exponent === 0
    ? fraction * 2 ** -24
    : exponent === 31
    ? (fraction === 0 ? Infinity : NaN)
    : (fraction + 1024) * 2 ** (exponent - 25);
  return bits & 0x8000 ? -magnitude : magnitude;
}
