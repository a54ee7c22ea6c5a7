/**
 * The peer handshake: how two members of a Raft cluster prove to each
 * other, on every new peer connection, that both hold the cluster secret,
 * before any Raft message is accepted. Web-standard (WebCrypto
 * `crypto.subtle`, HMAC-SHA256); no Deno APIs.
 *
 * The dialer and the acceptor each pick a fresh nonce (32 random bytes,
 * base64url), so a proof is only good for the one connection it was made
 * for:
 *
 * 1. dialer → `peer.hello { cluster, from, to, nonce: dialerNonce }`; the
 *    acceptor refuses a hello whose `cluster` (the cluster id, see
 *    `data_dir.ts`) is not its own, answering why before it closes the
 *    connection, so members of two clusters that share a secret never talk;
 * 2. acceptor → `{ nonce: acceptorNonce, proof }` with proof =
 *    HMAC(secret, `rafter-peer-v2|acceptor|cluster|from|to|dialerNonce|acceptorNonce`);
 *    the dialer verifies it and closes the connection if it is wrong;
 * 3. dialer → `peer.auth { proof, clientUrl }` with proof =
 *    HMAC(secret, `rafter-peer-v2|dialer|cluster|from|to|dialerNonce|acceptorNonce`);
 * 4. acceptor verifies it, then answers `{ clientUrl }`: each side learns
 *    the other's client URL.
 *
 * The role in each proof keeps one side's proof from being reflected back
 * as the other's. Proofs are checked with `crypto.subtle.verify`, which
 * compares in constant time. The secret is never sent. The handshake
 * authenticates; it does not encrypt (TLS is to come).
 *
 * @module
 */

import type { RpcConnection } from "../rpc/client/connection.ts";
import {
  ConnectionError,
  DEADLINE_EXCEEDED,
  messageOf,
  METHOD_NOT_FOUND,
  RpcError,
} from "../rpc/errors.ts";
import {
  formatTcpUrl,
  isWildcardHost,
  parseTcpUrl,
} from "../rpc/transport/transport.ts";
import type { NodeId } from "./types.ts";

/** The method a dialer opens the handshake with: {@link HelloParams} → {@link HelloResult}. */
export const PEER_HELLO_METHOD = "peer.hello";
/** The method a dialer completes the handshake with: {@link AuthParams} → {@link AuthResult}. */
export const PEER_AUTH_METHOD = "peer.auth";
/** Version label at the start of every signed handshake string. */
export const PEER_PROTOCOL = "rafter-peer-v2";
/**
 * How long an acceptor waits for a connection to complete the handshake,
 * and a dialer for the acceptor's answers: 2_000 ms.
 */
export const HANDSHAKE_TIMEOUT_MS = 2_000;
/** Shortest cluster secret accepted, in characters: 32. */
export const MIN_SECRET_LENGTH = 32;
/** Random bytes in a nonce, and in a generated secret: 32. */
export const NONCE_BYTES = 32;

/** Params of `peer.hello`. */
export interface HelloParams {
  /** The id of the dialer's cluster (16 hex digits, see `bootstrapClusterId`). */
  cluster: string;
  /** The dialer's member id. */
  from: NodeId;
  /** The member id the dialer expects the acceptor to be. */
  to: NodeId;
  /** The dialer's nonce: {@link NONCE_BYTES} random bytes, base64url. */
  nonce: string;
  /**
   * A preflight probe (`raft/peer_probe.ts`: a node about to join checks
   * the cluster secret before it is added): answered whatever `from` is,
   * member or not, and refused once `peer.auth` has checked the dialer's
   * proof, so a probe is never admitted for Raft traffic. @default false
   */
  probe?: boolean;
}

/** Result of `peer.hello`. */
export interface HelloResult {
  /** The acceptor's nonce: {@link NONCE_BYTES} random bytes, base64url. */
  nonce: string;
  /** The acceptor's proof (HMAC-SHA256, base64url). */
  proof: string;
}

/** Params of `peer.auth`. */
export interface AuthParams {
  /** The dialer's proof (HMAC-SHA256, base64url). */
  proof: string;
  /** The dialer's client URL (`tcp://host:port`), or null when it has none. */
  clientUrl: string | null;
  /**
   * The dialer's peer URL (`tcp://host:port`), so that an acceptor which
   * does not know this member yet (it has not seen the change that added
   * it) can answer it; absent from older dialers.
   */
  peerUrl?: string | null;
}

/** Result of `peer.auth`. */
export interface AuthResult {
  /** The acceptor's client URL (`tcp://host:port`), or null when it has none. */
  clientUrl: string | null;
}

