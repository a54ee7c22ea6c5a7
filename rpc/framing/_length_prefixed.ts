/**
 * Length-prefixed framing: each frame is a 4-byte big-endian length, then
 * that many bytes (private: not part of the public API).
 *
 * @module
 */

/** What {@link LengthPrefixedDecoder} found. */
export type Chunk =
  /** A whole frame's payload (possibly empty). */
  | { kind: "frame"; payload: Uint8Array }
  /** A length above the limit: nothing more is read. */
  | { kind: "tooLarge"; length: number }
  /** The input did not start with the expected preamble: nothing more is read. */
  | { kind: "badPreamble"; received: Uint8Array }
  /**
   * The input ended inside the preamble, a length or a frame: `received`
   * bytes of the `length` announced (undefined: the length was not whole).
   */
  | { kind: "truncated"; received: number; length: number | undefined };

/** Bytes of the length prefix. */
export const PREFIX_BYTES = 4;

/**
 * Splits a byte stream into length-prefixed frames, after an optional
 * preamble. It buffers at most one frame, never more than `maxFrameBytes`:
 * a length above the limit is reported as soon as its 4 bytes arrive, and
 * from then on (as after a bad preamble) input is dropped unread.
 */
export class LengthPrefixedDecoder {
  readonly #maxFrameBytes: number;
  readonly #preamble: Uint8Array;
  /** How many bytes of the preamble have been matched. */
  #preambleAt = 0;
  readonly #prefix = new Uint8Array(PREFIX_BYTES);
  readonly #prefixView = new DataView(this.#prefix.buffer);
  #prefixAt = 0;
  /** The length of the frame being read, once its prefix is whole. */
  #length: number | undefined;
  #parts: Uint8Array[] = [];
  #partBytes = 0;
  #stopped = false;

  constructor(maxFrameBytes: number, preamble: Uint8Array) {
    this.#maxFrameBytes = maxFrameBytes;
    this.#preamble = preamble;
  }

  /**
   * Adds received bytes; returns what they complete. A frame's payload may
   * be a view of `chunk`: use it before the chunk's buffer is reused.
   */
  push(chunk: Uint8Array): Chunk[] {
    const found: Chunk[] = [];
    if (this.#stopped) return found;
    let i = 0;
    const preamble = this.#preamble;
    while (this.#preambleAt < preamble.length && i < chunk.length) {
      if (chunk[i] !== preamble[this.#preambleAt]) {
        this.#stopped = true;
        const received = new Uint8Array(this.#preambleAt + 1);
        received.set(preamble.subarray(0, this.#preambleAt));
        received[this.#preambleAt] = chunk[i];
        found.push({ kind: "badPreamble", received });
        return found;
      }
      this.#preambleAt++;
      i++;
    }
    while (i < chunk.length) {
      if (this.#length === undefined) {
        while (this.#prefixAt < PREFIX_BYTES && i < chunk.length) {
          this.#prefix[this.#prefixAt++] = chunk[i++];
        }
        if (this.#prefixAt < PREFIX_BYTES) break;
        this.#prefixAt = 0;
        const length = this.#prefixView.getUint32(0);
        if (length > this.#maxFrameBytes) {
          this.#stopped = true;
          found.push({ kind: "tooLarge", length });
          return found;
        }
        this.#length = length;
      }
      const length = this.#length;
      const wanted = length - this.#partBytes;
      if (this.#partBytes === 0 && chunk.length - i >= wanted) {
        found.push({ kind: "frame", payload: chunk.subarray(i, i + wanted) });
        i += wanted;
        this.#length = undefined;
        continue;
      }
      const take = Math.min(wanted, chunk.length - i);
      if (take === 0) break;
      this.#parts.push(chunk.slice(i, i + take));
      this.#partBytes += take;
      i += take;
      if (this.#partBytes === length) {
        found.push({ kind: "frame", payload: this.#join(length) });
      }
    }
    return found;
  }

  /**
   * Whether a preamble, length or frame has begun and is not whole (false
   * once the decoder has stopped).
   */
  get partial(): boolean {
    if (this.#stopped) return false;
    return (this.#preambleAt > 0 &&
      this.#preambleAt < this.#preamble.length) ||
      this.#prefixAt > 0 || this.#length !== undefined;
  }

  /** The input has ended: reports a partial preamble, length or frame. */
  end(): Chunk[] {
    if (this.#stopped) return [];
    this.#stopped = true;
    const inPreamble = this.#preambleAt > 0 &&
      this.#preambleAt < this.#preamble.length;
    if (inPreamble || this.#prefixAt > 0) {
      return [{
        kind: "truncated",
        received: inPreamble ? this.#preambleAt : this.#prefixAt,
        length: undefined,
      }];
    }
    if (this.#length !== undefined) {
      return [{
        kind: "truncated",
        received: this.#partBytes,
        length: this.#length,
      }];
    }
    return [];
  }

  #join(length: number): Uint8Array {
    const payload = new Uint8Array(length);
    let offset = 0;
    for (const part of this.#parts) {
      payload.set(part, offset);
      offset += part.length;
    }
    this.#parts = [];
    this.#partBytes = 0;
    this.#length = undefined;
    return payload;
  }
}
