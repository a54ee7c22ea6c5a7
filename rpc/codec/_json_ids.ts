/**
 * Request ids read exactly from JSON text, and written back (private: not
 * part of the public API).
 *
 * `JSON.parse` reads every number as a double, so an integer id beyond
 * ±(2^53 − 1) comes out rounded (`9007199254740993` reads as
 * `9007199254740992`), and two calls in flight could get the same id back.
 * After parsing, a message whose id is a number but not a safe integer has
 * its id read again from its own text: an integer becomes a `bigint` (exact,
 * written back digit for digit); any other number is kept only when the
 * double prints back as it was written (`1.5`), and otherwise the message
 * is refused with -32600 and id null (`0.10`, `1e400`,
 * `9007199254740993.0`), since no answer could carry the id as sent. The
 * target of an `rpc.cancel` (`params.id`) is read the same way, so a cancel
 * never reaches a call whose id only rounds to the same double.
 *
 * Safe integer ids, the common case, cost nothing: the text is read again
 * only for a message that has an unsafe id. An id written with a fraction
 * or an exponent that a double reads as a safe integer (`7.0`, `7e0`) is
 * answered in its shortest form (`7`), the same JSON number.
 *
 * @module
 */

import { INVALID_REQUEST, RpcError } from "../errors.ts";
import { CANCEL_METHOD, type RequestId } from "../message.ts";
import { Refusal } from "../framing/_refusal.ts";

/** An integer token: an optional minus and digits, no fraction, no exponent. */
const INTEGER = /^-?(?:0|[1-9][0-9]*)$/;

/**
 * The JSON text of a request id: a `bigint` as its digits, anything else
 * as `JSON.stringify` writes it.
 */
export function idJson(id: RequestId): string {
  return typeof id === "bigint" ? id.toString() : JSON.stringify(id);
}

/**
 * Replaces, in a value `JSON.parse` read from `text` (a message or a batch),
 * each id that is a number but not a safe integer by its exact value, read
 * from the text: a `bigint`, the number itself, or a {@link Refusal} of the
 * whole message (id null) when the id cannot be echoed as it was written.
 * Objects are changed in place; the value is returned (a batch as a new
 * array when a member changed). `text` must be the valid JSON `value` was
 * read from.
 */
export function exactIds(text: string, value: unknown): unknown {
  if (Array.isArray(value)) {
    if (!value.some(hasUnsafeId)) return value;
    const tokens = batchTokens(text);
    return value.map((member, index) =>
      hasUnsafeId(member) ? fix(member, tokens[index]) : member
    );
  }
  if (!hasUnsafeId(value)) return value;
  return fix(value, memberTokens(text, skipSpace(text, 0)));
}

/** The raw tokens of a message's `id` and `params.id` members, when present. */
interface Tokens {
  id?: string;
  paramsId?: string;
}

function unsafe(value: unknown): value is number {
  return typeof value === "number" && !Number.isSafeInteger(value);
}

function recordOf(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? value as Record<string, unknown>
    : undefined;
}

function hasUnsafeId(value: unknown): boolean {
  const record = recordOf(value);
  if (record === undefined) return false;
  return unsafe(record.id) ||
    (record.method === CANCEL_METHOD && unsafe(recordOf(record.params)?.id));
}

function fix(value: unknown, tokens: Tokens | undefined): unknown {
  const record = value as Record<string, unknown>;
  const id = record.id;
  if (unsafe(id)) {
    const exact = exactNumber(tokens?.id, id);
    if (exact === undefined) {
      return new Refusal(
        new RpcError(
          INVALID_REQUEST,
          `Invalid Request: the id ${
            tokens?.id ?? String(id)
          } would not come back as it was sent (a double reads it as ${
            JSON.stringify(id)
          }); send an integer or a string id`,
        ),
        null,
      );
    }
    record.id = exact;
  }
  const params = recordOf(record.params);
  if (params !== undefined && unsafe(params.id)) {
    // A cancel target that cannot be read exactly cancels nothing.
    const exact = exactNumber(tokens?.paramsId, params.id);
    if (exact === undefined) delete params.id;
    else params.id = exact;
  }
  return value;
}

/** The id `token` names exactly, or undefined when no number can hold it. */
function exactNumber(
  token: string | undefined,
  parsed: number,
): number | bigint | undefined {
  if (token === undefined) return undefined;
  if (INTEGER.test(token)) return BigInt(token);
  return String(parsed) === token ? parsed : undefined;
}

/** The tokens of each member of the batch `text` (a JSON array). */
function batchTokens(text: string): (Tokens | undefined)[] {
  const tokens: (Tokens | undefined)[] = [];
  let i = skipSpace(text, skipSpace(text, 0) + 1);
  while (i < text.length && text[i] !== "]") {
    const end = skipValue(text, i);
    tokens.push(text[i] === "{" ? memberTokens(text, i) : undefined);
    i = skipSpace(text, end);
    if (text[i] === ",") i = skipSpace(text, i + 1);
  }
  return tokens;
}

/**
 * The `id` and `params.id` tokens of the object starting at `start` (the
 * last of each, as `JSON.parse` keeps the last of a repeated name).
 */
function memberTokens(text: string, start: number, nested = false): Tokens {
  const tokens: Tokens = {};
  let i = skipSpace(text, start + 1);
  while (i < text.length && text[i] === '"') {
    const keyEnd = skipString(text, i);
    const raw = text.slice(i, keyEnd);
    const key = raw.includes("\\") ? JSON.parse(raw) : raw.slice(1, -1);
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const valueEnd = skipValue(text, valueStart);
    if (key === "id") tokens.id = text.slice(valueStart, valueEnd);
    else if (!nested && key === "params" && text[valueStart] === "{") {
      tokens.paramsId = memberTokens(text, valueStart, true).id;
    }
    i = skipSpace(text, valueEnd);
    if (text[i] === ",") i = skipSpace(text, i + 1);
  }
  return tokens;
}

function skipSpace(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    // space, tab, line feed, carriage return
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return i;
    i++;
  }
}

/** The index after the string whose opening quote is at `i`. */
function skipString(text: string, i: number): number {
  let close = text.indexOf('"', i + 1);
  while (close !== -1) {
    let backslashes = 0;
    while (text.charCodeAt(close - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return close + 1;
    close = text.indexOf('"', close + 1);
  }
  return text.length;
}

/** The index after the JSON value that starts at `i`. */
function skipValue(text: string, i: number): number {
  const first = text[i];
  if (first === '"') return skipString(text, i);
  if (first === "{" || first === "[") {
    let depth = 0;
    for (let j = i; j < text.length;) {
      const c = text[j];
      if (c === '"') {
        j = skipString(text, j);
        continue;
      }
      if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") {
        if (--depth === 0) return j + 1;
      }
      j++;
    }
    return text.length;
  }
  let j = i;
  while (j < text.length && !",}] \t\n\r".includes(text[j])) j++;
  return j;
}
