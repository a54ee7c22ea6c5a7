/**
 * The value JSON would send, for codecs that are not JSON text (private:
 * not part of the public API).
 *
 * @module
 */

/** Deeper than this, a value is left for `JSON.stringify` to judge (a cycle, say). */
const MAX_PLAIN_DEPTH = 1_000;

/**
 * What `JSON.parse(JSON.stringify(value))` gives, so that a value means the
 * same whichever codec carries it: `toJSON` is called (a `Date` becomes its
 * ISO text), `undefined`, functions and symbols are left out of objects and
 * become null in arrays, NaN and infinities become null, a top-level
 * `undefined` becomes null. Plain JSON data (plain objects, arrays,
 * strings, finite numbers, booleans, null), the common case, is returned
 * as it is, without a copy.
 *
 * @throws {TypeError} what `JSON.stringify` throws (a `bigint`, a cycle),
 * and for a member named `__proto__`, which a CBOR peer would not read as
 * an own member.
 */
export function jsonValue(value: unknown): unknown {
  if (isPlain(value, 0)) return value;
  const text = JSON.stringify(value);
  if (text === undefined) return null;
  const copy = JSON.parse(text);
  // Plain now; this only looks for __proto__ members.
  isPlain(copy, 0);
  return copy;
}

/** Whether JSON would send `value` as it is; throws for a `__proto__` member. */
function isPlain(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value);
    case "object": {
      if (value === null) return true;
      if (depth > MAX_PLAIN_DEPTH) return false;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (!isPlain(value[i], depth + 1)) return false;
        }
        return true;
      }
      if (Object.getPrototypeOf(value) !== Object.prototype) return false;
      const record = value as Record<string, unknown>;
      for (const key in record) {
        if (key === "__proto__") {
          throw new TypeError(
            "a member named __proto__ cannot be sent over CBOR (a peer would not read it as a member); rename it",
          );
        }
        if (!isPlain(record[key], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}
