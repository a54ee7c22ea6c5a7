/**
 * Newline-delimited JSON (NDJSON) framing: one JSON text per line, lines
 * separated by `\n` (byte 0x0A), an optional `\r` before it. This is the JSON
 * codec of the wire protocol; it works with `nc`.
 *
 * @module
 */

/** Default largest frame {@link NdjsonDecoder} accepts: 1 MiB (1_048_576 bytes). */
export const DEFAULT_MAX_FRAME_BYTES = 1024 * 1024;

/**
 * One decoded line.
 *
 * - `text`: a whole line decoded as UTF-8, without its `\n` or `\r\n`.
 * - `tooLarge`: the line grew past `maxFrameBytes`; `bytes` is how many bytes
 *   of it had arrived when it was refused (more than the limit; the line may
 *   be longer). The rest of the line is skipped.
 * - `badUtf8`: the line is not valid UTF-8.
 */
export type Frame =
  | { kind: "text"; text: string }
  | { kind: "tooLarge"; bytes: number }
  | { kind: "badUtf8" };

/**
 * What an {@link NdjsonDecoder} returns for each kind of {@link Frame}: a
 * caller that turns every line into its own value at once (a decoded
 * message) makes it here, one object per line instead of two.
 */
export interface FrameMaker<F> {
  /** A whole line of text (never blank). */
  text(text: string): F;
  /** A line longer than the limit; `bytes` as in {@link Frame}. */
  tooLarge(bytes: number): F;
  /** A line that is not UTF-8. */
  badUtf8(): F;
}

/** Options of {@link NdjsonDecoder}. */
export interface NdjsonDecoderOptions<F = Frame> {
  /**
   * Largest line accepted, in bytes, not counting its `\n`
   * (default {@link DEFAULT_MAX_FRAME_BYTES}, 1 MiB).
   */
  maxFrameBytes?: number;
  /** Makes the frames returned (default: {@link Frame} objects). */
  make?: FrameMaker<F>;
}

/** The default {@link FrameMaker}: {@link Frame} objects. */
const FRAMES: FrameMaker<Frame> = {
  text: (text) => ({ kind: "text", text }),
  tooLarge: (bytes) => ({ kind: "tooLarge", bytes }),
  badUtf8: () => ({ kind: "badUtf8" }),
};

const NEWLINE = 0x0a;
const UTF8 = new TextDecoder("utf-8", { fatal: true });
const CARRIAGE_RETURN = "\r";
const BLANK = /^[ \t\r]*$/;
/** U+FEFF, which a `TextDecoder` drops at the start of what it decodes. */
const BYTE_ORDER_MARK = 0xfeff;

/**
 * Splits a byte stream into NDJSON lines. Feed it the chunks as they arrive;
 * it buffers the bytes of an unfinished line (so a multi-byte UTF-8 character
 * split across chunks is fine) and decodes only whole lines. Each byte is
 * scanned at most twice and copied at most twice, whatever the chunking. The
 * whole lines of one chunk are decoded with one `TextDecoder` call and then
 * split (UTF-8 never holds byte 0x0A inside a character), not one call per
 * line; each line still decodes to exactly what decoding it alone would
 * give (a leading byte order mark is dropped, a bad line is `badUtf8`).
 *
 * A trailing `\r` is stripped; empty and whitespace-only lines are skipped.
 * A line longer than `maxFrameBytes` yields one `tooLarge` frame as soon as the
 * limit is passed; its bytes are dropped up to and including the next `\n`,
 * after which decoding resumes, so the connection stays usable.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { NdjsonDecoder } from "./_ndjson.ts";
 * const decoder = new NdjsonDecoder();
 * const bytes = new TextEncoder().encode('{"a":1}\n{"b"');
 * assert.deepEqual(decoder.push(bytes), [{ kind: "text", text: '{"a":1}' }]);
 * assert.deepEqual(decoder.push(new TextEncoder().encode(":2}\n")), [
 *   { kind: "text", text: '{"b":2}' },
 * ]);
 * ```
 */
export class NdjsonDecoder<F = Frame> {
  readonly #maxFrameBytes: number;
  readonly #make: FrameMaker<F>;
  /** Stateless (never `stream: true`): one for every decoder. */
  readonly #utf8 = UTF8;
  /** Bytes of the unfinished line, in order (each a private copy). */
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;
  /** True while skipping the rest of a line that was too large. */
  #skipping = false;

  /**
   * Makes a decoder for one byte stream.
   *
   * @param options.maxFrameBytes Largest line in bytes (default 1 MiB).
   * @throws {RangeError} when `maxFrameBytes` is not a positive integer.
   */
  constructor(options: NdjsonDecoderOptions<F> = {}) {
    const max = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    if (!Number.isSafeInteger(max) || max < 1) {
      throw new RangeError(
        `maxFrameBytes must be a positive integer number of bytes, got ${max}`,
      );
    }
    this.#maxFrameBytes = max;
    this.#make = options.make ?? (FRAMES as unknown as FrameMaker<F>);
  }

  /**
   * Adds received bytes and returns the frames they complete, in order.
   * The chunk is not kept: the caller may reuse its buffer afterwards.
   */
  push(chunk: Uint8Array): F[] {
    const frames: F[] = [];
    let start = 0;
    let fast = true;
    while (start < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, start);
      if (newline === -1) {
        this.#buffer(chunk.subarray(start), frames);
        break;
      }
      if (fast && !this.#skipping && this.#pendingBytes === 0) {
        const last = chunk.lastIndexOf(NEWLINE);
        if (this.#decodeRun(chunk, start, last, frames)) {
          start = last + 1;
          continue;
        }
        // Line by line for the rest of this chunk: trying again at each
        // line would scan the chunk once per line.
        fast = false;
      }
      const tail = chunk.subarray(start, newline);
      start = newline + 1;
      if (this.#skipping) {
        this.#skipping = false;
        continue;
      }
      const size = this.#pendingBytes + tail.length;
      if (size > this.#maxFrameBytes) {
        this.#reset();
        frames.push(this.#make.tooLarge(size));
        continue;
      }
      this.#decode(this.#join(tail), frames);
    }
    return frames;
  }

