/**
 * A serializing, coalescing writer of encoded frames, shared by the server
 * and client sides of a connection.
 *
 * @module
 */

/** Options of {@link FrameWriter}. */
export interface FrameWriterOptions {
  /** Called once, with the error, when a write to the stream fails. */
  onError?(error: unknown): void;
  /**
   * Called after each write the stream accepted, once its bytes are no
   * longer counted in `queuedBytes` (a sign that the peer reads).
   */
  onWritten?(): void;
  /**
   * Largest number of bytes joined into one write, in bytes (default 256 KiB).
   * A single larger frame is still written whole.
   */
  maxBatchBytes?: number;
  /**
   * Whether a text line counts as its UTF-8 bytes (the default), or as its
   * length in UTF-16 code units (false): exact for ASCII text and never
   * more than its bytes, without scanning each line for other characters.
   * For a writer whose `queuedBytes` nobody reads (a client's): the count
   * then only decides where batches split (`maxBatchBytes`).
   * @default true
   */
  exactTextBytes?: boolean;
}

const DEFAULT_MAX_BATCH_BYTES = 256 * 1024;

/**
 * Frames after which a batch is handed to the stream at once, not at the
 * end of the turn: a server answering 64 pipelined calls read in one chunk
 * sends the first 16 answers while it makes the rest, so the client (on
 * another core) decodes them meanwhile instead of waiting for all 64.
 */
export const EARLY_WRITE_FRAMES = 16;

/**
 * One frame: its bytes, or a text line (a string without its `\n`, written
 * as UTF-8 followed by `\n`).
 */
export type Frame = Uint8Array | string;

