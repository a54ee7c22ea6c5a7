/**
 * Sessions that survive their server (JOnAS CMI's stateful session bean
 * fail-over): a server keeps each session's state, and before it answers
 * a call that changed it, sends the new state to a backup, another server
 * bound under the same name. When the server dies, the client's stub
 * (with the {@link session} distributor) moves the session to that backup,
 * which holds every acknowledged change, takes the session over and
 * picks a backup of its own. A session expires `ttlMs` after its last call
 * on its server and on its backup alike.
 *
 * A {@link SessionStore} is the server side, runtime-free: serve its
 * `methods` (with your runtime's `serve()`, beside other methods if you
 * like) and give it the server's binding with {@link SessionStore.bound}.
 *
 * @module
 */

import { INVALID_PARAMS, RpcError } from "../../rpc/errors.ts";
import { UNAVAILABLE } from "../../protocol/registry.ts";
import type { Methods } from "../../rpc/server/method.ts";
import type { Candidate, Distributor } from "../distributors/distributor.ts";
import type { Stub } from "../call/cluster_stub.ts";

/** JSON-RPC code of a call for a session this server does not hold (expired, closed, or never opened). */
export const SESSION_NOT_FOUND: -32016 = -32016;

/** The method that opens a session: answers its id. */
export const OPEN_METHOD = "session.open";
/** The method that closes a session (on its server and its backup). */
export const CLOSE_METHOD = "session.close";
/** Server to server: a session's new state, sent to its backup. */
export const REPLICATE_METHOD = "session.replicate";

/**
 * A session method: reads or changes `state` (in place) and returns the
 * caller's result; `args` are the call's params after the session id.
 */
// deno-lint-ignore no-explicit-any
export type SessionMethod<S> = (state: S, ...args: any[]) => unknown;

/** Where a session lives now, as every answer tells the client. */
export interface SessionRoute {
  /** The session's id. */
  id: string;
  /** The server that holds it (its endpoint id). */
  primary: string;
  /** The server that holds its copy, or null when none could take it. */
  backup: string | null;
}

/** What a session method answers: its result, and where the session lives. */
export interface SessionAnswer<T = unknown> {
  /** What the method returned. */
  value: T;
  /** Where the session lives now. */
  session: SessionRoute;
}

/** Settings of a {@link SessionStore}. */
export interface SessionStoreOptions<S> {
  /** The state of a new session. */
  initial(): S;
  /** The session's methods, called as `method(sessionId, ...args)`. */
  methods: Readonly<Record<string, SessionMethod<S>>>;
  /**
   * Methods that only read the state: answered without a round trip to
   * the backup. @default none
   */
  readOnly?: readonly string[];
  /** A session expires this long after its last call, ms. @default 600_000 */
  ttlMs?: number;
  /** Most sessions held (as server or backup); an open beyond is refused. @default 100_000 */
  maxSessions?: number;
  /** How long a call waits for the backup's acknowledgement, ms. @default 2_000 */
  replicateTimeoutMs?: number;
  /** Clock, ms. @default Date.now */
  now?(): number;
}

/** A stub that can call any method of the name (a RafterClient's `stub()`). */
export interface SessionPeers {
  /** A stub of `name` with `options` (the store sends copies through it). */
  stub<T>(
    name: string,
    options: {
      distributor: Distributor;
      deadlineMs?: number;
      idempotent?: boolean;
    },
  ): Stub<T>;
}

interface Held<S> {
  state: S;
  version: number;
  role: "primary" | "backup";
  /** The primary's id (for a backup) or this server's backup (for a primary). */
  peer: string | null;
  expiresAt: number;
  /** The calls on the session run one at a time: the last one's end. */
  busy: Promise<unknown>;
}

interface ReplicateParams {
  sessionId: string;
  version: number;
  /** The state, or null when the session was closed. */
  state: unknown;
  ttlMs: number;
  primary: string;
}

/**
 * The sessions of one server. Its {@link methods}: `session.open` (answers
 * a new session's id), one per session method (`method(sessionId, ...)`,
 * answering a {@link SessionAnswer}), `session.close`, and the
 * server-to-server `session.replicate`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { type SessionAnswer, SessionStore } from "./session_store.ts";
 * const store = new SessionStore<{ items: string[] }>({
 *   initial: () => ({ items: [] }),
 *   methods: {
 *     add: (cart, item: string) => cart.items.push(item),
 *     list: (cart) => cart.items,
 *   },
 *   readOnly: ["list"],
 * });
 * // Alone (no backup bound yet), a change is kept here only.
 * store.alone("s1");
 * const call = (method: string, ...args: unknown[]) =>
 *   store.methods[method](...args) as Promise<SessionAnswer>;
 * const { value: id, session } = await call("session.open");
 * assert.equal(session.primary, "s1");
 * assert.equal((await call("add", id, "tea")).value, 1);
 * assert.deepEqual((await call("list", id)).value, ["tea"]);
 * ```
 */
