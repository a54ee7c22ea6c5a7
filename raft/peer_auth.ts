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
 * compares in constant time. The secret is never sent.
 *
 * **What identity means.** The secret is shared by every member, so on
 * its own the handshake proves only that the other end is *a* member: a
 * member that knows the secret can say `from: "n1"` while being n3 (issue
 * #16 measured one sending the leader's appends). What it adds is that
 * the connection then speaks for the one id its hello named: the acceptor
 * drops every later message whose `from` is another (`peer_server.ts`).
 *
 * With TLS and client certificates on the peer port, identity comes from
 * the certificate: the member its SAN `URI:rafter://member/<id>` names
 * ({@link memberIdOf}, the URI `cli/pki.ts`'s `memberUri` writes). The
 * acceptor refuses a hello whose `from` is not the member of the
 * connection's client certificate ({@link PeerIdentityError}, answered
 * with the reason), and the dialer refuses an acceptor whose server
 * certificate does not name the member it dialed, before it sends its
 * hello. With `requireCertificate` a connection without a member
 * certificate is refused even if it knows the secret. The HMAC proofs are
 * still made and checked (defence in depth); without TLS nothing changes.
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
  type PeerCertificate,
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
 * Ends the handshake of a join probe whose proof matched: the connection
 * is closed as every probe is, but nothing went wrong (logged at info).
 */
export class PeerProbeAnswered extends PeerHandshakeError {
  /** @param message what the probe proved. */
  constructor(message: string) {
    super(message);
    this.name = "PeerProbeAnswered";
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
 * The other end's certificate does not name the member it claims (or was
 * dialed as), or names none where one is required: the connection is
 * refused whatever it knows of the cluster secret. The acceptor answers
 * the hello with this message before it closes the connection.
 */
export class PeerIdentityError extends PeerHandshakeError {
  /** Machine-readable code: `RAFT_PEER_IDENTITY`. */
  readonly code = "RAFT_PEER_IDENTITY";

  /**
   * Makes the error.
   *
   * @param message which member was claimed, which the certificate names,
   * and what to do.
   */
  constructor(message: string) {
    super(message);
    this.name = "PeerIdentityError";
  }
}

/** The SAN prefix of a member certificate: `URI:rafter://member/`. */
export const MEMBER_URI_PREFIX = "URI:rafter://member/";

/**
 * The member a certificate names: the id in its one SAN
 * `URI:rafter://member/<id>` (percent-decoded, as `cli/pki.ts`'s
 * `memberUri` encodes it). Other SANs (DNS, IP, other URIs) are ignored.
 * A certificate that names no member, several different ones, or one
 * that is not a valid member id (see {@link checkMemberId}; a bad
 * percent-encoding) identifies nobody: null.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { memberIdOf } from "./peer_auth.ts";
 * const cert = {
 *   commonName: "n1", fingerprint256: "", validTo: "",
 *   altNames: ["DNS:localhost", "IP Address:127.0.0.1", "URI:rafter://member/n1"],
 * };
 * assert.equal(memberIdOf(cert), "n1");
 * assert.equal(memberIdOf({ ...cert, altNames: ["DNS:localhost"] }), null);
 * assert.equal(
 *   memberIdOf({ ...cert, altNames: ["URI:rafter://member/n1", "URI:rafter://member/n2"] }),
 *   null,
 * );
 * ```
 */
export function memberIdOf(cert: PeerCertificate): string | null {
  const named = new Set<string>();
  for (const name of cert.altNames) {
    if (!name.startsWith(MEMBER_URI_PREFIX)) continue;
    let id: string;
    try {
      id = decodeURIComponent(name.slice(MEMBER_URI_PREFIX.length));
      checkMemberId(id);
    } catch {
      return null; // a member SAN that names no valid id: trust none
    }
    named.add(id);
  }
  return named.size === 1 ? [...named][0] : null;
}

/**
 * Checks the other end's certificate against the member it must be;
 * `role` is the other end's.
 *
 * @throws {PeerIdentityError} when the certificate names another member,
 * or (with `required`) there is no certificate naming a member.
 */
export function checkPeerIdentity(
  role: HandshakeRole,
  expected: NodeId,
  cert: PeerCertificate | null | undefined,
  required: boolean,
): void {
  const named = cert == null ? null : memberIdOf(cert);
  const who = JSON.stringify(expected.slice(0, 64));
  if (named === null) {
    if (!required) return;
    throw new PeerIdentityError(
      cert == null
        ? `the ${role} (${who}) presented no TLS certificate, and this node requires member certificates on its peer links: give it a member certificate of the cluster CA (rafter pki) and a TLS peer port`
        : `the ${role}'s certificate (CN ${
          JSON.stringify(cert.commonName.slice(0, 64))
        }) names no single member (a SAN ${MEMBER_URI_PREFIX}<id>), and this node requires member certificates: issue ${who} a member certificate`,
    );
  }
  if (named !== expected) {
    throw new PeerIdentityError(
      role === "dialer"
        ? `peer.hello claims to come from ${who}, but the connection's certificate names member ${
          JSON.stringify(named)
        }: a member speaks only for itself (check the --id and certificate of the node at that address)`
        : `dialed member ${who}, but the peer's certificate names member ${
          JSON.stringify(named)
        }: the peer URL of ${who} points at another member (check --peers)`,
    );
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
  /**
   * The certificate the acceptor presented (the dialed stream's
   * `peerCertificate`): when it names a member, that member must be `to`.
   * @default none (plain TCP)
   */
  peerCertificate?: PeerCertificate | null;
  /**
   * Refuse an acceptor whose certificate names no member (or that has
   * none). @default false
   */
  requireCertificate?: boolean;
  /**
   * Whether the connection is TLS (the dialed stream's `secure`): a peer
   * that closes it on our hello then most likely refused our certificate,
   * and the error says so first. @default whether `peerCertificate` is set
   */
  secure?: boolean;
}

/**
 * Runs the dialer's half of the handshake on a fresh connection. On
 * success the connection is authenticated: the acceptor takes peer
 * messages on it. On failure the caller must close the connection.
 *
 * @returns the acceptor's answer: its client URL.
 * @throws {PeerIdentityError} before anything is sent, when the acceptor's
 * certificate (`options.peerCertificate`) names another member than `to`,
 * or names none while `requireCertificate` is set; also when the acceptor
 * refuses our hello for our certificate.
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
  checkPeerIdentity(
    "acceptor",
    to,
    options.peerCertificate,
    options.requireCertificate ?? false,
  );
  const timeoutMs = options.timeoutMs ?? HANDSHAKE_TIMEOUT_MS;
  // Monotonic: a wall-clock step must not stretch the handshake (nor cut it).
  const deadline = performance.now() + timeoutMs;
  const left = () => Math.max(1, deadline - performance.now());
  const dialerNonce = newNonce();
  let hello: unknown;
  try {
    const params: HelloParams = { cluster, from, to, nonce: dialerNonce };
    hello = await connection.call(PEER_HELLO_METHOD, { ...params }, {
      timeoutMs: left(),
    });
  } catch (error) {
    throw error instanceof RpcError && error.data === PEER_IDENTITY_REFUSED
      ? new PeerIdentityError(
        `the peer refused our peer.hello: ${messageOf(error)}`,
      )
      : new PeerHandshakeError(
        helloFailure(
          error,
          from,
          to,
          timeoutMs,
          options.secure ?? (options.peerCertificate != null),
        ),
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

/**
 * Why a `peer.hello` failed, for the log and `rafter status`: over TLS a
 * peer that closes the connection on our hello most likely did not trust
 * our certificate (a TLS 1.3 client finishes its side of the handshake
 * before the server checks the client's certificate), so that comes first,
 * with the TLS error when the read failed with one.
 */
export function helloFailure(
  error: unknown,
  from: NodeId,
  to: NodeId,
  timeoutMs: number,
  secure = false,
): string {
  if (error instanceof RpcError && error.code === METHOD_NOT_FOUND) {
    return "the peer does not speak the peer protocol (is this address its client port, not its peer port?)";
  }
  if (error instanceof ConnectionError && secure) {
    const tls = readFailureOf(error);
    return `the peer refused our peer.hello: it closed the TLS connection${
      tls === undefined ? "" : ` (${tls})`
    }; likely causes, most likely first: its --peer-tls-ca does not trust our --peer-tls-cert (signed by another CA?), or ours does not trust its certificate; it does not list ${from} among its --peers, or it is not ${to}; the network between them cuts connections`;
  }
  if (error instanceof ConnectionError) {
    return `the peer refused our peer.hello: it closed the connection (does it list ${from} among its --peers, and is it ${to}? or is the network between them cutting connections?)`;
  }
  if (timedOut(error)) {
    return `the peer did not answer peer.hello within ${timeoutMs} ms`;
  }
  return `peer.hello failed: ${messageOf(error)}`;
}

/** The message of the error a connection's read failed with, if any. */
function readFailureOf(error: ConnectionError): string | undefined {
  const cause = error.cause;
  if (cause === undefined) return undefined;
  const message = messageOf(cause).trim();
  return message === "" ? undefined : message;
}

function timedOut(error: unknown): boolean {
  return error instanceof RpcError && error.code === DEADLINE_EXCEEDED;
}

/**
 * The `data` of the error a `peer.hello` refused for its certificate is
 * answered with, so the dialer can tell it ({@link PeerIdentityError}).
 */
export const PEER_IDENTITY_REFUSED = "RAFT_PEER_IDENTITY";

/**
 * A client URL as announced in the handshake, in one spelling, or null
 * when absent or unusable (not `tcp://host:port` or `tls://host:port`, or
 * a wildcard address).
 */
export function normalizeClientUrl(value: unknown): string | null {
  if (typeof value !== "string" || value.length > 300) return null;
  const tls = value.startsWith("tls://");
  try {
    const address = parseTcpUrl(tls ? `tcp://${value.slice(6)}` : value);
    if (isWildcardHost(address.hostname)) return null;
    const url = formatTcpUrl(address);
    return tls ? `tls://${url.slice("tcp://".length)}` : url;
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
  /**
   * The connection's client certificate (the session's
   * `peerCertificate`): when it names a member, a hello's `from` must be
   * that member. @default none (plain TCP)
   */
  peerCertificate?: PeerCertificate | null;
  /**
   * Refuse a hello on a connection whose certificate names no member (or
   * that has none), even with the right secret. @default false
   */
  requireCertificate?: boolean;
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
   * @throws {PeerIdentityError} for a `from` that is not the member the
   * connection's certificate names (or no member certificate, when one is
   * required).
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
    this.#checkCertificate(p.from);
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
      throw new PeerProbeAnswered(
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

  /** {@link checkPeerIdentity} of the dialer; a refusal fails the handshake. */
  #checkCertificate(from: NodeId): void {
    try {
      checkPeerIdentity(
        "dialer",
        from,
        this.#options.peerCertificate,
        this.#options.requireCertificate ?? false,
      );
    } catch (error) {
      this.#state = "failed";
      throw error;
    }
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