interface Batch {
  /** Its number: batches are numbered 1, 2, … in the order they are made. */
  seq: number;
  frames: Frame[];
  /** Whether every frame is a text line. */
  text: boolean;
  bytes: number;
  promise: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * Writes frames to a `WritableStream` one write at a time, in the order they
 * were queued. Frames queued in the same tick, or while an earlier write is
 * still in progress, are joined into a single write, so many small responses
 * cost one system call; once {@linkcode EARLY_WRITE_FRAMES} frames wait and
 * no write is in progress, they go at once, and the rest of the turn's
 * frames join the next write. Text lines (NDJSON) are kept as strings until then
 * and encoded together, with one `TextEncoder` call per write, not one per
 * line (what a profile of the server showed).
 *
 * After a write fails the writer is failed for good: `onError` is called once,
 * the frames still queued are dropped, and later `write` calls reject with the
 * same error.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { FrameWriter } from "./_frame_writer.ts";
 * const chunks: Uint8Array[] = [];
 * const writer = new FrameWriter(new WritableStream({ write(c) { chunks.push(c); } }));
 * const encoder = new TextEncoder();
 * await Promise.all([writer.write(encoder.encode("a\n")), writer.write(encoder.encode("b\n"))]);
 * assert.equal(chunks.length, 1); // both frames went out in one write
 * assert.equal(new TextDecoder().decode(chunks[0]), "a\nb\n");
 * ```
 */
export class FrameWriter {
  readonly #write: (chunk: Uint8Array) => Promise<void>;
  readonly #onError?: (error: unknown) => void;
  readonly #onWritten?: () => void;
  readonly #maxBatchBytes: number;
  readonly #exactTextBytes: boolean;
  #queue: Batch[] = [];
  #queuedBytes = 0;
  /** Resolves when the queue has drained; null while it is empty. */
  #drained: Promise<void> | null = null;
  #resolveDrained: () => void = () => {};
  /** Whether the write loop runs (a write is with the stream). */
  #running = false;
  /** Whether a microtask will start the write loop. */
  #scheduled = false;
  #failed = false;
  #error: unknown = undefined;
  /** Batches made so far (the last one's number). */
  #made = 0;
  /** The number of the last batch handed to the stream (0: none yet). */
  #handed = 0;

  /**
   * Locks `writable` for the writer's lifetime; the writer never closes it
   * (close the underlying stream instead). Or, instead of a stream, a
   * function that writes one chunk (called one chunk at a time).
   */
  constructor(
    writable:
      | WritableStream<Uint8Array>
      | ((chunk: Uint8Array) => Promise<void>),
    options: FrameWriterOptions = {},
  ) {
    if (typeof writable === "function") {
      this.#write = writable;
    } else {
      const writer = writable.getWriter();
      this.#write = (chunk) => writer.write(chunk);
      // A failing stream also rejects `ready` and `closed`; nobody waits on
      // them.
      writer.closed.catch(() => {});
    }
    this.#onError = options.onError;
    this.#onWritten = options.onWritten;
    this.#maxBatchBytes = options.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES;
    this.#exactTextBytes = options.exactTextBytes ?? true;
  }

  /**
   * Bytes queued and not yet accepted by the stream (the frame being written
   * counts until the stream takes it). A server uses it to bound what a slow
   * reader makes it buffer.
   */
  get queuedBytes(): number {
    return this.#queuedBytes;
  }

  /**
   * The number of the batch the last frame queued joined (batches are
   * numbered from 1 in order): a frame of batch `n` has been handed to
   * the stream once {@link handedThrough} is `n` or more, and never left
   * this side while it is less.
   */
  get lastBatch(): number {
    return this.#made;
  }

  /** The number of the last batch handed to the stream (every earlier one was too). */
  get handedThrough(): number {
    return this.#handed;
  }

  /** Whether a write has failed; if so every later `write` rejects. */
  get failed(): boolean {
    return this.#failed;
  }

  /**
   * Queues one frame: encoded bytes, or a text line (a string holding no
   * raw `\n`; it is written as UTF-8 followed by `\n`, and counts as that
   * many bytes). It is handed to the stream in a later microtask together
   * with every other frame queued by then.
   *
   * @returns a promise that resolves when the stream has accepted the write
   * holding the frame, and rejects with the stream's error if that write (or
   * an earlier one) failed. Ignoring the promise is safe: a rejection is never
   * reported as unhandled.
   */
  write(frame: Frame): Promise<void> {
    if (this.#failed) return this.#rejected();
    const text = typeof frame === "string";
    const bytes = text
      ? (this.#exactTextBytes ? utf8Length(frame) : frame.length) + 1
      : frame.length;
    let batch = this.#queue.at(-1);
    if (
      batch === undefined ||
      (batch.bytes > 0 && batch.bytes + bytes > this.#maxBatchBytes)
    ) {
      batch = newBatch(++this.#made);
      this.#queue.push(batch);
    }
    batch.frames.push(frame);
    batch.text &&= text;
    batch.bytes += bytes;
    this.#queuedBytes += bytes;
    if (this.#drained === null) {
      this.#drained = new Promise<void>((resolve) => {
        this.#resolveDrained = resolve;
      });
    }
    if (!this.#running) {
      if (batch.frames.length >= EARLY_WRITE_FRAMES) {
        // Enough for one write now; what follows joins the next one.
        this.#flush();
      } else if (!this.#scheduled) {
        this.#scheduled = true;
        queueMicrotask(() => {
          this.#scheduled = false;
          if (!this.#running) this.#flush();
        });
      }
    }
    return batch.promise;
  }

  /**
   * Resolves once nothing is queued or being written (whether the writes
   * succeeded or failed). Never rejects.
   */
  async idle(): Promise<void> {
    while (this.#drained !== null) await this.#drained;
  }

  /** The write loop: one batch at a time until the queue is empty. */
  async #flush(): Promise<void> {
    this.#running = true;
    for (let batch = this.#queue.shift(); batch; batch = this.#queue.shift()) {
      this.#handed = batch.seq;
      try {
        await this.#write(join(batch));
        this.#queuedBytes -= batch.bytes;
        batch.resolve();
        this.#onWritten?.();
      } catch (error) {
        batch.reject(error);
        this.#fail(error);
      }
    }
    // The queue is empty here (no await since the last shift).
    this.#running = false;
    const resolve = this.#resolveDrained;
    this.#drained = null;
    resolve();
  }

  #fail(error: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#error = error;
    for (const batch of this.#queue) batch.reject(error);
    this.#queue = [];
    this.#queuedBytes = 0;
    try {
      this.#onError?.(error);
    } catch {
      // The owner's callback must not break the writer.
    }
  }

  #rejected(): Promise<void> {
    const promise = Promise.reject(this.#error);
    promise.catch(() => {});
    return promise;
  }
}

function newBatch(seq: number): Batch {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => {});
  return { seq, frames: [], text: true, bytes: 0, promise, resolve, reject };
}

const encoder = new TextEncoder();

/** The bytes of a batch, as one array. */
function join({ frames, text }: Batch): Uint8Array {
  if (text) {
    // One encoding for all the lines: `join` builds one flat string.
    frames.push("");
    return encoder.encode(frames.join("\n"));
  }
  if (frames.length === 1 && typeof frames[0] !== "string") return frames[0];
  // Counted here, exactly: the batch's count may be UTF-16 units.
  let bytes = 0;
  for (const frame of frames) {
    bytes += typeof frame === "string" ? utf8Length(frame) + 1 : frame.length;
  }
  const joined = new Uint8Array(bytes);
  let offset = 0;
  for (const frame of frames) {
    if (typeof frame === "string") {
      offset += encoder.encodeInto(frame, joined.subarray(offset)).written;
      joined[offset++] = 0x0a;
    } else {
      joined.set(frame, offset);
      offset += frame.length;
    }
  }
  return joined;
}

/** Matches a string holding any character outside ASCII. */
const NON_ASCII = /[\u0080-\uffff]/;

/**
 * The length of `text` in UTF-8, in bytes, as `TextEncoder` writes it (a
 * lone surrogate becomes U+FFFD, 3 bytes).
 */
export function utf8Length(text: string): number {
  if (!NON_ASCII.test(text)) return text.length;
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}