  /**
   * Whether a line has begun and has no `\n` yet (its bytes are buffered,
   * or it is too large and being skipped).
   */
  get partial(): boolean {
    return this.#pendingBytes > 0 || this.#skipping;
  }

  /**
   * Call once the stream has ended: returns the last line when it had no
   * final `\n` (as a frame, like {@link push} would), and resets the decoder.
   */
  end(): F[] {
    const frames: F[] = [];
    if (!this.#skipping && this.#pendingBytes > 0) {
      this.#decode(this.#join(new Uint8Array(0)), frames);
    }
    this.#reset();
    this.#skipping = false;
    return frames;
  }

  #buffer(rest: Uint8Array, frames: F[]): void {
    if (this.#skipping || rest.length === 0) return;
    const size = this.#pendingBytes + rest.length;
    if (size > this.#maxFrameBytes) {
      this.#reset();
      this.#skipping = true;
      frames.push(this.#make.tooLarge(size));
      return;
    }
    this.#pending.push(rest.slice());
    this.#pendingBytes = size;
  }

  /** The pending bytes followed by `tail`, as one array; clears pending. */
  #join(tail: Uint8Array): Uint8Array {
    if (this.#pending.length === 0) return tail;
    const line = new Uint8Array(this.#pendingBytes + tail.length);
    let offset = 0;
    for (const part of this.#pending) {
      line.set(part, offset);
      offset += part.length;
    }
    line.set(tail, offset);
    this.#reset();
    return line;
  }

  /**
   * Decodes the whole lines `chunk[start, last)` (`last` is the index of the
   * last newline) with one decoder call, when none is too large and all are
   * UTF-8; false (nothing decoded) otherwise, for the line by line path.
   */
  #decodeRun(
    chunk: Uint8Array,
    start: number,
    last: number,
    frames: F[],
  ): boolean {
    // No line of a run within the limit can pass it: no need to look.
    for (
      let from = start;
      last - start > this.#maxFrameBytes && from <= last;
    ) {
      const newline = chunk.indexOf(NEWLINE, from);
      if (newline - from > this.#maxFrameBytes) return false;
      from = newline + 1;
    }
    let text: string;
    try {
      text = this.#utf8.decode(chunk.subarray(start, last));
    } catch {
      return false;
    }
    for (let from = 0; from <= text.length;) {
      let end = text.indexOf("\n", from);
      if (end === -1) end = text.length;
      let line = text.slice(from, end);
      // Decoded alone, a line would lose a leading byte order mark (the
      // decoder dropped only the first line's).
      if (from > 0 && line.charCodeAt(0) === BYTE_ORDER_MARK) {
        line = line.slice(1);
      }
      this.#line(line, frames);
      from = end + 1;
    }
    return true;
  }

  #decode(line: Uint8Array, frames: F[]): void {
    if (line.length === 0) return;
    let text: string;
    try {
      text = this.#utf8.decode(line);
    } catch {
      frames.push(this.#make.badUtf8());
      return;
    }
    this.#line(text, frames);
  }

  /** A decoded line, without its `\n`: a frame unless it is blank. */
  #line(text: string, frames: F[]): void {
    if (text.length === 0) return;
    if (text.endsWith(CARRIAGE_RETURN)) text = text.slice(0, -1);
    const first = text.charCodeAt(0);
    // Most lines start with "{" or "[": no need to match the whole line.
    if (
      (first === 0x20 || first === 0x09 || first === 0x0d ||
        Number.isNaN(first)) && BLANK.test(text)
    ) {
      return;
    }
    frames.push(this.#make.text(text));
  }

  #reset(): void {
    this.#pending = [];
    this.#pendingBytes = 0;
  }
}

const encoder = new TextEncoder();

/**
 * Encodes a value as one NDJSON frame: its JSON text followed by `\n`, as
 * UTF-8 bytes. `JSON.stringify` never emits a raw newline, so the frame is
 * always a single line.
 *
 * @throws {TypeError} when the value cannot be encoded as JSON (a BigInt, a
 * cycle, or a value such as `undefined` or a function that has no JSON text).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { encodeFrame } from "./_ndjson.ts";
 * const bytes = encodeFrame({ jsonrpc: "2.0", method: "rpc.ping", id: 1 });
 * assert.equal(new TextDecoder().decode(bytes), '{"jsonrpc":"2.0","method":"rpc.ping","id":1}\n');
 * ```
 */
export function encodeFrame(value: unknown): Uint8Array {
  const text = JSON.stringify(value);
  if (text === undefined) {
    throw new TypeError(
      `cannot encode a value of type ${typeof value} as a JSON frame`,
    );
  }
  return encodeTextFrame(text);
}

/**
 * Encodes an already serialized JSON text as one NDJSON frame (`text` + `\n`,
 * UTF-8). The text must not contain a raw newline; output of `JSON.stringify`
 * never does.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { encodeTextFrame } from "./_ndjson.ts";
 * assert.equal(encodeTextFrame('{"a":1}').length, 8);
 * ```
 */
export function encodeTextFrame(text: string): Uint8Array {
  return encoder.encode(text + "\n");
}
