/**
 * A connected `node:net` socket (or `node:tls` one, which is a `net.Socket`)
 * as a {@link ByteStream}: shared by the Node adapter and the TLS layer
 * (`node:tls` serves and dials TLS on Deno too).
 *
 * @module
 */

import type { Socket } from "node:net";
import {
  type ByteStream,
  formatTcpUrl,
} from "../../rpc/transport/transport.ts";
import { directStream } from "../../rpc/transport/conn_stream.ts";

/** Chunks the readable side buffers before the socket is paused (back-pressure). */
const READ_HIGH_WATER_CHUNKS = 16;

/**
 * Wraps a connected `node:net` socket as a {@link ByteStream}: reads pause
 * the socket while the reader is behind (16 chunks), writes wait for
 * `drain`, and `close()` destroys the socket (idempotent). Rafter's own
 * connections read and write the socket directly, without the Web streams.
 *
 * @param socket a connected socket (its `'connect'` has fired, or it came
 * from a server's `'connection'` event).
 * @returns the socket's byte stream; chunks are plain `Uint8Array` views.
 */
export function fromNodeSocket(socket: Socket): ByteStream {
  let closed = false;
  let ended = false;
  let failure: { error: unknown } | undefined;
  const chunks: Uint8Array[] = [];
  let waiting:
    | { resolve(chunk: Uint8Array | null): void; reject(error: unknown): void }
    | undefined;
  const close = () => {
    if (closed) return;
    closed = true;
    socket.destroy();
  };
  socket.on("data", (chunk: Uint8Array) => {
    if (ended) return;
    const view = new Uint8Array(
      chunk.buffer,
      chunk.byteOffset,
      chunk.byteLength,
    );
    const reader = waiting;
    if (reader !== undefined) {
      waiting = undefined;
      reader.resolve(view);
      return;
    }
    chunks.push(view);
    if (chunks.length >= READ_HIGH_WATER_CHUNKS) socket.pause();
  });
  const finish = (error?: unknown) => {
    if (ended) return;
    ended = true;
    if (error !== undefined && !closed) failure = { error };
    const reader = waiting;
    waiting = undefined;
    if (reader === undefined) return;
    if (failure !== undefined) reader.reject(failure.error);
    else reader.resolve(null);
  };
  socket.on("end", () => finish());
  socket.on("close", () => finish());
  socket.on("error", (error) => finish(error));
  const read = (): Promise<Uint8Array | null> => {
    const chunk = chunks.shift();
    if (chunk !== undefined) {
      if (chunks.length < READ_HIGH_WATER_CHUNKS && !ended) socket.resume();
      return Promise.resolve(chunk);
    }
    if (ended) {
      return failure === undefined
        ? Promise.resolve(null)
        : Promise.reject(failure.error);
    }
    socket.resume();
    return new Promise((resolve, reject) => waiting = { resolve, reject });
  };
  const cancel = (): Promise<void> => {
    finish();
    close();
    return Promise.resolve();
  };
  const write = (chunk: Uint8Array): Promise<void> => {
    if (closed || socket.destroyed) {
      return Promise.reject(new Error("the socket is closed"));
    }
    if (socket.write(chunk)) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        socket.off("drain", done);
        socket.off("close", gone);
        resolve();
      };
      const gone = () => {
        socket.off("drain", done);
        socket.off("close", gone);
        reject(new Error("the socket closed while writing"));
      };
      socket.on("drain", done);
      socket.on("close", gone);
    });
  };
  const writable = new WritableStream<Uint8Array>({
    write,
    close() {
      socket.end();
    },
    abort() {
      close();
    },
  });
  const remoteAddress = socket.remoteAddress === undefined
    ? undefined
    : formatTcpUrl({
      hostname: socket.remoteAddress,
      port: socket.remotePort ?? 0,
    }).slice("tcp://".length);
  return directStream({ read, write, cancel }, close, remoteAddress, writable);
}

/** What a `node:net`/`node:tls` server's listener hands to `serveListener`: accepted items, queued until asked for. */
export interface AcceptQueue<T> {
  /** Queues an accepted item (or hands it to a waiting {@link accept}); destroys it once closed. */
  push(item: T): void;
  /** The next accepted item as a stream, or null once closed. */
  accept(): Promise<ByteStream | null>;
  /** Destroys what is queued, wakes a waiting accept with null. Idempotent. */
  close(): void;
  /** Whether {@link close} was called. */
  readonly closed: boolean;
}

/**
 * A queue between a server's connection events and `accept()`: items are
 * wrapped as streams (`wrap`) when taken, and destroyed (`destroy`) when
 * the queue closes first.
 */
export function acceptQueue<T>(
  wrap: (item: T) => ByteStream,
  destroy: (item: T) => void,
): AcceptQueue<T> {
  const queued: T[] = [];
  let waiting: ((stream: ByteStream | null) => void) | null = null;
  let closed = false;
  return {
    get closed() {
      return closed;
    },
    push(item) {
      if (closed) {
        destroy(item);
        return;
      }
      if (waiting !== null) {
        const wake = waiting;
        waiting = null;
        wake(wrap(item));
      } else {
        queued.push(item);
      }
    },
    accept() {
      if (queued.length > 0) return Promise.resolve(wrap(queued.shift()!));
      if (closed) return Promise.resolve(null);
      return new Promise((resolve) => {
        waiting = resolve;
      });
    },
    close() {
      if (closed) return;
      closed = true;
      for (const item of queued.splice(0)) destroy(item);
      const wake = waiting;
      waiting = null;
      wake?.(null);
    },
  };
}

/**
 * Opens a socket with `open` and resolves with `wrap` of it once it has
 * emitted `event` (`"connect"`, or `"secureConnect"` for TLS); rejects
 * with `explain` of its error, or with `signal`'s reason (the socket is
 * then destroyed).
 */
export function openSocket<S extends Socket>(
  open: () => S,
  event: "connect" | "secureConnect",
  signal: AbortSignal | undefined,
  wrap: (socket: S) => ByteStream,
  explain: (error: Error) => unknown = (error) => error,
): Promise<ByteStream> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<ByteStream>((resolve, reject) => {
    const socket = open();
    const onAbort = () => {
      socket.destroy();
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    socket.once("error", (error) => {
      signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      reject(explain(error));
    });
    socket.once(event, () => {
      signal?.removeEventListener("abort", onAbort);
      socket.removeAllListeners("error");
      resolve(wrap(socket));
    });
  });
}
