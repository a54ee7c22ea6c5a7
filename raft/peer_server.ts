/**
 * The peer port of a Raft node: the server side of the peer handshake
 * (`peer_auth.ts`) and of the messages that follow it. A connection must
 * complete `peer.hello` and `peer.auth` within 2 s; until then any other
 * method, a wrong proof, or a second hello closes it. After that it speaks
 * for one authenticated member: its `raft.step` messages reach the node
 * only when their `from` is that member (still a current member) and their
 * `to` is this node, and the application's peer methods are called with
 * that member's id (a notification or request whose params carry a `from`
 * naming another member is dropped). A message that is dropped (forged
 * `from`, wrong `to`, a removed member) or fails validation
 * (`parseMessage`) is counted ({@link PeerAcceptor.stats}) and logged with
 * its sender and why, at most one line per peer and kind per
 * `logIntervalMs` (the next line says how many were held back). A hello of
 * another cluster (its cluster id differs) is answered with the reason,
 * logged, and the connection closed.
 *
 * **Who the authenticated member is.** Without TLS it is the id the
 * dialer's hello claimed, backed only by the cluster secret every member
 * holds: it keeps outsiders out and one connection to one id, but a member
 * can claim another's id. When the peer port runs TLS with client
 * certificates (the session has a `peerCertificate`), it is the member the
 * certificate names (SAN `URI:rafter://member/<id>`, see `memberIdOf`): a
 * hello claiming any other id is answered with the reason
 * (`PeerIdentityError`, error data `RAFT_PEER_IDENTITY`), logged, counted
 * (`identityRefused`) and closed; with `requirePeerCertificates` so is a
 * connection without a member certificate. The Raft core adds its own
 * checks on what even a genuine member may send (`RaftCoreStats`).
 *
 * {@link PeerAcceptor} is Web-standard (it builds the per-connection
 * method tables of `rpc/server/server_connection.ts`); {@link servePeersOn} runs it
 * on the listener of a runtime's `serve` (`raft/deno.ts`'s `servePeers`
 * passes Deno's).
 *
 * @module
 */

import { INVALID_PARAMS, messageOf, RpcError } from "../rpc/errors.ts";
import type { Methods } from "../rpc/server/dispatcher.ts";
import type { RpcServer, ServeOptions } from "../rpc/server/server.ts";
import type {
  RpcSession,
  SessionMethods,
} from "../rpc/server/server_connection.ts";
import { parseMessage } from "./_message_validation.ts";
import {
  AcceptorHandshake,
  type ClusterKey,
  ClusterMismatchError,
  HANDSHAKE_TIMEOUT_MS,
  PEER_AUTH_METHOD,
  PEER_HELLO_METHOD,
  PEER_IDENTITY_REFUSED,
  PeerHandshakeError,
  PeerIdentityError,
  PeerProbeAnswered,
} from "./peer_auth.ts";
import type { PeerDirectory } from "./peer_directory.ts";
import { STEP_METHOD } from "./peer_transport.ts";
import type { Message, NodeId } from "./types.ts";

/**
 * An application-level peer method (e.g. `registry.leaseSync`): called
 * with the named params the peer sent (undefined for none) and the id of
 * the authenticated member that sent them. What it returns is the answer
 * to a request; notifications get none.
 */
export type PeerHandler = (params: unknown, from: NodeId) => unknown;

/** How long a refused client is kept to read why, ms. */
const REFUSAL_LINGER_MS = 200;

/** Method names the peer port reserves for itself. */
const RESERVED = new Set([
  PEER_HELLO_METHOD,
  PEER_AUTH_METHOD,
  STEP_METHOD,
  "rpc.ping",
]);

