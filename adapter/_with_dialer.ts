/**
 * `connect()` and `dial()` on a runtime's dialer, for the runtime entries:
 * each passes its dialer per call instead of setting the process-wide
 * default, so importing an entry changes no global state.
 *
 * @module
 */

import {
  connect,
  type ConnectOptions,
  type RafterClient,
} from "../stub/client.ts";
import { dial, type DialOptions } from "../rpc/transport/dial.ts";
import type { RpcConnection } from "../rpc/client/connection.ts";
import type { Dialer } from "../rpc/transport/transport.ts";

/** {@link connect} with `dialer` unless `options.dialer` is given. */
export function connectWith(
  dialer: Dialer,
  registryUrls: string | readonly string[],
  options: ConnectOptions,
): RafterClient {
  return connect(registryUrls, {
    ...options,
    dialer: options.dialer ?? dialer,
  });
}

/** {@link dial} with `dialer` unless `options.dialer` is given. */
export function dialWith(
  dialer: Dialer,
  url: string,
  options: DialOptions,
): Promise<RpcConnection> {
  return dial(url, { ...options, dialer: options.dialer ?? dialer });
}
