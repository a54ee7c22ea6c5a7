/**
 * A preflight probe of a member's peer port: a node about to join a
 * cluster (`--join`) checks, before it asks to be added, that it reaches
 * the member's peer port and that both hold the same cluster secret and
 * cluster id. It runs the real handshake of `peer_auth.ts` with the
 * joiner's id as `from` and `probe: true` in its `peer.hello`: the member
 * answers with its proof whether or not the joiner is a member yet, checks
 * the joiner's proof at `peer.auth`, logs the outcome and closes the
 * connection; a probe is never admitted for Raft traffic.
 *
 * The member's proof (HMAC over the cluster secret, this probe's nonces
 * and both ids) is what the prober trusts: it verifies only with the same
 * secret. Web-standard; the connection comes from `dialer` (a TLS dialer
 * adds certificate checks there).
 *
 * @module
 */

import type { RpcConnection } from "../rpc/client/connection.ts";
import { dial } from "../rpc/transport/dial.ts";
import type { Dialer } from "../rpc/transport/transport.ts";
import {
  ConnectionError,
  DEADLINE_EXCEEDED,
  INVALID_PARAMS,
  messageOf,
  METHOD_NOT_FOUND,
  RpcError,
} from "../rpc/errors.ts";
import {
  type AuthParams,
  type ClusterKey,
  type HelloParams,
  type HelloResult,
  isNonce,
  newNonce,
  PEER_AUTH_METHOD,
  PEER_HELLO_METHOD,
} from "./peer_auth.ts";
import { describeFailure } from "./peer_transport.ts";
import type { NodeId } from "./types.ts";

/** What {@link probePeer} needs. */
export interface PeerProbeOptions {
  /** The cluster secret the prober holds. */
  key: ClusterKey;
  /** The cluster id the prober expects (the one the cluster told it). */
  clusterId: string;
  /** The prober's member id (the joiner's `--id`). */
  from: NodeId;
  /** The id of the member probed. */
  to: NodeId;
  /** Opens the byte stream (a TLS dialer, say). @default the runtime's TCP dialer */
  dialer?: Dialer;
  /** Time allowed for the connect and the whole handshake, ms. @default 2000 */
  timeoutMs?: number;
}

/**
 * How a probe ended:
 * - `ok`: the member proved the same cluster secret, for this cluster id;
 * - `wrongSecret`: it answered, but its proof does not verify with our
 *   secret (the two hold different cluster secrets);
 * - `otherCluster`: it belongs to another cluster id (its answer says which);
 * - `unreachable`: no connection (refused, unresolvable, connect timeout,
 *   a TLS failure of the dialer);
 * - `noAnswer`: connected, but no handshake answer within the time;
 * - `refused`: it closed the connection on our hello (it is not `to`, or an
 *   older version that does not know probes);
 * - `notPeerPort`: the address serves JSON-RPC but not the peer protocol;
 * - `malformed`: it answered something that is no handshake answer.
 */
export type PeerProbeOutcome =
  | "ok"
  | "wrongSecret"
  | "otherCluster"
  | "unreachable"
  | "noAnswer"
  | "refused"
  | "notPeerPort"
  | "malformed";

/** The result of {@link probePeer}. */
export interface PeerProbeResult {
  /** How it ended. */
  outcome: PeerProbeOutcome;
  /** Why, in words fit for a log line (`"the secrets match"` when ok). */
  detail: string;
}

/** Time the member gets to answer `peer.auth` of a probe (it then closes), ms. */
const AUTH_WAIT_MS = 500;

