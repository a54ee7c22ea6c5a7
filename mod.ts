/**
 * Rafter: clustered JSON-RPC 2.0 over TCP. Servers bind under a service
 * name in a Raft-replicated registry; clients get the stubs list, keep a
 * local cluster map, and pick a server per call with a distributor.
 *
 * This entry holds what most code needs: `connect()` and its stubs, the
 * server side (`method`, `withContext`, `bindServer`, `serveStream`,
 * `serveListener`), the errors, and the default distributors. It is
 * edge-safe: Web-standard APIs only; it type-checks with the DOM and
 * ESNext libs alone and imports no runtime. The rest is in subpaths:
 * `@rafter/rpc/client` (the client's parts: registry client, watch, health,
 * retry budget), `@rafter/rpc/distributors` (the contract and every
 * built-in distributor), `@rafter/rpc/transport` (`dial()`, connections,
 * dialers, byte streams, JSON-RPC messages), `@rafter/rpc/protocol` (the
 * registry's wire types and codes).
 *
 * Runtimes: `@rafter/rpc/deno` and `@rafter/rpc/node` give `serve()` and a
 * `connect()` on their own TCP dialer, `@rafter/rpc/cloudflare` gives
 * `edgeClient()` on workerd's sockets; importing them changes no global
 * state. Without a `dialer`, this entry's `connect()` finds `Deno.connect`
 * by feature detection. Registry nodes come from `@rafter/rpc/registry`,
 * the consensus library from `@rafter/rpc/raft`.
 *
 * @example Call a service bound in the registry
 * ```ts
 * import assert from "node:assert/strict";
 * import { connect } from "@rafter/rpc";
 * import { serve } from "@rafter/rpc/deno";
 * import { startRegistryNode } from "@rafter/rpc/registry";
 * // A one-node registry in this process (fast ticks, so it elects at once).
 * const dataDir = await Deno.makeTempDir();
 * const node = await startRegistryNode({
 *   id: "n1",
 *   listen: { hostname: "127.0.0.1", port: 0 },
 *   dataDir,
 *   tickMs: 10,
 * });
 * const server = serve({
 *   methods: { greet: (name: string) => ({ greeting: `Hello, ${name}!`, server: "h1" }) },
 * });
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * // A real client lists the registry cluster's nodes:
 * // connect(["tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002", "tcp://127.0.0.1:7003"])
 * const client = connect([node.url]);
 * await client.bind("hello", { id: "h1", url: server.url }); // what a server does
 * const hello = client.stub<Hello>("hello");
 * assert.equal((await hello.greet("Ada")).greeting, "Hello, Ada!");
 * client.close();
 * await server.close();
 * await node.stop();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 *
 * @module
 */

// The client and its stubs.
export {
  connect,
  type ConnectOptions,
  type RafterClient,
} from "./stub/client.ts";
export type {
  HedgeOptions,
  Stub,
  StubCallOptions,
  StubControls,
  StubOptions,
} from "./stub/call/cluster_stub.ts";
export {
  EdgeCache,
  type EdgeCacheOptions,
  type EdgeRequestIo,
  type EdgeShare,
} from "./stub/edge_cache.ts";
export { DEFAULT_REGISTRY_URL } from "./protocol/registry.ts";

// Distributors: the contract and the most used ones (all of them are in
// `./stub/distributors/mod.ts`, `@rafter/rpc/distributors`).
export type { Distributor } from "./stub/distributors/distributor.ts";
export { p2cEwma, type P2cEwmaOptions } from "./stub/distributors/p2c_ewma.ts";
export {
  roundRobin,
  type RoundRobinOptions,
} from "./stub/distributors/round_robin.ts";

// Servers: methods, binding in the registry, serving a byte stream.
export {
  type ArgsOf,
  type CallContext,
  type DeclaredMethod,
  method,
  withContext,
} from "./rpc/server/method.ts";
export type { StandardSchemaV1 } from "./rpc/server/standard_schema.ts";
export type {
  CallInfo,
  MethodHandler,
  Methods,
} from "./rpc/server/dispatcher.ts";
export {
  type RpcSession,
  type ServerLimits,
  serveStream,
  type ServeStreamOptions,
  type SessionMethods,
} from "./rpc/server/server_connection.ts";
export {
  type RpcServer,
  serveListener,
  type ServeMetricsOptions,
  type ServeOptions,
  type StreamListener,
} from "./rpc/server/server.ts";
export {
  type BindableServer,
  bindServer,
  type BindServerEvent,
  type BindServerOptions,
  type ServerBinding,
} from "./stub/binding/bind_server.ts";

// Errors and their codes.
export {
  CANCELLED,
  CONNECTION_FAILED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  type ErrorObject,
  INTERNAL_ERROR,
  INVALID_PARAMS,
  INVALID_REQUEST,
  LIMIT_EXCEEDED,
  type LimitExceededData,
  METHOD_NOT_FOUND,
  PARSE_ERROR,
  PERMISSION_DENIED,
  type PermissionDeniedData,
  RpcError,
  type TlsFailure,
  tlsFailureOf,
  UNAUTHENTICATED,
} from "./rpc/errors.ts";
export {
  AmbiguousError,
  type CallErrorDetail,
  NotSentError,
  ServerError,
} from "./stub/call/call_errors.ts";
