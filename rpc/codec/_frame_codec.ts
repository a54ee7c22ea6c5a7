/**
 * The seam between a connection and its wire codec (private: not part of
 * the public API). A codec turns bytes into decoded messages and messages
 * into frames; everything above it (dispatch, deadlines, cancellation,
 * batches) works on decoded values and never looks at bytes.
 *
 * @module
 */

import type { ErrorObject } from "../errors.ts";
import type { RequestId } from "../message.ts";
import type { Codec } from "./codec.ts";
import type { Frame } from "../framing/_frame_writer.ts";

/** One frame read from a connection, decoded. */
export interface InboundFrame {
  /**
   * The message, or an array for a batch, as JSON would give it: objects,
   * arrays, strings, finite numbers, booleans, null, and `bigint` ids. A
   * `Refusal` stands for a message (or a batch member) that must be
   * answered with an error and not run; the whole frame is a `Refusal`
   * when it could not be read at all.
   */
  value: unknown;
  /** How many bytes of input it holds, for the bound on waiting frames. */
  bytes: number;
  /** The frame was longer than `maxFrameBytes`. */
  tooLarge?: boolean;
  /**
   * Set when the stream cannot go on after this frame (the codec lost its
   * framing): answer it, read nothing more, close. The text says why.
   */
  fatal?: string;
}

/** Splits one connection's bytes into frames and decodes them. */
export interface FrameDecoder {
  /**
   * Adds received bytes and returns the frames they complete, in order. The
   * chunk is not kept: the caller may reuse its buffer afterwards.
   */
  push(chunk: Uint8Array): InboundFrame[];
  /** The stream has ended: the frames left (an error for a partial one). */
  end(): InboundFrame[];
  /**
   * Whether a frame has begun and is not yet whole (bytes of it are
   * buffered, or an oversized line is being skipped): the server's
   * `frameTimeoutMs` runs while it is.
   */
  readonly partial: boolean;
}

/**
 * Builds responses in a codec's own form (a "part": JSON text for NDJSON, a
 * plain value for CBOR), so that a batch joins its members' parts.
 */
export interface ReplyEncoder<P> {
  /**
   * A success response.
   *
   * @throws when `result` has no JSON form (a `bigint`, a cycle).
   */
  result(id: RequestId, result: unknown): P;
  /**
   * An error response.
   *
   * @throws when `error.data` has no JSON form.
   */
  error(id: RequestId, error: ErrorObject): P;
  /** A batch response holding `replies`, in order. */
  batch(replies: P[]): P;
}

/** A wire codec: how messages become frames and frames messages. */
export interface FrameCodec<P = unknown> extends ReplyEncoder<P> {
  /** Its name, as the `codec` option spells it. */
  readonly name: Codec;
  /** Bytes a client writes once, before its first frame (none for NDJSON). */
  readonly preamble: Uint8Array;
  /**
   * A request or notification object as a part.
   *
   * @throws {TypeError} when a value in it has no JSON form.
   */
  message(value: Record<string, unknown>): P;
  /**
   * One frame holding `part`, for a `FrameWriter`: its bytes, or (NDJSON)
   * its text line without the `\n`, which the writer encodes together with
   * the other lines of its write.
   */
  frame(part: P): Frame;
  /**
   * A decoder for one connection's input. `preamble`: the input starts with
   * this codec's {@link preamble} (the server's side).
   */
  decoder(options: { maxFrameBytes: number; preamble: boolean }): FrameDecoder;
}