/** Which side of the handshake a proof speaks for. */
export type HandshakeRole = "dialer" | "acceptor";

/** What one handshake's proofs are about: the cluster, both ends, both nonces. */
export interface HandshakeSubject {
  /** The cluster id both ends belong to. */
  cluster: string;
  /** The dialer's member id. */
  from: NodeId;
  /** The acceptor's member id. */
  to: NodeId;
  /** The dialer's nonce. */
  dialerNonce: string;
  /** The acceptor's nonce. */
  acceptorNonce: string;
}

/**
 * A handshake failed: the connection must be closed. `message` says why in
 * words fit for a status page (`lastError`) or a log line.
 */
export class PeerHandshakeError extends Error {
  /**
   * Makes the error.
   *
   * @param message why the handshake failed.
   */
  constructor(message: string) {
    super(message);
    this.name = "PeerHandshakeError";
  }
}

/**
 * The acceptor refused a hello of another cluster (its cluster id differs):
 * the acceptor answers it with this message before it closes the
 * connection, so the dialer can log why.
 */
export class ClusterMismatchError extends PeerHandshakeError {
  /**
   * Makes the error.
   *
   * @param message which clusters, and what to do.
   */
  constructor(message: string) {
    super(message);
    this.name = "ClusterMismatchError";
  }
}

/**
 * The cluster secret as an HMAC-SHA256 key, able to make and check the
 * handshake's proofs. The secret's text itself is not kept.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ClusterKey, newNonce } from "./peer_auth.ts";
 * const key = await ClusterKey.fromSecret("an example secret of at least 32 characters");
 * const subject = {
 *   cluster: "0123456789abcdef", from: "n1", to: "n2",
 *   dialerNonce: newNonce(), acceptorNonce: newNonce(),
 * };
 * const proof = await key.prove("acceptor", subject);
 * assert.equal(await key.verify("acceptor", subject, proof), true);
 * assert.equal(await key.verify("dialer", subject, proof), false);
 * ```
 */
export class ClusterKey {
  readonly #key: CryptoKey;

  private constructor(key: CryptoKey) {
    this.#key = key;
  }

  /**
   * Imports a secret (its UTF-8 bytes are the HMAC key).
   *
   * @param secret the cluster secret, at least {@link MIN_SECRET_LENGTH}
   * characters (surrounding whitespace is trimmed first).
   * @throws {RangeError} when the trimmed secret is shorter.
   */
  static async fromSecret(secret: string): Promise<ClusterKey> {
    const trimmed = secret.trim();
    if (trimmed.length < MIN_SECRET_LENGTH) {
      throw new RangeError(
        `the cluster secret has ${trimmed.length} characters; it needs at least ${MIN_SECRET_LENGTH}`,
      );
    }
    const key = await crypto.subtle.importKey(
      "raw",
      new TextEncoder().encode(trimmed),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign", "verify"],
    );
    return new ClusterKey(key);
  }

  /**
   * A fresh random key, for a single-node cluster that no peer ever joins.
   */
  static random(): Promise<ClusterKey> {
    return ClusterKey.fromSecret(randomBase64url(NONCE_BYTES));
  }

  /** The proof `role` sends for one handshake (HMAC-SHA256, base64url). */
  async prove(
    role: HandshakeRole,
    subject: HandshakeSubject,
  ): Promise<string> {
    const signature = await crypto.subtle.sign(
      "HMAC",
      this.#key,
      signedBytes(role, subject),
    );
    return encodeBase64url(new Uint8Array(signature));
  }

  /**
   * Whether `proof` is the one `role` must send for this handshake; checked
   * by `crypto.subtle.verify` (constant time). False, never a throw, for a
   * proof that is not even base64url.
   */
  async verify(
    role: HandshakeRole,
    subject: HandshakeSubject,
    proof: unknown,
  ): Promise<boolean> {
    const signature = typeof proof === "string" && proof.length <= 100
      ? decodeBase64url(proof)
      : null;
    if (signature === null) return false;
    return await crypto.subtle.verify(
      "HMAC",
      this.#key,
      signature,
      signedBytes(role, subject),
    );
  }
}

function signedBytes(
  role: HandshakeRole,
  s: HandshakeSubject,
): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(
    [
      PEER_PROTOCOL,
      role,
      s.cluster,
      s.from,
      s.to,
      s.dialerNonce,
      s.acceptorNonce,
    ].join("|"),
  );
}

/** A fresh nonce: {@link NONCE_BYTES} random bytes, base64url. */
export function newNonce(): string {
  return randomBase64url(NONCE_BYTES);
}

