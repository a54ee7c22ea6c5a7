/**
 * The wire contract (`@rafter/rpc/protocol`): the registry's methods, their
 * parameters and results, its error codes and their data: types,
 * constants and `makeEndpoint()`, no I/O (the JSON-RPC 2.0 message types
 * are in `@rafter/rpc/transport`). The code that calls the registry is
 * `client.registry` of `connect()` (`RegistryClient`, in
 * `@rafter/rpc/client`).
 *
 * @example Method names and an endpoint as the registry stores it
 * ```ts
 * import assert from "node:assert/strict";
 * import { type Endpoint, makeEndpoint, REGISTRY_METHODS } from "./mod.ts";
 * assert.equal(REGISTRY_METHODS.lookup, "registry.lookup");
 * const endpoint: Endpoint = makeEndpoint({ id: "a", url: "tcp://127.0.0.1:9001" });
 * assert.equal(endpoint.state, "serving");
 * ```
 *
 * @module
 */

export {
  type Attributes,
  type BindParams,
  type BindResult,
  COMPACTED,
  type Consistency,
  DEFAULT_REGISTRY_URL,
  type DeleteReason,
  type Endpoint,
  type EndpointLoad,
  type EndpointSpec,
  type EndpointState,
  type FederationStatus,
  type HealthCheck,
  ID_IN_USE,
  type IdInUseData,
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
  type PeerSecurityStatus,
  type PeerServerCounters,
  type PeerTransportCounters,
  type RaftAnomalyCounters,
  type RaftDropCounters,
  REGISTRY_METHODS,
  type RegistryApi,
  type RegistryMethod,
  type RegistryStatus,
  type ResultOf,
  type Scope,
  type SetStateParams,
  type SnapshotChunkParams,
  type SnapshotChunkResult,
  type SnapshotResult,
  UNAVAILABLE,
  type UnbindParams,
  type UnbindResult,
  type UnwatchParams,
  type UnwatchResult,
  WATCH_CANCELLED,
  WATCH_LOADS_NOTIFICATION,
  type WatchEvent,
  type WatchLoadsNotification,
  type WatchParams,
  type WatchResult,
  type WriteResult,
} from "./registry.ts";
export {
  AUTH_METHODS,
  type AuthenticateParams,
  type AuthenticateResult,
  type AuthMethod,
  type AuthStatusResult,
  BOOTSTRAP_TOKEN_NAME,
  MAX_TOKEN_NAME_LENGTH,
  normalizePermission,
  type ParsedPermission,
  parsePermission,
  type Permission,
  permits,
  type TokenCreateParams,
  type TokenCreateResult,
  type TokenIdParams,
  type TokenInfo,
  type TokenListResult,
  type TokenRevokeResult,
} from "./auth.ts";
