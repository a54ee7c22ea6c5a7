/**
 * Rafter: clustered JSON-RPC 2.0 over TCP. Servers bind under a service
 * name in a Raft-replicated registry; clients get the stubs list, keep a
 * local cluster map, and pick a server per call with a distributor.
 *
 * This module is edge-safe: the RPC layer (messages, connections, the
 * server method table) and the cluster stubs, on Web-standard APIs only; it
 * type-checks with the DOM and ESNext libs alone and imports no runtime.
 * TCP comes from a runtime entry, which sets the default dialer:
 * `@rafter/rpc/deno` (also `serve()`), `@rafter/rpc/node` (also `serve()`),
 * `@rafter/rpc/cloudflare` (workerd's `connect()`, edge mode). Imported on
 * its own under Deno, it finds `Deno.connect` by feature detection.
 * Registry nodes come from `@rafter/rpc/registry`, the consensus library
 * from `@rafter/rpc/raft`.
 *
 * @example Call a service bound in the registry
 * ```ts ignore
 * import { connect } from "@rafter/rpc";
 * interface Hello { greet(name: string): { greeting: string; server: string } }
 * const client = connect(["tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002", "tcp://127.0.0.1:7003"]);
 * const hello = client.stub<Hello>("hello");
 * console.log((await hello.greet("Ada")).greeting);
 * client.close();
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
export {
  BATCH_METHOD,
  type HedgeOptions,
  type Stub,
  type StubCallOptions,
  type StubControls,
  type StubOptions,
} from "./stub/call/cluster_stub.ts";
export {
  AmbiguousError,
  type CallErrorDetail,
  NotSentError,
  ServerError,
} from "./stub/call/call_errors.ts";
export type {
  ClusterMapOptions,
  EndpointPhase,
  EndpointStatus,
} from "./stub/cluster_map/cluster_map.ts";
export type { ConnectionPoolOptions } from "./stub/connection_pool.ts";
export {
  DEFAULT_EDGE_TTL_MS,
  EdgeCache,
  type EdgeCacheOptions,
} from "./stub/edge_cache.ts";
export {
  type AttemptFailure,
  EndpointHealth,
  HealthBook,
  type HealthOptions,
} from "./stub/cluster_map/endpoint_health.ts";
export {
  RetryBudget,
  type RetryBudgetOptions,
} from "./stub/call/retry_budget.ts";
export {
  type BindOptions,
  type RegistryCallOptions,
  RegistryClient,
  type RegistryClientOptions,
} from "./stub/registry_client/registry_client.ts";
export {
  type RegistryWatch,
  WatchClient,
  type WatchOptions,
  type WatchUpdate,
} from "./stub/registry_client/watch.ts";

// Distributors: the contract and the built-in ones.
export {
  type CallInfo,
  type Candidate,
  type ClientState,
  defaultDecision,
  type Distributor,
  type EndpointStats,
  type ErrorDecision,
  type FailureInfo,
  type FailureKind,
  makeCandidate,
} from "./stub/distributors/distributor.ts";
export {
  consistentHash,
  firstAvailable,
  leastInFlight,
  type LeastInFlightOptions,
  leastLoaded,
  type LeastLoadedOptions,
  p2cEwma,
  type P2cEwmaOptions,
  random,
  type RandomOptions,
  roundRobin,
  type RoundRobinOptions,
  sticky,
  type StickyOptions,
  weightedRoundRobin,
  type WeightedRoundRobinOptions,
} from "./stub/distributors/mod.ts";

// Servers: methods, binding in the registry, serving a byte stream.
export {
  type ArgsOf,
  type CallContext,
  type DeclaredMethod,
  method,
  withContext,
} from "./rpc/server/method.ts";
export type { StandardSchemaV1 } from "./rpc/server/standard_schema.ts";
export {
  type DispatchOptions,
  handleText,
  type MethodHandler,
  type Methods,
  type RunningCalls,
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

// Connections and transports.
export { dial, type DialOptions } from "./rpc/transport/dial.ts";
export {
  type BatchRequest,
  type BatchResult,
  type CallOptions,
  RpcConnection,
  type RpcConnectionOptions,
} from "./rpc/client/connection.ts";
export type { Codec } from "./rpc/codec/codec.ts";
export {
  type ByteStream,
  type Dialer,
  type DialerOptions,
  parseListenAddress,
  parseTcpUrl,
  type TcpAddress,
} from "./rpc/transport/transport.ts";
export {
  defaultDialer,
  setDefaultDialer,
} from "./rpc/transport/default_dialer.ts";

// Errors and their codes, JSON-RPC messages.
export {
  CANCELLED,
  CONNECTION_FAILED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  type ErrorObject,
  INTERNAL_ERROR,
  INVALID_PARAMS,
  INVALID_REQUEST,
  METHOD_NOT_FOUND,
  PARSE_ERROR,
  RpcError,
} from "./rpc/errors.ts";
export type {
  ErrorResponse,
  Params,
  Request,
  RequestId,
  Response,
  SuccessResponse,
} from "./rpc/message.ts";

// The registry's contract, as its clients see it.
export {
  type Attributes,
  type BindParams,
  type BindResult,
  COMPACTED,
  type Consistency,
  DEFAULT_REGISTRY_URL,
  type DeleteReason,
  type Endpoint,
  type EndpointSpec,
  type EndpointState,
  type HealthCheck,
  LEADER_TRANSFER_FAILED,
  type LeaderTransferFailedData,
  type LeaderTransferParams,
  type LeaderTransferResult,
  LEASE_NOT_FOUND,
  type LeaseGrantParams,
  type LeaseGrantResult,
  type LeaseIdParams,
  type LeaseInfo,
  type LeaseKeepAliveParams,
  type LeaseKeepAliveResult,
  type LeaseListResult,
  type LeaseRevokeResult,
  type ListedName,
  type ListParams,
  type ListResult,
  type LookupParams,
  type LookupResult,
  makeEndpoint,
  type MemberAddParams,
  type MemberIdParams,
  type MemberInfo,
  type MemberKind,
  type MemberListResult,
  MEMBERSHIP_CHANGE_FAILED,
  type MembershipChangeFailedData,
  type MemberStatus,
  NO_ENDPOINTS,
  NOT_LEADER,
  type ParamsOf,
  REGISTRY_METHODS,
  type RegistryApi,
  type RegistryMethod,
  type RegistryStatus,
  type ResultOf,
  type Scope,
  type SetStateParams,
  UNAVAILABLE,
  type UnbindParams,
  type UnbindResult,
  type UnwatchParams,
  type UnwatchResult,
  WATCH_CANCELLED,
  type WatchEvent,
  type WatchParams,
  type WatchResult,
  type WriteResult,
} from "./protocol/registry.ts";
