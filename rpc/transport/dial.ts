/**
 * Opening a client connection to an endpoint URL.
 *
 * @module
 */

import {
  RpcConnection,
  type RpcConnectionOptions,
} from "../client/connection.ts";
import { ConnectionError, messageOf } from "../errors.ts";
import type { ByteStream, Dialer } from "./transport.ts";
import { defaultDialer } from "./default_dialer.ts";

/** Default time allowed to open a connection, everywhere in Rafter: 2_000 ms. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 2_000;

/** Options of {@link dial}. */
export interface DialOptions extends RpcConnectionOptions {
  /**
   * Opens the byte stream. Default: {@link defaultDialer} (the one set with
   * `setDefaultDialer()`, else `Deno.connect` found by feature detection;
   * `dial` of `@rafter/rpc/node` passes Node's).
   */
  dialer?: Dialer;
  /** Time allowed to open the connection, in ms. @default 2_000 */
  connectTimeoutMs?: number;
}

/**
 * Opens a multiplexed JSON-RPC connection to an endpoint.
 *
 * @param url Endpoint URL, e.g. `tcp://127.0.0.1:7001` (the dialer decides
 * which forms it accepts). Also used in the connection's error messages unless
 * `options.url` is given.
 * @throws {ConnectionError} `written: false`, message `cannot connect to <url>:
 * <reason>` and the dialer's error as `cause`, when the connection cannot be
 * opened: refused, unreachable, a malformed URL, or no connection within
 * `connectTimeoutMs`.
 * @throws {TypeError} when no dialer is given and the runtime has no default
 * (its message says what to use instead).
 * @throws {RangeError} for a bad `maxFrameBytes` or `timeoutMs` (the stream
 * is closed again).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { dial } from "./dial.ts";
 * import { serve } from "../../adapter/deno/serve.ts";
 * const server = serve({ methods: {} });
 * const connection = await dial(server.url, { connectTimeoutMs: 1_000 });
 * assert.equal(await connection.call("rpc.ping"), "pong");
 * connection.close();
 * await server.close();
 * ```
 */
export async function dial(
  url: string,
  options: DialOptions = {},
): Promise<RpcConnection> {
  const dialer = options.dialer ?? defaultDialer();
  const timeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const stream = await openStream(dialer, url, timeoutMs);
  try {
    return new RpcConnection(stream, { ...options, url: options.url ?? url });
  } catch (error) {
    stream.close();
    throw error;
  }
}

function openStream(
  dialer: Dialer,
  url: string,
  timeoutMs: number,
): Promise<ByteStream> {
  const controller = new AbortController();
  return new Promise<ByteStream>((resolve, reject) => {
    let settled = false;
    const fail = (reason: string, cause: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(
        new ConnectionError(`cannot connect to ${url}: ${reason}`, false, {
          cause,
        }),
      );
    };
    const timer = setTimeout(() => {
      const cause = new DOMException(
        `no connection within ${timeoutMs} ms`,
        "TimeoutError",
      );
      fail(cause.message, cause);
      controller.abort(cause);
    }, Math.max(0, Math.min(timeoutMs, 2_147_483_647)));
    let opening: Promise<ByteStream>;
    try {
      opening = dialer(url, { signal: controller.signal });
    } catch (error) {
      fail(messageOf(error), error);
      return;
    }
    opening.then(
      (stream) => {
        if (settled) {
          // Opened after the timeout: nobody wants it.
          try {
            stream.close();
          } catch {
            // Ignore.
          }
          return;
        }
        settled = true;
        clearTimeout(timer);
        resolve(stream);
      },
      (error) => fail(messageOf(error), error),
    );
  });
}
