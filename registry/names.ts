/**
 * Service names with attributes, as in Ubik's JNDI: `services/db?version=1.0&team=blue`
 * is the base name `services/db` with the attributes `version=1.0` and
 * `team=blue`. Binding under such a name stores the attributes on the
 * endpoint; looking one up returns only the endpoints whose attributes
 * match every pair.
 *
 * Web-standard, shared by the registry and its clients.
 *
 * @module
 */

import {
  type Attributes,
  MAX_ATTRIBUTES,
  MAX_NAME_LENGTH,
} from "./protocol.ts";

/** A name split into its base and its query attributes. */
export interface ParsedName {
  /** The name before `?`. */
  base: string;
  /** The query's attributes ({} when there is no query). */
  query: Attributes;
}

/** Longest attribute name, in characters. */
export const MAX_ATTRIBUTE_KEY_LENGTH = 64;
/** Longest attribute value, in characters. */
export const MAX_ATTRIBUTE_VALUE_LENGTH = 256;

const KEY = /^[A-Za-z0-9._-]+$/;
// No whitespace or control characters, no '?' or '#' (query, fragment).
// deno-lint-ignore no-control-regex
const BASE = /^[^\u0000-\u0020\u007f?#]+$/;

/**
 * Checks a base name (no query): 1..256 characters, no whitespace or
 * control characters, no `?` or `#`.
 *
 * @returns an error message naming `field`, or null when it is valid.
 */
export function baseNameProblem(value: unknown, field: string): string | null {
  if (typeof value !== "string" || value.length === 0) {
    return `"${field}" must be a non-empty string`;
  }
  if (value.length > MAX_NAME_LENGTH) {
    return `"${field}" is ${value.length} characters long; at most ${MAX_NAME_LENGTH} are allowed`;
  }
  if (!BASE.test(value)) {
    return `"${field}" ${
      JSON.stringify(value)
    } may not contain whitespace, control characters, "?" or "#"`;
  }
  return null;
}

/**
 * Splits `name?key=value&…` into its base and attributes. Values are
 * percent-decoded (`%20` is a space; `+` stays `+`).
 *
 * @throws {TypeError} naming `field` when the base name is invalid (see
 * {@link baseNameProblem}), or the query is malformed: empty, a pair
 * without `=`, a key outside `[A-Za-z0-9._-]{1,64}`, a value over 256
 * characters or with a bad percent escape, a key given twice, or more than
 * 32 pairs.
 *
 * @example
 * ```ts
 * import { parseName } from "./names.ts";
 * const { base, query } = parseName("services/db?version=1.0&team=blue");
 * console.log(base, query); // services/db { version: "1.0", team: "blue" }
 * ```
 */
export function parseName(text: unknown, field = "name"): ParsedName {
  if (typeof text !== "string") {
    throw new TypeError(`"${field}" must be a string`);
  }
  const mark = text.indexOf("?");
  const base = mark === -1 ? text : text.slice(0, mark);
  const problem = baseNameProblem(base, field);
  if (problem !== null) throw new TypeError(problem);
  if (mark === -1) return { base, query: {} };
  return { base, query: parseQuery(text.slice(mark + 1), field) };
}

function parseQuery(query: string, field: string): Attributes {
  if (query === "") {
    throw new TypeError(
      `"${field}" ends with "?" but has no attributes; write name?key=value&key=value`,
    );
  }
  const pairs = query.split("&");
  if (pairs.length > MAX_ATTRIBUTES) {
    throw new TypeError(
      `"${field}" has ${pairs.length} attributes; at most ${MAX_ATTRIBUTES} are allowed`,
    );
  }
  const attributes: Attributes = {};
  for (const pair of pairs) {
    const equals = pair.indexOf("=");
    if (equals === -1) {
      throw new TypeError(
        `"${field}": query item ${
          JSON.stringify(pair)
        } has no "="; write key=value`,
      );
    }
    const key = pair.slice(0, equals);
    let value: string;
    try {
      value = decodeURIComponent(pair.slice(equals + 1));
    } catch {
      throw new TypeError(
        `"${field}": the value of ${
          JSON.stringify(key)
        } has a malformed percent escape`,
      );
    }
    const problem = attributeProblem(key, value);
    if (problem !== null) throw new TypeError(`"${field}": ${problem}`);
    if (Object.hasOwn(attributes, key)) {
      throw new TypeError(
        `"${field}": attribute ${JSON.stringify(key)} is given twice`,
      );
    }
    attributes[key] = value;
  }
  return attributes;
}

/** Why `key=value` is not a valid attribute, or null when it is. */
function attributeProblem(key: string, value: unknown): string | null {
  if (!KEY.test(key) || key.length > MAX_ATTRIBUTE_KEY_LENGTH) {
    return `attribute name ${
      JSON.stringify(key)
    } must be 1..${MAX_ATTRIBUTE_KEY_LENGTH} characters of A-Z a-z 0-9 . _ -`;
  }
  if (typeof value !== "string") {
    return `attribute ${JSON.stringify(key)} must have a string value`;
  }
  if (value.length > MAX_ATTRIBUTE_VALUE_LENGTH) {
    return `the value of attribute ${
      JSON.stringify(key)
    } is longer than ${MAX_ATTRIBUTE_VALUE_LENGTH} characters`;
  }
  return null;
}

/**
 * Checks an `attrs` object: string values under valid keys.
 *
 * @throws {TypeError} naming `field` and the bad attribute.
 *
 * @example
 * ```ts
 * import { checkAttributes } from "./names.ts";
 * console.log(checkAttributes({ version: "1.0" }, "endpoint.attrs")); // { version: "1.0" }
 * ```
 */
export function checkAttributes(value: unknown, field: string): Attributes {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new TypeError(
      `"${field}" must be an object of attribute name to string value`,
    );
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_ATTRIBUTES) {
    throw new TypeError(
      `"${field}" has ${entries.length} attributes; at most ${MAX_ATTRIBUTES} are allowed`,
    );
  }
  const attributes: Attributes = {};
  for (const [key, item] of entries) {
    const problem = attributeProblem(key, item);
    if (problem !== null) throw new TypeError(`"${field}": ${problem}`);
    attributes[key] = item as string;
  }
  return attributes;
}