/** Whether `value` is a nonce as {@link newNonce} makes them. */
export function isNonce(value: unknown): value is string {
  return typeof value === "string" && value.length === 43 &&
    decodeBase64url(value)?.length === NONCE_BYTES;
}

/** `count` random bytes from `crypto.getRandomValues`, base64url without padding. */
export function randomBase64url(count: number): string {
  return encodeBase64url(crypto.getRandomValues(new Uint8Array(count)));
}

function encodeBase64url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(
    /=+$/,
    "",
  );
}

function decodeBase64url(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(binary, (ch) => ch.charCodeAt(0));
}

/**
 * Checks a member id for use in the handshake: non-empty, at most 256
 * characters, and without `|` (the separator of the signed string).
 *
 * @throws {RangeError} naming the id.
 */
export function checkMemberId(id: string): void {
  if (id.length === 0 || id.length > 256 || id.includes("|")) {
    throw new RangeError(
      `member id ${JSON.stringify(id)} must be 1..256 characters without "|"`,
    );
  }
}

/** What the dialing side needs for {@link authenticatePeer}. */
export interface DialerHandshakeOptions {
  /** The cluster secret. */
  key: ClusterKey;
  /** This node's cluster id (see `DataDir.clusterId`). */
  clusterId: string;
  /** This node's id. */
  from: NodeId;
  /** The id of the member dialed. */
  to: NodeId;
  /** This node's client URL, announced to the peer (null: none). */
  clientUrl: string | null;
  /** This node's peer URL, announced to the peer. @default null */
  peerUrl?: string | null;
  /** Time allowed for the whole handshake, ms. @default 2000 */
  timeoutMs?: number;
}

/**
 * Runs the dialer's half of the handshake on a fresh connection. On
 * success the connection is authenticated: the acceptor takes peer
 * messages on it. On failure the caller must close the connection.
 *
 * @returns the acceptor's answer: its client URL.
 * @throws {PeerHandshakeError} when the peer refuses us (of another
 * cluster: the message gives both cluster ids), cannot prove the cluster
 * secret, answers nonsense, or does not answer in time; the message says
 * which.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { dial } from "../rpc/transport/dial.ts";
 * import { authenticatePeer, ClusterKey } from "./peer_auth.ts";
 * import { PeerDirectory } from "./peer_directory.ts";
 * import { servePeers } from "./deno.ts";
 * const key = await ClusterKey.random();
 * const clusterId = "0123456789abcdef";
 * // Member n2's peer port, which also tells its client URL.
 * const directory = new PeerDirectory("n2", { n1: "tcp://127.0.0.1:7101", n2: "tcp://127.0.0.1:7102" });
 * const server = servePeers({
 *   id: "n2", clusterId, directory, key, onStep: () => {},
 *   clientUrl: () => "tcp://127.0.0.1:7002",
 * });
 * const connection = await dial(server.url);
 * const { clientUrl } = await authenticatePeer(connection, {
 *   key, clusterId, from: "n1", to: "n2",
 *   clientUrl: "tcp://127.0.0.1:7001",
 * });
 * assert.equal(clientUrl, "tcp://127.0.0.1:7002");
 * assert.equal(directory.clientUrl("n1"), "tcp://127.0.0.1:7001"); // learnt
 * connection.close();
 * await server.close();
 * ```
 */
export async function authenticatePeer(
  connection: RpcConnection,
  options: DialerHandshakeOptions,
): Promise<AuthResult> {
  const { key, from, to, clusterId: cluster } = options;
  const timeoutMs = options.timeoutMs ?? HANDSHAKE_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(1, deadline - Date.now());
  const dialerNonce = newNonce();
  let hello: unknown;
  try {
    const params: HelloParams = { cluster, from, to, nonce: dialerNonce };
    hello = await connection.call(PEER_HELLO_METHOD, { ...params }, {
      timeoutMs: left(),
    });
  } catch (error) {
    throw new PeerHandshakeError(
      helloFailure(error, from, to, timeoutMs),
    );
  }
  const answer = hello as Partial<HelloResult> | null;
  if (
    typeof answer !== "object" || answer === null || !isNonce(answer.nonce)
  ) {
    throw new PeerHandshakeError("the peer sent a malformed peer.hello answer");
  }
  const subject = {
    cluster,
    from,
    to,
    dialerNonce,
    acceptorNonce: answer.nonce,
  };
  if (!(await key.verify("acceptor", subject, answer.proof))) {
    throw new PeerHandshakeError(
      "the peer's cluster secret differs from ours: compare the --cluster-secret-file of both nodes",
    );
  }
  const proof = await key.prove("dialer", subject);
  let auth: unknown;
  try {
    const params: AuthParams = {
      proof,
      clientUrl: options.clientUrl,
      peerUrl: options.peerUrl ?? null,
    };
    auth = await connection.call(PEER_AUTH_METHOD, { ...params }, {
      timeoutMs: left(),
    });
  } catch (error) {
    throw new PeerHandshakeError(
      error instanceof ConnectionError
        ? "peer rejected our cluster secret"
        : timedOut(error)
        ? `the peer did not complete the handshake within ${timeoutMs} ms`
        : `peer.auth failed: ${messageOf(error)}`,
    );
  }
  const clientUrl = (auth as Partial<AuthResult> | null)?.clientUrl;
  return { clientUrl: normalizeClientUrl(clientUrl) };
}