/** Settings of a {@link PeerAcceptor}. */
export interface PeerAcceptorOptions {
  /** This node's id: what a hello's `to` and a message's `to` must be. */
  id: NodeId;
  /**
   * The member table: which ids may connect; learnt client URLs and the
   * time each member was last heard from are written to it.
   */
  directory: PeerDirectory;
  /** The cluster secret. */
  key: ClusterKey;
  /**
   * This node's cluster id (`DataDir.clusterId`): a hello of another
   * cluster is refused.
   */
  clusterId: string;
  /** This node's client URL, told to each authenticated peer. @default null */
  clientUrl?: () => string | null;
  /**
   * Receives the valid Raft messages of each `raft.step` from an
   * authenticated peer (`from` is that peer, `to` this node).
   */
  onStep(messages: Message[], from: NodeId): void;
  /**
   * Admits an authenticated peer that is not in `directory` and was never
   * removed from it: a member added by a configuration change this node has
   * not seen yet (it is behind, and that member may now lead: without it
   * this node could never catch up, Raft dissertation §4.1). `peerUrl` is
   * where the peer says it listens. Return true after adding it to the
   * directory (and a connection to it), false to refuse it. @default refuse
   */
  onNewPeer?(id: NodeId, peerUrl: string): boolean;
  /**
   * Application-level peer methods by name, for authenticated connections
   * only. Names `peer.hello`, `peer.auth`, `raft.step` and `rpc.ping` are
   * reserved. @default none
   */
  handlers?: Readonly<Record<string, PeerHandler>>;
  /** Time a connection has to complete the handshake, ms. @default 2000 */
  handshakeTimeoutMs?: number;
  /**
   * Refuse every connection whose TLS client certificate does not name a
   * member (SAN `URI:rafter://member/<id>`), plain TCP ones included, even
   * when it knows the cluster secret. Set it when the peer port runs TLS
   * with client certificates of the cluster CA. Without it a certificate
   * that names a member is still enforced. @default false
   */
  requirePeerCertificates?: boolean;
  /**
   * Receives one line per refused connection or dropped message, at most
   * one per remote host (or peer) per `logIntervalMs`, and one per join
   * probe answered (`level` "info"; the others are "warn"). @default no
   * logging
   */
  log?(line: string, level?: "info" | "warn"): void;
  /** Least time between two log lines about one remote host or peer, ms. @default 10000 */
  logIntervalMs?: number;
}

