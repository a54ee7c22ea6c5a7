/**
 * A {@link ByteStream} over a connection with `read(buffer)` and
 * `write(bytes)` (a `Deno.Conn`, by shape only: no Deno types here), and
 * the direct I/O that lets Rafter's own connections skip its Web streams
 * (private: not part of the public API).
 *
 * A Web stream costs a few promises and queue operations per chunk on each
 * side; on a sequential call that is four stream operations per round trip,
 * which a profile showed as several µs. A stream made here carries, under
 * {@link DIRECT}, functions that read and write the connection itself;
 * `RpcConnection` and the server use them when present, and the Web streams
 * stay for everyone else (never use both on one stream).
 *
 * @module
 */

import type { ByteStream } from "./transport.ts";

/**
 * The read buffer of a connection adapts to what arrives: it starts at
 * {@link MIN_READ_BYTES}, doubles after each read that fills it (up to
 * {@link MAX_READ_BYTES}), and falls back to the smallest power of two
 * above a short read. An idle connection, whose pending read holds its
 * buffer, then costs 1 KiB rather than 64 KiB (issue #16: 4,000 idle
 * connections took a registry node from 64 to 331 MiB).
 */
export const MIN_READ_BYTES = 1024;
/** Largest chunk one read returns: 64 KiB. */
export const MAX_READ_BYTES = 64 * 1024;

/**
 * The size of the next read buffer after a read of `count` bytes into one of
 * `size` bytes (see {@link MIN_READ_BYTES}).
 */
export function nextReadBytes(size: number, count: number): number {
  if (count >= size) return Math.min(size * 2, MAX_READ_BYTES);
  let next = MIN_READ_BYTES;
  while (next <= count) next *= 2;
  return Math.min(next, size);
}

/** The property of a {@link ByteStream} that holds its {@link DirectIo}. */
export const DIRECT: unique symbol = Symbol("rafter.directIo");

/** Reading and writing a connection without its Web streams. */
export interface DirectIo {
  /**
   * The next chunk (a fresh copy of at most 64 KiB, the caller's to keep;
   * at most 1 KiB while the peer sends little, see {@link MIN_READ_BYTES}),
   * or null once the peer ended its side or the stream was closed. Rejects
   * with the connection's error. One read at a time.
   */
  read(): Promise<Uint8Array | null>;
  /** Writes all of `chunk`; rejects with the connection's error. */
  write(chunk: Uint8Array): Promise<void>;
  /**
   * Closes the connection (as `close()` does); resolves once a pending read
   * is over. Never rejects.
   */
  cancel(): Promise<void>;
}

/** The direct I/O of `stream`, when it has one. */
export function directOf(stream: ByteStream): DirectIo | undefined {
  return (stream as { [DIRECT]?: DirectIo })[DIRECT];
}

/**
 * Reading a Web stream as {@link DirectIo} does: the next chunk or null,
 * and a cancel that never rejects. Locks `readable`.
 */
export function streamReading(
  readable: ReadableStream<Uint8Array>,
): [read: () => Promise<Uint8Array | null>, cancel: () => Promise<void>] {
  const reader = readable.getReader();
  return [
    async () => {
      const { done, value } = await reader.read();
      return done ? null : value;
    },
    () => reader.cancel().catch(() => {}),
  ];
}

/** What {@link streamOfConn} needs of a connection (a `Deno.Conn` has it). */
export interface ReadWriteConn {
  /** Reads into `buffer`: the count, or null at the end. */
  read(buffer: Uint8Array): Promise<number | null>;
  /** Writes some of `bytes`: the count written. */
  write(bytes: Uint8Array): Promise<number>;
  /** Closes both directions. */
  close(): void;
}

/**
 * Wraps `conn` as a {@link ByteStream} with {@link DIRECT} I/O.
 *
 * The readable side does not close the connection when the peer ends its
 * side, so responses can still be written after a client half-closes
 * (`nc -N`). It reads only when asked (no read-ahead), which keeps TCP
 * backpressure intact; each chunk is a fresh copy of at most 64 KiB, read
 * into a buffer that grows with what arrives (1 KiB for a quiet peer).
 * `close()` closes both directions, may be called any number of times, and
 * ends a pending read. Cancelling the readable also closes the connection,
 * and its promise settles once the pending read is over.
 */
export function streamOfConn(
  conn: ReadWriteConn,
  remoteAddress: string | undefined,
): ByteStream {
  let closed = false;
  let reading: Promise<unknown> = Promise.resolve();
  let buffer = new Uint8Array(MIN_READ_BYTES);
  const close = () => {
    if (closed) return;
    closed = true;
    try {
      conn.close();
    } catch {
      // Already closed.
    }
  };
  const read = async (): Promise<Uint8Array | null> => {
    const pending = conn.read(buffer);
    reading = pending.catch(() => {});
    let count: number | null;
    try {
      count = await pending;
    } catch (error) {
      if (closed) return null;
      throw error;
    }
    if (count === null) return null;
    const chunk = buffer.slice(0, count);
    const size = nextReadBytes(buffer.length, count);
    if (size !== buffer.length) buffer = new Uint8Array(size);
    return chunk;
  };
  const write = async (chunk: Uint8Array): Promise<void> => {
    let offset = 0;
    while (offset < chunk.length) {
      offset += await conn.write(chunk.subarray(offset));
    }
  };
  const cancel = async (): Promise<void> => {
    close();
    await reading;
  };
  return directStream(
    { read, write, cancel },
    close,
    remoteAddress,
    () => new WritableStream<Uint8Array>({ write }),
  );
}

/**
 * A {@link ByteStream} whose Web streams are built on `direct`, which it
 * carries under {@link DIRECT}: the readable reads only when asked (no
 * read-ahead), and cancelling it is `direct.cancel()`. The readable, and
 * the writable when given as a function, are made when first used.
 */
export function directStream(
  direct: DirectIo,
  close: () => void,
  remoteAddress: string | undefined,
  writable: WritableStream<Uint8Array> | (() => WritableStream<Uint8Array>),
): ByteStream {
  return new DirectStream(direct, close, remoteAddress, writable);
}

/**
 * The stream {@link directStream} makes: a class, not an object literal
 * with getters (which V8 keeps as a dictionary, a few hundred bytes more
 * per idle connection).
 */
class DirectStream implements ByteStream {
  readonly [DIRECT]: DirectIo;
  readonly close: () => void;
  readonly remoteAddress: string | undefined;
  #readable: ReadableStream<Uint8Array> | undefined;
  #writable: WritableStream<Uint8Array> | (() => WritableStream<Uint8Array>);

  constructor(
    direct: DirectIo,
    close: () => void,
    remoteAddress: string | undefined,
    writable: WritableStream<Uint8Array> | (() => WritableStream<Uint8Array>),
  ) {
    this[DIRECT] = direct;
    this.close = close;
    this.remoteAddress = remoteAddress;
    this.#writable = writable;
  }

  /** Made when first asked for: Rafter's own connections never use it. */
  get readable(): ReadableStream<Uint8Array> {
    return this.#readable ??= readableOf(this[DIRECT]);
  }

  get writable(): WritableStream<Uint8Array> {
    if (typeof this.#writable === "function") this.#writable = this.#writable();
    return this.#writable;
  }
}

/** A pull-only readable over `direct` (no read-ahead). */
function readableOf(direct: DirectIo): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: Uint8Array | null;
      try {
        chunk = await direct.read();
      } catch (error) {
        controller.error(error);
        return;
      }
      if (chunk === null) controller.close();
      else controller.enqueue(chunk);
    },
    cancel: () => direct.cancel(),
  }, { highWaterMark: 0 });
}