function helloFailure(
  error: unknown,
  from: NodeId,
  to: NodeId,
  timeoutMs: number,
): string {
  if (error instanceof RpcError && error.code === METHOD_NOT_FOUND) {
    return "the peer does not speak the peer protocol (is this address its client port, not its peer port?)";
  }
  if (error instanceof ConnectionError) {
    return `the peer refused our peer.hello (does it list ${from} among its --peers, and is it ${to}?)`;
  }
  if (timedOut(error)) {
    return `the peer did not answer peer.hello within ${timeoutMs} ms`;
  }
  return `peer.hello failed: ${messageOf(error)}`;
}

function timedOut(error: unknown): boolean {
  return error instanceof RpcError && error.code === DEADLINE_EXCEEDED;
}

/**
 * A client URL as announced in the handshake, in one spelling, or null
 * when absent or unusable (not `tcp://host:port`, or a wildcard address).
 */
export function normalizeClientUrl(value: unknown): string | null {
  if (typeof value !== "string" || value.length > 300) return null;
  try {
    const address = parseTcpUrl(value);
    return isWildcardHost(address.hostname) ? null : formatTcpUrl(address);
  } catch {
    return null;
  }
}

/** What an {@link AcceptorHandshake} checks a dialer against. */
export interface AcceptorHandshakeOptions {
  /** The cluster secret. */
  key: ClusterKey;
  /** This node's cluster id: a hello's `cluster` must be it. */
  clusterId: string;
  /** This node's id: a hello's `to` must name it. */
  self: NodeId;
  /** Every member id, this node included: a hello's `from` must be another one. */
  members: readonly NodeId[];
  /**
   * Whether to go on with a hello from `id`, which is not among `members`
   * (its proof is still checked at `peer.auth`). @default refuse
   */
  admit?(id: NodeId): boolean;
}

/**
 * The acceptor's half of the handshake on one connection: a small state
 * machine that takes exactly one `peer.hello` and then one `peer.auth`.
 * Any deviation throws {@link PeerHandshakeError}, after which the caller
 * closes the connection.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { dial } from "../rpc/transport/dial.ts";
 * import { serve } from "../adapter/deno/serve.ts";
 * import { AcceptorHandshake, authenticatePeer, ClusterKey } from "./peer_auth.ts";
 * const key = await ClusterKey.random();
 * const clusterId = "0123456789abcdef";
 * const handshake = new AcceptorHandshake({
 *   key, clusterId, self: "n2", members: ["n1", "n2", "n3"],
 * });
 * // One handshake per connection; servePeers (peer_server.ts) does this.
 * const server = serve({
 *   methods: {
 *     "peer.hello": (params: unknown) => handshake.hello(params),
 *     "peer.auth": (params: unknown) => handshake.auth(params),
 *   },
 * });
 * const connection = await dial(server.url);
 * await authenticatePeer(connection, { key, clusterId, from: "n1", to: "n2", clientUrl: null });
 * assert.equal(handshake.authenticated, true);
 * assert.equal(handshake.claimedPeer, "n1");
 * connection.close();
 * await server.close();
 * ```
 */
export class AcceptorHandshake {
  readonly #options: AcceptorHandshakeOptions;
  #state: "new" | "hello" | "checking" | "done" | "failed" = "new";
  #hello: HelloParams | null = null;
  #nonce = "";
  #probe = false;

  /**
   * Starts a handshake for one accepted connection.
   *
   * @param options the key and the members to accept.
   */
  constructor(options: AcceptorHandshakeOptions) {
    this.#options = options;
  }

  /** Whether `auth` has succeeded. */
  get authenticated(): boolean {
    return this.#state === "done";
  }

  /** The id the dialer claims in its hello, once one was accepted. */
  get claimedPeer(): NodeId | null {
    return this.#hello?.from ?? null;
  }