interface SessionState {
  session: RpcSession;
  handshake: AcceptorHandshake;
  peer: NodeId | null;
  refused: boolean;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Makes the method table of each peer connection and enforces the
 * handshake. Serve it with `methods: acceptor.methods` and
 * `onMethodNotFound: acceptor.onMethodNotFound` (as {@link servePeersOn}
 * does).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { serve } from "../adapter/deno/serve.ts";
 * import { dial } from "../rpc/transport/dial.ts";
 * import { authenticatePeer, ClusterKey } from "./peer_auth.ts";
 * import { PeerDirectory } from "./peer_directory.ts";
 * import { PeerAcceptor } from "./peer_server.ts";
 * import type { Message } from "./types.ts";
 * const key = await ClusterKey.random();
 * const clusterId = "0123456789abcdef";
 * const received: Message[] = [];
 * const acceptor = new PeerAcceptor({
 *   id: "n1", clusterId, key,
 *   directory: new PeerDirectory("n1", { n1: "tcp://127.0.0.1:7101", n2: "tcp://127.0.0.1:7102" }),
 *   onStep: (messages) => received.push(...messages), // a RaftNode's step
 * });
 * const server = serve({
 *   methods: acceptor.methods,
 *   onMethodNotFound: acceptor.onMethodNotFound,
 * });
 * // Member n2 dials, authenticates, and sends a Raft message.
 * const connection = await dial(server.url);
 * await authenticatePeer(connection, { key, clusterId, from: "n2", to: "n1", clientUrl: null });
 * const vote: Message = { type: "voteResponse", from: "n2", to: "n1", term: 1, granted: true };
 * await connection.call("raft.step", [[vote]]);
 * assert.deepEqual(received, [vote]);
 * assert.equal(acceptor.stats.delivered, 1);
 * connection.close();
 * await server.close();
 * ```
 */
export class PeerAcceptor {
  /** The per-connection method table, for `serve({ methods })`. */
  readonly methods: SessionMethods;
  /**
   * Closes unauthenticated connections that call anything else, for
   * `serve({ onMethodNotFound })`; a client that dialed the peer port by
   * mistake is first told which port to use.
   */
  readonly onMethodNotFound: (
    method: string,
    session: RpcSession,
  ) => string | void;
  readonly #options: PeerAcceptorOptions;
  readonly #sessions = new Map<number, SessionState>();
  readonly #log: RateLimitedLog;
  readonly #stats: PeerServerStats = {
    delivered: 0,
    forgedFrom: 0,
    wrongTo: 0,
    notMember: 0,
    invalid: 0,
    refusedConnections: 0,
    identityRefused: 0,
  };

  /**
   * Makes the acceptor; it serves nothing until its methods are mounted.
   *
   * @param options the node, its members, key and handlers.
   * @throws {RangeError} when a handler uses a reserved method name.
   */
  constructor(options: PeerAcceptorOptions) {
    for (const method of Object.keys(options.handlers ?? {})) {
      if (RESERVED.has(method)) {
        throw new RangeError(
          `the peer method name ${method} is reserved; pick another`,
        );
      }
    }
    this.#options = options;
    const log = options.log;
    this.#log = new RateLimitedLog(
      log === undefined ? () => {} : (line) => log(line, "warn"),
      options.logIntervalMs ?? 10_000,
    );
    this.methods = (session) => this.#table(session);
    this.onMethodNotFound = (method, session) => {
      const state = this.#sessions.get(session.id);
      if (state === undefined || state.peer !== null) return;
      this.#refuse(
        state,
        `called ${JSON.stringify(method)} before authenticating`,
        { linger: true },
      );
      return `Method not found: ${
        JSON.stringify(method)
      } is not served on the peer port of registry node ${this.#options.id}, which only its peers use; clients and servers use its client port (by default the peer port - 100)`;
    };
  }

  /**
   * What authenticated peers sent that was dropped: the sum of
   * `forgedFrom`, `wrongTo` and `notMember` (messages) and `invalid`
   * (refused `raft.step` calls) of {@link PeerAcceptor.stats}.
   */
  get droppedMessages(): number {
    const s = this.#stats;
    return s.forgedFrom + s.wrongTo + s.notMember + s.invalid;
  }

  /** Connections closed before or during the handshake. */
  get refusedConnections(): number {
    return this.#stats.refusedConnections;
  }

  /** Counts of delivered and dropped Raft messages and refused connections (a copy). */
  get stats(): PeerServerStats {
    return { ...this.#stats };
  }

  /** Peer connections open now, authenticated or not. */
  get openConnections(): number {
    return this.#sessions.size;
  }

  #table(session: RpcSession): Methods {
    const { id, key, directory, clusterId } = this.#options;
    const timeoutMs = this.#options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS;
    const state: SessionState = {
      session,
      handshake: new AcceptorHandshake({
        key,
        clusterId,
        self: id,
        members: directory.ids,
        admit: (peer) =>
          this.#options.onNewPeer !== undefined && !directory.wasRemoved(peer),
        peerCertificate: session.peerCertificate,
        requireCertificate: this.#options.requirePeerCertificates ?? false,
      }),
      peer: null,
      refused: false,
      timer: undefined,
    };
    state.timer = setTimeout(() => {
      state.timer = undefined;
      this.#refuse(state, `no handshake within ${timeoutMs} ms`);
    }, timeoutMs);
    this.#sessions.set(session.id, state);
    session.signal.addEventListener("abort", () => {
      clearTimeout(state.timer);
      this.#sessions.delete(session.id);
      if (state.peer === null && !state.refused) {
        this.#refuse(
          state,
          state.handshake.claimedPeer === null
            ? "closed before completing the handshake"
            : `${state.handshake.claimedPeer} closed the connection after our peer.hello answer (does it hold another cluster secret?)`,
        );
      }
    }, { once: true });

    /** Runs `fn` for an authenticated connection; refuses any other. */
    const authenticated = <T>(method: string, fn: (peer: NodeId) => T) => {
      if (state.peer === null) {
        this.#refuse(state, `called ${method} before authenticating`);
        return null;
      }
      return fn(state.peer);
    };

    const table: Methods = {
      [PEER_HELLO_METHOD]: async (params: unknown) => {
        if (state.peer !== null) {
          this.#refuse(state, "sent peer.hello after authenticating");
          return null;
        }
        try {
          return await state.handshake.hello(params);
        } catch (error) {
          if (error instanceof ClusterMismatchError) {
            // Answered, so the dialer can log why, then closed.
            this.#refuse(state, error.message, { linger: true });
            throw new RpcError(INVALID_PARAMS, error.message);
          }
          if (error instanceof PeerIdentityError) {
            this.#stats.identityRefused++;
            this.#refuse(state, error.message, { linger: true });
            throw new RpcError(
              INVALID_PARAMS,
              error.message,
              PEER_IDENTITY_REFUSED,
            );
          }
          this.#refuse(state, messageOf(error));
          return null;
        }
      },
      [PEER_AUTH_METHOD]: async (params: unknown) => {
        try {
          const { peer, clientUrl, peerUrl } = await state.handshake.auth(
            params,
          );
          if (state.refused || session.signal.aborted) return null;
          if (
            !directory.has(peer) &&
            (peerUrl === null || !this.#options.onNewPeer!(peer, peerUrl))
          ) {
            this.#refuse(
              state,
              `${peer} is not a member this node knows${
                peerUrl === null ? " (and it sent no peer URL)" : ""
              }`,
            );
            return null;
          }
          clearTimeout(state.timer);
          state.timer = undefined;
          state.peer = peer;
          directory.setClientUrl(peer, clientUrl);
          directory.heard(peer);
          return { clientUrl: this.#options.clientUrl?.() ?? null };
        } catch (error) {
          if (!(error instanceof PeerHandshakeError)) throw error;
          if (error instanceof PeerProbeAnswered) {
            // A joining node checked the secret before it asks to be
            // added: closed like every probe, and no fault.
            const remote = state.session.remoteAddress ?? "an unknown address";
            this.#options.log?.(
              `${this.#options.id}: answered a ${error.message} (from ${remote})`,
              "info",
            );
            this.#end(state);
            return null;
          }
          this.#refuse(state, error.message);
          return null;
        }
      },
      [STEP_METHOD]: (messages: unknown) =>
        authenticated(STEP_METHOD, (peer) => this.#step(peer, messages)),
      // The dialer's liveness probe: it also tells this side when it last
      // heard from that peer.
      "rpc.ping": () =>
        authenticated("rpc.ping", (peer) => {
          directory.heard(peer);
          return "pong";
        }),
    };
    for (
      const [method, handler] of Object.entries(this.#options.handlers ?? {})
    ) {
      table[method] = (params?: unknown) =>
        authenticated(method, (peer) => {
          directory.heard(peer);
          const from = (params as { from?: unknown } | null)?.from;
          if (typeof from === "string" && from !== peer) {
            this.#forged(peer, method, from, "");
            throw new RpcError(
              INVALID_PARAMS,
              `Invalid params: ${method} names from=${
                JSON.stringify(from.slice(0, 64))
              }, but this connection is member ${peer}'s`,
            );
          }
          return handler(params, peer);
        });
    }
    return table;
  }

  #step(peer: NodeId, messages: unknown): void {
    const { id: self, directory } = this.#options;
    if (!Array.isArray(messages)) {
      this.#invalid(peer, `${STEP_METHOD} params are not [messages]`);
      throw new RpcError(
        INVALID_PARAMS,
        `Invalid params: ${STEP_METHOD} takes [messages]`,
      );
    }
    // A batch with a malformed message comes from a broken or hostile peer:
    // none of it is stepped (a request is answered -32602).
    let parsed: Message[];
    try {
      parsed = messages.map(parseMessage);
    } catch (error) {
      const reason = (error as Error).message;
      this.#invalid(peer, reason);
      throw new RpcError(INVALID_PARAMS, `Invalid params: ${reason}`);
    }
    directory.heard(peer);
    const valid: Message[] = [];
    for (const message of parsed) {
      const kind = message.from !== peer
        ? "forgedFrom"
        : message.to !== self
        ? "wrongTo"
        : !directory.has(peer)
        ? "notMember"
        : null;
      if (kind === null) {
        valid.push(message);
        continue;
      }
      if (kind === "forgedFrom") {
        this.#forged(peer, "a raft message", message.from, message.to);
        continue;
      }
      this.#stats[kind]++;
      const why = kind === "notMember"
        ? `${peer} is no longer a member`
        : "a peer speaks only for itself, to this node";
      this.#log.line(
        `${kind}:${peer}`,
        `${self}: dropped a raft message from peer ${peer} that claims from=${
          JSON.stringify(message.from.slice(0, 64))
        } to=${JSON.stringify(message.to.slice(0, 64))} (${why}; ${
          this.#stats[kind]
        } dropped so far)`,
      );
    }
    this.#stats.delivered += valid.length;
    if (valid.length > 0) this.#options.onStep(valid, peer);
  }

  /**
   * Counts and logs (rate-limited, per peer) a message whose `from` is not
   * the connection's authenticated member: what the connection speaks
   * for is authoritative (its certificate's member, or the id it proved
   * the secret for), never the message's own claim.
   */
  #forged(peer: NodeId, what: string, from: string, to: string): void {
    this.#stats.forgedFrom++;
    this.#log.line(
      `forgedFrom:${peer}`,
      `${this.#options.id}: dropped ${what} from peer ${peer} that claims from=${
        JSON.stringify(from.slice(0, 64))
      }${
        to === "" ? "" : ` to=${JSON.stringify(to.slice(0, 64))}`
      } (a peer speaks only for itself, to this node; ${this.#stats.forgedFrom} dropped so far)`,
    );
  }

  /** Counts and logs (rate-limited, per peer) a batch that failed validation. */
  #invalid(peer: NodeId, reason: string): void {
    this.#stats.invalid++;
    this.#log.line(
      `invalid:${peer}`,
      `${this.#options.id}: dropped invalid raft messages from peer ${peer}: ${
        reason.slice(0, 300)
      } (${this.#stats.invalid} invalid batches so far)`,
    );
  }

  /**
   * Refuses the connection: logs why and closes it, at once, or with
   * `linger` a moment later so the answer that says why reaches the
   * client (nothing else it sends is served meanwhile).
   */
  #refuse(
    state: SessionState,
    reason: string,
    options: { linger?: boolean } = {},
  ): void {
    if (state.refused) return;
    this.#stats.refusedConnections++;
    const remote = state.session.remoteAddress ?? "an unknown address";
    this.#log.line(
      `refuse:${hostOf(remote)}`,
      `${this.#options.id}: refused a peer connection from ${remote}: ${reason}`,
    );
    this.#end(state, options.linger ? REFUSAL_LINGER_MS : 0);
  }

  /** Ends a session that will not be admitted: at once, or after `lingerMs`. */
  #end(state: SessionState, lingerMs = 0): void {
    state.refused = true;
    clearTimeout(state.timer);
    state.timer = undefined;
    const session = state.session;
    if (lingerMs > 0) setTimeout(() => session.close(), lingerMs);
    else session.close();
  }
}