export class SessionStore<S> {
  /** The method table to serve. */
  readonly methods: Methods;
  readonly #options: SessionStoreOptions<S>;
  readonly #sessions = new Map<string, Held<S>>();
  readonly #readOnly: Set<string>;
  readonly #now: () => number;
  readonly #ttlMs: number;
  #self: string | null = null;
  #name = "";
  #backups: Stub<Record<string, never>> | null = null;
  /** Sessions whose backup is being chosen: session id → wanted backup id. */
  readonly #wanted = new Map<string, string | null>();
  #sweepAt = 0;

  /**
   * A store of sessions made by `options.initial` and changed by
   * `options.methods`.
   *
   * @throws {TypeError} when a method name is reserved or not a function.
   */
  constructor(options: SessionStoreOptions<S>) {
    this.#options = options;
    this.#readOnly = new Set(options.readOnly ?? []);
    this.#now = options.now ?? Date.now;
    this.#ttlMs = options.ttlMs ?? 600_000;
    const methods: Methods = {
      [OPEN_METHOD]: () => this.#open(),
      [CLOSE_METHOD]: (id: unknown) => this.#close(id),
      [REPLICATE_METHOD]: (params: ReplicateParams) => this.#replicated(params),
    };
    for (const [name, method] of Object.entries(options.methods)) {
      if (typeof method !== "function") {
        throw new TypeError(`methods.${name} is not a function`);
      }
      if (name.startsWith("session.") || name.startsWith("rpc.")) {
        throw new TypeError(
          `${name}: method names starting with session. or rpc. are reserved; rename it`,
        );
      }
      methods[name] = (id: unknown, ...args: unknown[]) =>
        this.#call(name, method, id, args);
    }
    this.methods = methods;
  }