  /**
   * Checks a `peer.hello` and makes the answer.
   *
   * @throws {PeerHandshakeError} for a second hello, malformed params, a
   * `to` that is not this node, or a `from` that is this node or (unless
   * the hello is a `probe`) no member.
   * @throws {ClusterMismatchError} for a hello of another cluster.
   */
  async hello(params: unknown): Promise<HelloResult> {
    const { self, members, key, clusterId } = this.#options;
    if (this.#state !== "new") {
      this.#state = "failed";
      throw new PeerHandshakeError("sent peer.hello twice");
    }
    this.#state = "hello";
    const p = params as Partial<HelloParams> | null;
    if (
      typeof p !== "object" || p === null || typeof p.from !== "string" ||
      typeof p.to !== "string" || !isNonce(p.nonce) ||
      typeof p.cluster !== "string"
    ) {
      this.#state = "failed";
      throw new PeerHandshakeError(
        "peer.hello params are not { cluster, from, to, nonce } (a node of an older version?)",
      );
    }
    const from = p.from.slice(0, 64);
    if (p.cluster !== clusterId) {
      this.#state = "failed";
      throw new ClusterMismatchError(
        `peer.hello from ${JSON.stringify(from)} is for cluster ${
          JSON.stringify(p.cluster.slice(0, 64))
        }, but ${self} belongs to cluster ${
          JSON.stringify(clusterId)
        }: the two nodes were bootstrapped with different --peers or --cluster-token, or one of them runs on another cluster's data folder; they share the cluster secret but must not exchange Raft messages`,
      );
    }
    if (p.to !== self) {
      this.#state = "failed";
      throw new PeerHandshakeError(
        `peer.hello is addressed to ${
          JSON.stringify(p.to.slice(0, 64))
        }, not to this node (${self})`,
      );
    }
    if (p.from === self) {
      this.#state = "failed";
      throw new PeerHandshakeError(
        `peer.hello claims to come from this node's own id (${self})`,
      );
    }
    // A probe is answered from anyone: auth() refuses it once checked.
    this.#probe = p.probe === true;
    if (
      !this.#probe && !members.includes(p.from) &&
      !(this.#options.admit?.(p.from) ?? false)
    ) {
      this.#state = "failed";
      throw new PeerHandshakeError(
        `peer.hello comes from ${JSON.stringify(from)}, not a member (${
          members.join(", ")
        })`,
      );
    }
    this.#hello = {
      cluster: p.cluster,
      from: p.from,
      to: p.to,
      nonce: p.nonce,
    };
    this.#nonce = newNonce();
    const proof = await key.prove("acceptor", this.#subject(this.#hello));
    return { nonce: this.#nonce, proof };
  }

  /**
   * Checks a `peer.auth`: on success the connection speaks for
   * `peer`.
   *
   * @returns the authenticated peer id and the client URL it announced
   * (null when absent or unusable).
   * @throws {PeerHandshakeError} when no hello was answered yet, or the
   * proof does not match the cluster secret; and after checking the proof
   * of a `probe` hello, which is never admitted (the message says whether
   * the secret matched).
   */
  async auth(
    params: unknown,
  ): Promise<
    { peer: NodeId; clientUrl: string | null; peerUrl: string | null }
  > {
    const hello = this.#hello;
    if (this.#state !== "hello" || hello === null) {
      const before = this.#state === "new";
      this.#state = "failed";
      throw new PeerHandshakeError(
        before ? "sent peer.auth before peer.hello" : "sent peer.auth twice",
      );
    }
    this.#state = "checking";
    const p = params as Partial<AuthParams> | null;
    const ok = typeof p === "object" && p !== null &&
      await this.#options.key.verify("dialer", this.#subject(hello), p.proof);
    if (!ok) {
      this.#state = "failed";
      throw new PeerHandshakeError(
        `peer.auth from ${hello.from}: the proof does not match the cluster secret${
          this.#probe ? " (a join probe)" : ""
        }`,
      );
    }
    if (this.#probe) {
      this.#state = "failed";
      throw new PeerHandshakeError(
        `join probe from ${hello.from}: its cluster secret matches; a probe is closed, never admitted`,
      );
    }
    this.#state = "done";
    return {
      peer: hello.from,
      clientUrl: normalizeClientUrl(p?.clientUrl),
      peerUrl: normalizeClientUrl(p?.peerUrl ?? null),
    };
  }

  #subject(hello: HelloParams): HandshakeSubject {
    return {
      cluster: hello.cluster,
      from: hello.from,
      to: hello.to,
      dialerNonce: hello.nonce,
      acceptorNonce: this.#nonce,
    };
  }
}