/** `127.0.0.1:5123` → `127.0.0.1`, `[::1]:5123` → `[::1]`. */
function hostOf(address: string): string {
  const colon = address.lastIndexOf(":");
  return colon > 0 && /^\d+$/.test(address.slice(colon + 1))
    ? address.slice(0, colon)
    : address;
}

/**
 * Logs at most one line per key per interval; the next line that gets
 * through says how many were held back.
 */
class RateLimitedLog {
  readonly #log: (line: string) => void;
  readonly #intervalMs: number;
  readonly #last = new Map<string, { at: number; held: number }>();

  constructor(log: (line: string) => void, intervalMs: number) {
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  line(key: string, text: string): void {
    const now = Date.now();
    const last = this.#last.get(key);
    if (last !== undefined && now - last.at < this.#intervalMs) {
      last.held++;
      return;
    }
    const held = last?.held ?? 0;
    this.#log(
      held > 0 ? `${text} (${held} more like it not logged)` : text,
    );
    this.#last.set(key, { at: now, held: 0 });
    if (this.#last.size > 1024) {
      for (const [k, v] of this.#last) {
        if (now - v.at >= this.#intervalMs) this.#last.delete(k);
      }
    }
  }
}

/** Counts kept by a {@link PeerAcceptor} since it was made. */
export interface PeerServerStats {
  /** Raft messages handed to `onStep`. */
  delivered: number;
  /** Dropped: their `from` was not the authenticated sender (forged). */
  forgedFrom: number;
  /** Dropped: their `to` was not this node. */
  wrongTo: number;
  /** Dropped: their sender is no longer a member (removed from the directory). */
  notMember: number;
  /**
   * `raft.step` calls refused whole: a message failed validation
   * (`parseMessage`), or the params were not an array. One per call.
   */
  invalid: number;
  /** Connections closed before or during the handshake. */
  refusedConnections: number;
  /**
   * Of `refusedConnections`: hellos refused for the connection's
   * certificate (it names another member than the hello's `from`, or none
   * while `requirePeerCertificates` is set).
   */
  identityRefused: number;
}

/** Settings of {@link servePeersOn}: the acceptor's, and where to listen. */
export interface ServePeersOptions extends PeerAcceptorOptions {
  /** Interface to listen on. @default "127.0.0.1" */
  hostname?: string;
  /** TCP port; 0 picks a free one. @default 0 */
  port?: number;
  /** Largest frame accepted, bytes. @default 8 MiB (8_388_608) */
  maxFrameBytes?: number;
  /**
   * More options for `serve` (e.g. its TLS settings, so that the peer port
   * runs TLS with client certificates; pair it with
   * `requirePeerCertificates`). The acceptor's methods and the options
   * above win. @default none
   */
  serveOptions?: Partial<ServeOptions>;
}

/** A running peer port, as {@link servePeersOn} returns it. */
export interface PeerServer extends RpcServer {
  /** The acceptor: counts of refused connections and dropped messages. */
  readonly acceptor: PeerAcceptor;
}

/**
 * A runtime's JSON-RPC server on TCP (`adapter/deno/serve.ts`'s `serve`
 * under Deno): the Raft and registry layers are handed one, and import
 * no runtime adapter themselves.
 */
export type ServeFunction = (options: ServeOptions) => RpcServer;

/**
 * Listens on the peer port with `serve` (a runtime's TCP server) and
 * serves {@link PeerAcceptor}'s methods: the handshake, `raft.step`, and
 * the application's peer methods. Under Deno, `servePeers` of
 * `raft/deno.ts` passes Deno's `serve`.
 *
 * @throws what `serve` throws when the address cannot be bound (under
 * Deno, `Deno.errors.AddrInUse`).
 * @throws {RangeError} when a handler uses a reserved method name.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { serve } from "../adapter/deno/serve.ts";
 * import { dial } from "../rpc/transport/dial.ts";
 * import { authenticatePeer, ClusterKey } from "./peer_auth.ts";
 * import { PeerDirectory } from "./peer_directory.ts";
 * import { servePeersOn } from "./peer_server.ts";
 * const key = await ClusterKey.random();
 * const clusterId = "0123456789abcdef";
 * const server = servePeersOn(serve, {
 *   id: "n1", clusterId, key,
 *   directory: new PeerDirectory("n1", { n1: "tcp://127.0.0.1:7101", n2: "tcp://127.0.0.1:7102" }),
 *   onStep: () => {}, // a RaftNode's step
 *   // An application's peer method: it is told which member called.
 *   handlers: { "app.whoami": (_params, from) => from },
 * });
 * const connection = await dial(server.url);
 * await authenticatePeer(connection, { key, clusterId, from: "n2", to: "n1", clientUrl: null });
 * assert.equal(await connection.call("app.whoami"), "n2");
 * connection.close();
 * await server.close();
 * ```
 */
export function servePeersOn(
  serve: ServeFunction,
  options: ServePeersOptions,
): PeerServer {
  const acceptor = new PeerAcceptor(options);
  const server = serve({
    ...options.serveOptions,
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
    maxFrameBytes: options.maxFrameBytes ?? 8 * 1024 * 1024,
    methods: acceptor.methods,
    onMethodNotFound: acceptor.onMethodNotFound,
  });
  return { ...server, acceptor };
}
