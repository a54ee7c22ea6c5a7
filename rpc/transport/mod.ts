/**
 * Connections below the cluster stubs (`@rafter/rpc/transport`): `dial()`
 * one endpoint for a multiplexed `RpcConnection`, the `Dialer` contract
 * and the `ByteStream` it yields (bring your own transport), endpoint URL
 * parsing (`tcp://host:port`, and `tls://host:port` for TLS; the TLS
 * options of servers and dialers are `TlsServerOptions` and
 * `TlsClientOptions`, which `@rafter/rpc/deno` and `/node` honour), the process-wide default dialer, the wire codecs' names, and
 * `handleText()`, the JSON-RPC dispatch of one text message for servers on
 * transports of their own, and the JSON-RPC 2.0 message types. Web-standard only, like `@rafter/rpc`.
 *
 * `dial()` and `connect()` without a `dialer` use `defaultDialer()`: the
 * one set with `setDefaultDialer()`, else `Deno.connect` found by feature
 * detection. No entry sets it on import; `connect` and `dial` of
 * `@rafter/rpc/deno` and `@rafter/rpc/node` pass their runtime's dialer.
 *
 * @example Parse a TCP URL
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseTcpUrl } from "./mod.ts";
 * assert.deepEqual(parseTcpUrl("tcp://127.0.0.1:7001"), { hostname: "127.0.0.1", port: 7001 });
 * ```
 *
 * @module
 */

export { dial, type DialOptions } from "./dial.ts";
export {
  type ByteStream,
  type Dialer,
  type DialerOptions,
  type EndpointAddress,
  formatEndpointUrl,
  parseEndpointUrl,
  parseListenAddress,
  parseTcpUrl,
  type PeerCertificate,
  type TcpAddress,
} from "./transport.ts";
export type {
  ClientCertPolicy,
  TlsClientOptions,
  TlsServerOptions,
} from "./tls.ts";
export { defaultDialer, setDefaultDialer } from "./default_dialer.ts";
export {
  type BatchRequest,
  type BatchResult,
  type CallOptions,
  RpcConnection,
  type RpcConnectionOptions,
} from "../client/connection.ts";
export type { Codec } from "../codec/codec.ts";
export {
  type CallInfo,
  type DispatchOptions,
  handleText,
  type RunningCalls,
} from "../server/dispatcher.ts";

// JSON-RPC 2.0 messages, for code that reads or writes them itself.
export type {
  ErrorResponse,
  Params,
  Request,
  RequestId,
  Response,
  SuccessResponse,
} from "../message.ts";
