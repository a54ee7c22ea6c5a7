/**
 * Node adapter: `node:net` sockets as {@link ByteStream}s, and the dialer
 * that opens them.
 *
 * @module
 */

import { connect as netConnect, type Socket } from "node:net";
import {
  type ByteStream,
  type Dialer,
  type DialerOptions,
  formatTcpUrl,
  parseTcpUrl,
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

/**
 * Opens a TCP connection with `node:net` (Nagle's algorithm off): what
 * `connect()` and `dial()` of `@rafter/rpc/node` use unless given another.
 *
 * @param url `tcp://host:port`.
 * @param options `signal` aborts the attempt (the socket is destroyed).
 * @throws {TypeError} for a malformed URL.
 * @throws the socket's error (e.g. `ECONNREFUSED`) or the signal's reason.
 */
export const nodeTcpDialer: Dialer = (
  url: string,
  options?: DialerOptions,
): Promise<ByteStream> => {
  const { hostname, port } = parseTcpUrl(url);
  const signal = options?.signal;
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<ByteStream>((resolve, reject) => {
    const socket = netConnect({ host: hostname, port, noDelay: true });
    const onAbort = () => {
      socket.destroy();
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    socket.once("error", (error) => {
      signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      reject(error);
    });
    socket.once("connect", () => {
      signal?.removeEventListener("abort", onAbort);
      socket.removeAllListeners("error");
      resolve(fromNodeSocket(socket));
    });
  });
};