/**
 * Probes the peer port at `url` (see the module doc). Never throws for
 * what the member or the network did: the result says what happened.
 *
 * @throws {TypeError} when no dialer is given and the runtime has none.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ClusterKey } from "./peer_auth.ts";
 * import { PeerDirectory } from "./peer_directory.ts";
 * import { servePeers } from "./deno.ts";
 * import { probePeer } from "./peer_probe.ts";
 * const key = await ClusterKey.random();
 * const clusterId = "0123456789abcdef";
 * const directory = new PeerDirectory("n1", { n1: "tcp://127.0.0.1:7101" });
 * const server = servePeers({ id: "n1", clusterId, directory, key, onStep: () => {} });
 * // n4 is no member: its probe completes the proofs, and is not admitted.
 * const result = await probePeer(server.url, { key, clusterId, from: "n4", to: "n1" });
 * assert.equal(result.outcome, "ok");
 * assert.equal(directory.has("n4"), false);
 * const other = await ClusterKey.random();
 * const wrong = await probePeer(server.url, { key: other, clusterId, from: "n4", to: "n1" });
 * assert.equal(wrong.outcome, "wrongSecret");
 * await server.close();
 * ```
 */
export async function probePeer(
  url: string,
  options: PeerProbeOptions,
): Promise<PeerProbeResult> {
  const timeoutMs = options.timeoutMs ?? 2_000;
  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(1, deadline - Date.now());
  let connection: RpcConnection;
  try {
    connection = await dial(url, {
      dialer: options.dialer,
      connectTimeoutMs: timeoutMs,
    });
  } catch (error) {
    if (error instanceof TypeError) throw error;
    return { outcome: "unreachable", detail: describeFailure(error) };
  }
  try {
    return await handshake(connection, options, left, timeoutMs);
  } finally {
    connection.close();
  }
}

async function handshake(
  connection: RpcConnection,
  options: PeerProbeOptions,
  left: () => number,
  timeoutMs: number,
): Promise<PeerProbeResult> {
  const { key, clusterId: cluster, from, to } = options;
  const dialerNonce = newNonce();
  let answer: Partial<HelloResult> | null;
  try {
    const params: HelloParams = {
      cluster,
      from,
      to,
      nonce: dialerNonce,
      probe: true,
    };
    answer = await connection.call(PEER_HELLO_METHOD, { ...params }, {
      timeoutMs: left(),
    });
  } catch (error) {
    return helloFailure(error, timeoutMs);
  }
  if (
    typeof answer !== "object" || answer === null || !isNonce(answer.nonce)
  ) {
    return {
      outcome: "malformed",
      detail: "the peer sent a malformed peer.hello answer",
    };
  }
  const subject = {
    cluster,
    from,
    to,
    dialerNonce,
    acceptorNonce: answer.nonce,
  };
  if (!(await key.verify("acceptor", subject, answer.proof))) {
    return {
      outcome: "wrongSecret",
      detail: "its proof does not verify with our cluster secret",
    };
  }
  // Our proof too, so the member logs that the secrets match; it then
  // closes the connection (a probe is never admitted).
  const params: AuthParams = {
    proof: await key.prove("dialer", subject),
    clientUrl: null,
    peerUrl: null,
  };
  await connection.call(PEER_AUTH_METHOD, { ...params }, {
    timeoutMs: Math.min(left(), AUTH_WAIT_MS),
  }).catch(() => {});
  return { outcome: "ok", detail: "the secrets match" };
}

function helloFailure(error: unknown, timeoutMs: number): PeerProbeResult {
  if (error instanceof ConnectionError) {
    return {
      outcome: "refused",
      detail:
        "it closed the connection on our peer.hello (is it the member the cluster names, and of this version? Over mutual TLS: is this node's certificate signed by the CA the members trust, --peer-tls-ca, and does it name this member?)",
    };
  }
  if (error instanceof RpcError && error.code === DEADLINE_EXCEEDED) {
    return {
      outcome: "noAnswer",
      detail: `no answer to peer.hello within ${timeoutMs} ms`,
    };
  }
  if (error instanceof RpcError && error.code === METHOD_NOT_FOUND) {
    return {
      outcome: "notPeerPort",
      detail: "it does not speak the peer protocol (not a peer port?)",
    };
  }
  if (error instanceof RpcError && error.code === INVALID_PARAMS) {
    // The acceptor answers a hello of another cluster with why.
    return { outcome: "otherCluster", detail: error.message.slice(0, 500) };
  }
  return {
    outcome: "malformed",
    detail: `peer.hello failed: ${messageOf(error).slice(0, 300)}`,
  };
}
