/**
 * The codecs a Rafter connection speaks. A server accepts both on one port
 * and tells them apart by the first byte a client sends.
 *
 * - `"json"`: newline-delimited JSON (NDJSON), one JSON text per line; the
 *   default, and what `nc` speaks.
 * - `"cbor"`: the client opens the connection with the three bytes of the
 *   CBOR self-describe tag, `d9 d9 f7`; after them every frame, in both
 *   directions, is a 4-byte big-endian length followed by that many bytes
 *   holding one CBOR item (RFC 8949): the JSON-RPC message as a map, or an
 *   array for a batch. Every Rafter extension (`timeoutMs`, `rpc.cancel`,
 *   `rpc.goaway`, batches, responses written as they complete) is the same
 *   message under either codec.
 *
 * CBOR carries exactly JSON's values, so a call means the same under both
 * codecs: maps with text keys, arrays, text strings, integers, finite
 * floats, true, false and null. A request holding anything else (a byte
 * string, a tag, undefined, another simple value, NaN or an infinity, a map
 * key that is not a text string, the key `__proto__`, nesting deeper than
 * 1,000 levels) is refused with -32600 saying what it held (a batch member:
 * that member only); malformed CBOR or a text string that is not UTF-8 is
 * -32700, and the connection goes on. An integer beyond ±(2^53 − 1) reads
 * as the nearest double, as `JSON.parse` reads the same digits, except a
 * request's id (and an `rpc.cancel` target), which stays exact (a
 * `bigint`) and is echoed unchanged. What a server or client sends is
 * what `JSON.stringify` would send: `toJSON` is called, `undefined` members
 * are left out, a `bigint` is refused.
 *
 * A server whose process has not loaded the CBOR codec (`@rafter/rpc/cbor`)
 * answers a connection opening with `d9` with one NDJSON -32700 saying so,
 * and closes it; a CBOR client that reads JSON text (`{` or `[`) where a
 * frame's length should be fails its calls as not sent, naming the cure.
 *
 * A length above `maxFrameBytes` is answered with -32600 (the limit and
 * what to do) and the connection closed, without reading the frame; a
 * connection that ends in the middle of a frame is answered with -32700.
 *
 * @module
 */

/** A wire codec: `"json"` (NDJSON, the default) or `"cbor"` (length-prefixed CBOR). */
export type Codec = "json" | "cbor";
