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
} from "../../rpc/transport.ts";

/** Chunks the readable side buffers before the socket is paused (back-pressure). */
const READ_HIGH_WATER_CHUNKS = 16;

/**
 * Wraps a connected `node:net` socket as a {@link ByteStream}: reads pause
 * the socket while the reader is behind, writes wait for `drain`, and
 * `close()` destroys the socket (idempotent).
 *
 * @param socket a connected socket (its `'connect'` has fired, or it came
 * from a server's `'connection'` event).
 * @returns the socket's byte stream; chunks are plain `Uint8Array` views.
 */
export function fromNodeSocket(socket: Socket): ByteStream {
  let closed = false;
  let ended = false;
  const close = () => {
    if (closed) return;
    closed = true;
    socket.destroy();
  };
  const readable = new ReadableStream<Uint8Array>({
    start(controller) {
      socket.on("data", (chunk: Uint8Array) => {
        if (ended) return;
        controller.enqueue(
          new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength),
        );
        if ((controller.desiredSize ?? 1) <= 0) socket.pause();
      });
      const finish = (error?: unknown) => {
        if (ended) return;
        ended = true;
        try {
          if (error === undefined || closed) controller.close();
          else controller.error(error);
        } catch {
          // The reader let go of the stream already.
        }
      };
      socket.on("end", () => finish());
      socket.on("close", () => finish());
      socket.on("error", (error) => finish(error));
    },
    pull() {
      socket.resume();
    },
    cancel() {
      ended = true;
      close();
    },
  }, new CountQueuingStrategy({ highWaterMark: READ_HIGH_WATER_CHUNKS }));
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      if (closed || socket.destroyed) {
        throw new Error("the socket is closed");
      }
      if (socket.write(chunk)) return;
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
    },
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
  return { readable, writable, close, remoteAddress };
}

/**
 * Opens a TCP connection with `node:net` (Nagle's algorithm off). The
 * default dialer of `@rafter/rpc/node`.
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
