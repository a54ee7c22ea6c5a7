/**
 * Bytes on the wire of a benchmark's connections (private to `bench/`).
 *
 * @module
 */

import { denoTcpDialer } from "../adapter/deno/tcp.ts";
import type { ByteStream, Dialer } from "../rpc/transport/transport.ts";

/** Bytes a {@link countingDialer}'s streams wrote and read so far. */
export interface WireCounts {
  written: number;
  read: number;
}

/**
 * The Deno TCP dialer, adding the bytes of every stream it opens to
 * `counts` (what the client wrote and read on its sockets, framing
 * included).
 */
export function countingDialer(counts: WireCounts): Dialer {
  return async (url, options) => {
    const stream = await denoTcpDialer(url, options);
    const writer = stream.writable.getWriter();
    const counted: ByteStream = {
      readable: stream.readable.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            counts.read += chunk.length;
            controller.enqueue(chunk);
          },
        }),
      ),
      writable: new WritableStream<Uint8Array>({
        write(chunk) {
          counts.written += chunk.length;
          return writer.write(chunk);
        },
      }),
      close: () => stream.close(),
    };
    return counted;
  };
}