/**
 * Merges the attributes of a name's query with an `attrs` object.
 *
 * @throws {TypeError} when both give the same key different values, or
 * together they exceed 32 attributes.
 */
export function mergeAttributes(
  fromName: Attributes,
  fromObject: Attributes,
): Attributes {
  const merged: Attributes = { ...fromName };
  for (const [key, value] of Object.entries(fromObject)) {
    if (Object.hasOwn(merged, key) && merged[key] !== value) {
      throw new TypeError(
        `attribute ${JSON.stringify(key)} is ${
          JSON.stringify(merged[key])
        } in the name but ${JSON.stringify(value)} in "endpoint.attrs"`,
      );
    }
    merged[key] = value;
  }
  if (Object.keys(merged).length > MAX_ATTRIBUTES) {
    throw new TypeError(
      `the endpoint has more than ${MAX_ATTRIBUTES} attributes`,
    );
  }
  return merged;
}

/**
 * Whether attributes match a query: every pair of the query is present
 * with the same value (an empty query matches everything).
 *
 * @example
 * ```ts
 * import { matchesQuery } from "./names.ts";
 * console.log(matchesQuery({ version: "1.0", team: "blue" }, { version: "1.0" })); // true
 * ```
 */
export function matchesQuery(
  attributes: Attributes,
  query: Attributes,
): boolean {
  for (const key in query) {
    if (!Object.hasOwn(attributes, key) || attributes[key] !== query[key]) {
      return false;
    }
  }
  return true;
}

/**
 * Formats a base name and attributes back as `name?key=value&…` (keys
 * sorted, values percent-encoded), e.g. for display.
 *
 * @example
 * ```ts
 * import { formatName } from "./names.ts";
 * console.log(formatName("db", { version: "1.0", team: "a b" })); // db?team=a%20b&version=1.0
 * ```
 */
export function formatName(base: string, query: Attributes): string {
  const keys = Object.keys(query).sort();
  if (keys.length === 0) return base;
  return `${base}?${
    keys.map((key) => `${key}=${encodeURIComponent(query[key])}`).join("&")
  }`;
}
