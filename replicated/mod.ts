/**
 * Replicated services (`@rafter/rpc/replicated`): a service whose state is
 * a Raft-replicated state machine, so it survives the loss of any
 * minority of its replicas with every acknowledged write. Define the
 * service as plain functions ({@link ServiceDefinition}: its initial
 * state, its writes, its reads), start one replica per process with
 * {@link startReplica}, and call it through a stub with the `leader()`
 * distributor (`@rafter/rpc/distributors`), which sends writes to the
 * leader and follows `NOT_LEADER` answers. See docs/replicated.md.
 *
 * This entry runs on Deno (it listens with Deno's TCP server and keeps
 * its log in files with fsync).
 *
 * @example A one-replica counter
 * ```ts
 * import assert from "node:assert/strict";
 * import { startReplica } from "./mod.ts";
 * import { denoDialer, dial } from "../adapter/deno/mod.ts";
 * const dataDir = await Deno.makeTempDir();
 * const replica = await startReplica({
 *   id: "c1",
 *   peers: { c1: "tcp://127.0.0.1:0" },
 *   dataDir,
 *   clusterSecret: "an example secret of at least 32 characters",
 *   tickMs: 10,
 *   service: {
 *     initial: () => ({ value: 0 }),
 *     writes: { add: (state: { value: number }, by: number) => (state.value += by) },
 *     reads: { get: (state: { value: number }) => state.value },
 *   },
 * });
 * const conn = await dial(replica.url);
 * assert.equal(await conn.call("add", [2]), 2);
 * assert.equal(await conn.call("add", [3]), 5);
 * assert.equal(await conn.call("get", []), 5);
 * conn.close();
 * await replica.close();
 * await Deno.remove(dataDir, { recursive: true });
 * ```
 *
 * @module
 */

import { serve } from "../adapter/deno/serve.ts";
import { denoDialer, dial } from "../adapter/deno/mod.ts";
import {
  removeReplica as removeReplicaOn,
  type ReplicaOptions,
  ReplicatedService,
} from "./service.ts";

export {
  MAX_REQUEST_ID_LENGTH,
  type ReadMethod,
  requestIdOf,
  type ServiceDefinition,
  snapshotProblem,
  StateMachine,
  type StateMachineOptions,
  type WriteMethod,
  type WriteOutcome,
} from "./machine.ts";
export {
  type DialFunction,
  NOT_LEADER,
  type NotLeaderData,
  type ReplicaBinding,
  type ReplicaOptions,
  type ReplicaStatus,
  ReplicatedService,
  UNAVAILABLE,
  type UnavailableData,
} from "./service.ts";

/**
 * Starts one replica of a replicated service on Deno: see
 * {@link ReplicatedService.start}.
 *
 * @throws {TypeError} when the definition or the options are wrong.
 */
export function startReplica<S>(
  options: ReplicaOptions<S>,
): Promise<ReplicatedService<S>> {
  const caFile = options.tlsCaFile;
  return ReplicatedService.start(
    options,
    serve,
    (url) => dial(url, caFile === undefined ? {} : { tls: { caFile } }),
    (tls) => denoDialer(tls),
  );
}

/**
 * Takes a dead replica out of a running service, on Deno: see
 * the runtime-free `removeReplica` of `service.ts`, which takes the dial
 * function.
 *
 * @throws {RpcError} PERMISSION_DENIED for a wrong secret (or when the
 * membership changed again while it asked once more, its proof being over
 * the membership it was told), INVALID_PARAMS for a replica that is not a
 * member, UNAVAILABLE when no leader removed it within 30 s.
 */
export function removeReplica(
  options: {
    via: readonly string[];
    id: string;
    clusterSecret: string;
    /** The CA of `tls://` client ports in `via`. */
    tlsCaFile?: string;
  },
): Promise<void> {
  const caFile = options.tlsCaFile;
  return removeReplicaOn(
    options,
    (url: string) => dial(url, caFile === undefined ? {} : { tls: { caFile } }),
  );
}