  /**
   * Starts sending sessions' copies to the other servers of `name`
   * through `peers` (the server's RafterClient), this server being
   * endpoint `self` of that name (its binding's id).
   */
  bound(peers: SessionPeers, name: string, self: string): void {
    this.#self = self;
    this.#name = name;
    this.#backups = peers.stub<Record<string, never>>(name, {
      distributor: this.#backupDistributor(),
      deadlineMs: this.#options.replicateTimeoutMs ?? 2_000,
      // A copy sent twice is the same copy (versions only move forward).
      idempotent: true,
    });
  }

  /** Runs without backups (a single server, or a test): changes are kept here only. */
  alone(self: string): void {
    this.#self = self;
    this.#backups = null;
  }

  /** Sessions held now: as their server, and as a backup. */
  get counts(): { primary: number; backup: number } {
    let primary = 0;
    for (const held of this.#sessions.values()) {
      if (held.role === "primary") primary++;
    }
    return { primary, backup: this.#sessions.size - primary };
  }

  async #open(): Promise<SessionAnswer<string>> {
    this.#sweep();
    if (this.#sessions.size >= (this.#options.maxSessions ?? 100_000)) {
      throw new RpcError(
        UNAVAILABLE,
        `this server holds ${this.#sessions.size} sessions, its maxSessions: close sessions, or raise the limit`,
      );
    }
    const self = this.#selfId();
    const id = `${self}.${crypto.randomUUID()}`;
    const held: Held<S> = {
      state: this.#options.initial(),
      version: 0,
      role: "primary",
      peer: null,
      expiresAt: this.#now() + this.#ttlMs,
      busy: Promise.resolve(),
    };
    await this.#replicate(id, held, held.state, 1);
    held.version = 1;
    this.#sessions.set(id, held);
    return { value: id, session: this.#route(id, held) };
  }

  /** Runs one call on a session after the calls before it (one at a time: each change starts from the last). */
  #call(
    name: string,
    method: SessionMethod<S>,
    id: unknown,
    args: unknown[],
  ): Promise<SessionAnswer> {
    let held: Held<S>;
    try {
      held = this.#held(id);
    } catch (error) {
      return Promise.reject(error);
    }
    const run = held.busy.then(() =>
      this.#callNow(name, method, id as string, held, args)
    );
    held.busy = run.catch(() => {});
    return run;
  }

  async #callNow(
    name: string,
    method: SessionMethod<S>,
    sessionId: string,
    held: Held<S>,
    args: unknown[],
  ): Promise<SessionAnswer> {
    if (held.role === "backup") {
      // The client moved here: its server is gone (or unreachable). Take
      // the session over; the old server, if alive, drops its copy when
      // it next hears of it (its version is behind).
      held.role = "primary";
      held.peer = null;
    }
    held.expiresAt = this.#now() + this.#ttlMs;
    if (this.#readOnly.has(name)) {
      const value = method(held.state, ...args);
      return { value: value ?? null, session: this.#route(sessionId, held) };
    }
    // The change runs on a copy; it becomes the session's state only once
    // the backup has it.
    const next = structuredClone(held.state);
    const value = method(next, ...args);
    await this.#replicate(sessionId, held, next, held.version + 1);
    held.state = next;
    held.version++;
    return { value: value ?? null, session: this.#route(sessionId, held) };
  }

  async #close(id: unknown): Promise<SessionAnswer<boolean>> {
    const held = this.#held(id);
    const sessionId = id as string;
    await this.#replicate(sessionId, held, null, held.version + 1).catch(
      () => {},
    );
    this.#sessions.delete(sessionId);
    return {
      value: true,
      session: { id: sessionId, primary: this.#selfId(), backup: held.peer },
    };
  }

  /** A copy from a session's server: kept if newer than the one held. */
  #replicated(params: ReplicateParams): { version: number } {
    this.#sweep();
    const { sessionId, version, state, ttlMs, primary } = params ?? {};
    if (typeof sessionId !== "string" || typeof version !== "number") {
      throw new RpcError(
        INVALID_PARAMS,
        "Invalid params: session.replicate takes { sessionId, version, state, ttlMs, primary }",
      );
    }
    const held = this.#sessions.get(sessionId);
    if (held !== undefined && held.version >= version) {
      return { version: held.version };
    }
    if (state === null) {
      this.#sessions.delete(sessionId);
      return { version };
    }
    if (
      held === undefined &&
      this.#sessions.size >= (this.#options.maxSessions ?? 100_000)
    ) {
      throw new RpcError(UNAVAILABLE, "this server holds its maxSessions");
    }
    this.#sessions.set(sessionId, {
      state: state as S,
      version,
      role: "backup",
      peer: primary,
      expiresAt: this.#now() + (ttlMs ?? this.#ttlMs),
      busy: Promise.resolve(),
    });
    return { version };
  }

  /**
   * Sends `state` at `version` to the session's backup (another one if it
   * cannot be reached) and waits for its acknowledgement.
   *
   * @throws {RpcError} UNAVAILABLE when no other server took it: the call
   * fails and the session keeps its state (the change was made on a copy).
   */
  async #replicate(
    sessionId: string,
    held: Held<S>,
    state: S | null,
    version: number,
  ): Promise<void> {
    const backups = this.#backups;
    if (backups === null) return;
    this.#wanted.set(sessionId, held.peer);
    try {
      await backups.$call(
        REPLICATE_METHOD,
        {
          sessionId,
          version,
          state,
          ttlMs: this.#ttlMs,
          primary: this.#selfId(),
        } satisfies ReplicateParams,
      );
      held.peer = this.#wanted.get(sessionId) ?? null;
    } catch (error) {
      // The distributor found no server but this one (a TypeError from
      // the stub: choose() returned none).
      const why = error instanceof TypeError
        ? `no other server is bound under "${this.#name}" to hold a copy`
        : (error as Error).message;
      throw new RpcError(
        UNAVAILABLE,
        `no backup server took session ${sessionId}'s change (${why}); the change was not made: retry, or start another server under "${this.#name}"`,
        { mayHaveApplied: false },
      );
    } finally {
      this.#wanted.delete(sessionId);
    }
  }

  /** Picks a session's backup: the one it has, else another server than this one. */
  #backupDistributor(): Distributor {
    let turn = 0;
    return {
      hedge: false,
      choose: (endpoints: readonly Candidate[], call) => {
        const params = call.params as unknown as ReplicateParams;
        const wanted = this.#wanted.get(params.sessionId) ?? null;
        const others = endpoints.filter((e) => e.id !== this.#self);
        const chosen = others.find((e) => e.id === wanted) ??
          others[turn++ % Math.max(1, others.length)];
        return chosen;
      },
      onReturn: (_result, call) => {
        const params = call.params as unknown as ReplicateParams;
        this.#wanted.set(params.sessionId, call.endpoint.id);
        return undefined;
      },
    };
  }

  #held(id: unknown): Held<S> {
    this.#sweep();
    if (typeof id !== "string") {
      throw new RpcError(
        INVALID_PARAMS,
        "Invalid params: a session method takes the session id first (from session.open)",
      );
    }
    const held = this.#sessions.get(id);
    if (held === undefined) {
      throw new RpcError(
        SESSION_NOT_FOUND,
        `session ${id} is not held here: it expired, was closed, or never opened; open a new one`,
      );
    }
    return held;
  }

  #route(id: string, held: Held<S>): SessionRoute {
    return { id, primary: this.#selfId(), backup: held.peer };
  }

  #selfId(): string {
    if (this.#self === null) {
      throw new TypeError(
        "the SessionStore is not bound: call bound(client, name, id) (or alone(id)) once its server serves",
      );
    }
    return this.#self;
  }

  /** Drops expired sessions, at most once a second. */
  #sweep(): void {
    const now = this.#now();
    if (now < this.#sweepAt) return;
    this.#sweepAt = now + 1_000;
    for (const [id, held] of this.#sessions) {
      if (held.expiresAt <= now) this.#sessions.delete(id);
    }
  }
}
