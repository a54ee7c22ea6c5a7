/**
 * The server side of one connection: reads frames (NDJSON or CBOR, told
 * apart by the first byte) from a byte stream, runs them against a method
 * table, and writes the responses back in the same codec, within the
 * connection's limits (frame size, requests in flight, idle time).
 *
 * @module
 */

import {
  type CallInfo,
  type DispatchOptions,
  hooksOf,
  type Methods,
  RunningCalls,
} from "./dispatcher.ts";
import { AUTHENTICATE_METHOD, type RpcSession } from "./method.ts";
import {
  type Frame,
  FrameWriter,
  utf8Length,
} from "../framing/_frame_writer.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "../framing/_ndjson.ts";
import {
  CANCEL_METHOD,
  GOAWAY_METHOD,
  isRequestId,
  type Params,
  type RequestId,
} from "../message.ts";
import type { ByteStream, PeerCertificate } from "../transport/transport.ts";
import {
  CANCELLED,
  INVALID_PARAMS,
  LIMIT_EXCEEDED,
  messageOf,
  RpcError,
  UNAUTHENTICATED,
} from "../errors.ts";
import type {
  FrameCodec,
  FrameDecoder,
  InboundFrame,
} from "../codec/_frame_codec.ts";
import { codecOfFirstByte, missingCodecDecoder } from "../codec/codecs.ts";
import { ndjsonCodec } from "../codec/_ndjson_codec.ts";
import {
  dispatch,
  type Hooks,
  reportCall,
  serializeError,
} from "./_dispatch.ts";
import { jsonValue } from "../codec/_json_value.ts";
import { Refusal } from "../framing/_refusal.ts";
import { directOf, streamReading } from "../transport/conn_stream.ts";

export type { RpcSession } from "./method.ts";
export { AUTHENTICATE_METHOD } from "./method.ts";

/**
 * A method table made for each connection, so methods can keep per-client
 * state and push notifications through the {@link RpcSession}.
 */
export type SessionMethods = (session: RpcSession) => Methods;

let nextSessionId = 1;

/** Default largest number of requests one connection runs at once: 128. */
export const DEFAULT_MAX_IN_FLIGHT = 128;
/** Default idle timeout of a server connection: 300_000 ms (5 minutes). */
export const DEFAULT_IDLE_TIMEOUT_MS = 300_000;
/** Default time a frame may take to arrive whole: 10_000 ms. */
export const DEFAULT_FRAME_TIMEOUT_MS = 10_000;
/** Default time a connection has to authenticate: 10_000 ms. */
export const DEFAULT_AUTH_TIMEOUT_MS = 10_000;
/** Default time a client may leave written answers unread: 30_000 ms. */
export const DEFAULT_WRITE_TIMEOUT_MS = 30_000;
/** Default bound on the response bytes queued for one client: 16 MiB. */
export const DEFAULT_MAX_QUEUED_BYTES = 16 * 1024 * 1024;
/**
 * Default largest number of connections one server keeps open: 16_384.
 * An idle connection costs about 16 KiB of the server process (measured
 * with 10,000 on Deno 2.9), so the cap bounds that to about 256 MiB, and
 * it stays below the usual file descriptor limits of a service (65_536
 * and up), leaving room for the node's own files and peer links.
 */
export const DEFAULT_MAX_CONNECTIONS = 16_384;
/**
 * Default largest number of connections one remote address keeps open on
 * a server: 1_024. One host rarely needs more (a process pools a few
 * connections per server; many processes, or a NAT gateway, share an
 * address), and a single misbehaving or hostile host then holds at most a
 * sixteenth of {@link DEFAULT_MAX_CONNECTIONS}.
 */
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 1_024;

/** Limits every server connection enforces. */
export interface ServerLimits {
  /**
   * Largest request frame accepted, in bytes (default 1 MiB): an NDJSON
   * line without its newline, or a CBOR item without its 4-byte length. A
   * larger NDJSON line is answered with -32600 and skipped, and the
   * connection stays open; a larger CBOR length is answered with -32600 and
   * the connection closed, without reading the frame.
   */
  maxFrameBytes?: number;
  /**
   * Largest number of frames one connection runs at once (default 128). When
   * reached, further frames wait; once they add up to `maxFrameBytes`, the
   * server stops reading from the socket until one finishes, so TCP flow
   * control slows the client down. A frame counts until its response has
   * been written. `rpc.cancel` notifications never wait: they run as soon
   * as they are read, and a request they name that still waits is answered
   * -32005 without running.
   */
  maxInFlight?: number;
  /**
   * Closes a connection after this many ms with no frame received and
   * nothing in flight (default 300_000 ms; 0 disables the timeout; values
   * above about 24.8 days are capped to that).
   */
  idleTimeoutMs?: number;
  /**
   * Longest time one frame may take to arrive, in ms, from its first byte
   * to its last (default 10_000 ms; 0 disables it). A client that sends a
   * frame more slowly (a line that never ends, one byte now and then) is
   * answered a -32014 LIMIT_EXCEEDED error with id null and
   * `data: { limit: "frameTimeoutMs", value }`, and the connection is
   * closed. The time does not run while the server itself stops reading
   * (see `maxInFlight`).
   */
  frameTimeoutMs?: number;
  /**
   * Largest number of bytes of responses and notifications queued for one
   * client and not yet taken by the socket (default 16 MiB). A client that
   * sends requests and does not read the answers makes the queue grow;
   * past this bound the connection is closed (the client cannot be told:
   * it does not read) and a line is logged with `console.error`. One
   * response larger than the bound, queued alone, is still sent.
   */
  maxQueuedBytes?: number;
  /**
   * Longest time the socket may refuse the server's writes, in ms (default
   * 30_000 ms; 0 disables it): while answers are queued for a client, each
   * write must be taken by the socket within this time, else the client
   * is not reading (its receive window stays full) and the connection is
   * closed, with a line logged by `console.error`. Without it, a client
   * that asks for an answer and never reads it would hold its connection
   * (and the answer) open forever: the idle timeout does not run while a
   * call is in flight.
   */
  writeTimeoutMs?: number;
  /**
   * Largest number of connections the server keeps open (default
   * {@link DEFAULT_MAX_CONNECTIONS}, 16_384). A connection beyond it gets a
   * -32014 LIMIT_EXCEEDED error (`data: { limit: "maxConnections",
   * value }`, id null) and is closed. Only `serve()` and `serveListener`
   * count connections; `serveStream` ignores it.
   */
  maxConnections?: number;
  /**
   * Largest number of connections from one remote host (the host part of
   * the stream's `remoteAddress`; an IPv4-mapped IPv6 address counts as
   * its IPv4 address, and IPv6 addresses count by their /64 prefix, which
   * one host or site usually has whole) the server keeps open (default
   * {@link DEFAULT_MAX_CONNECTIONS_PER_ADDRESS}, 1_024). A connection beyond
   * it gets a -32014 LIMIT_EXCEEDED error (`data: { limit:
   * "maxConnectionsPerAddress", value }`, id null) and is closed. Streams
   * without a remote address are not counted per address.
   */
  maxConnectionsPerAddress?: number;
  /**
   * Makes clients authenticate: the server then has the built-in method
   * {@link AUTHENTICATE_METHOD} (`rpc.authenticate`, named params
   * `{ "token": "…" }`), which calls this hook. A truthy result is the
   * principal: the session is authenticated ({@link RpcSession.principal})
   * and the call's result is `true`. A falsy result or a throw is answered
   * -32012 UNAUTHENTICATED "Unauthenticated: the token was not accepted"
   * (an `RpcError` thrown passes through as it is), and the session stays
   * as it was. Until authenticated, every method except `rpc.ping`,
   * `rpc.authenticate` and `rpc.cancel` is answered -32012 UNAUTHENTICATED
   * telling the client to call `rpc.authenticate` first. Calls sent before
   * the `rpc.authenticate` answer arrives may be refused: wait for it.
   * Default: none (no authentication; `rpc.authenticate` is then an
   * ordinary method name).
   */
  authenticate?: (token: string, session: RpcSession) => unknown;
  /**
   * With {@link authenticate}: the time a connection has to authenticate,
   * in ms from when it opened (default 10_000 ms; 0 disables it). A
   * connection still unauthenticated then is sent a -32014 LIMIT_EXCEEDED
   * error (`data: { limit: "authTimeoutMs", value }`, id null) and closed.
   */
  authTimeoutMs?: number;
  /**
   * Longest time one call may have, in ms: a request's `timeoutMs` above it
   * is lowered to it, and a request without one gets it, so a `withContext`
   * method's signal aborts after at most this long. Default: no limit
   * (calls without `timeoutMs` have no deadline).
   */
  maxDeadlineMs?: number;
  /**
   * Called when a method throws something other than an `RpcError`, or its
   * result cannot be encoded as JSON. Defaults to `console.error`.
   */
  onInternalError?(error: unknown, method: string): void;
  /**
   * Called when a request names a method the table lacks (it is answered
   * with -32601 unless the connection is closed first; a string returned
   * replaces that error's message). A server that only speaks to
   * authenticated peers closes the session here.
   */
  onMethodNotFound?(method: string, session: RpcSession): string | void;
  /**
   * Called once per finished call with its method, outcome (`"ok"`,
   * `"error"` with the code, `"notification"`), duration in ms by the
   * monotonic clock and, for a frame of one message, the request's and the
   * response's bytes on the wire (see {@link CallInfo}). For metrics; a
   * throw is caught (the call is answered all the same) and logged the
   * first time. Absent, calls cost nothing extra.
   */
  onCall?(call: CallInfo): void;
}

/** Options of {@link serveStream}: the limits, plus ways to stop. */
export interface ServeStreamOptions extends ServerLimits {
  /**
   * Aborting it closes the connection at once; responses still being
   * computed are dropped.
   */
  signal?: AbortSignal;
  /**
   * Aborting it asks the peer to go away: the server sends the notification
   * {@link GOAWAY_METHOD}, keeps answering the requests that still arrive,
   * and the connection finishes once the peer closes it (a Rafter client
   * does so as soon as its calls on it are answered) or `signal` aborts.
   */
  goAway?: AbortSignal;
}

/**
 * How long a server keeps reading (and dropping) input after a frame it
 * could not go on from (a CBOR length above the limit, a bad preamble),
 * so that the client reads the error before the connection closes: a
 * socket closed with unread input is reset, and the reset can destroy the
 * answer on its way. In ms.
 */
const LINGER_MS = 1_000;

/**
 * How long a connection a limit closes stays open after its error frame
 * was written, reading and dropping input, so that closing with input
 * unread (a reset) does not destroy the answer. In ms.
 */
const CLOSE_AFTER_ERROR_MS = 200;

/** Bytes of one write to the socket, at most, for `writeTimeoutMs`. */
const WRITE_SLICE_BYTES = 256 * 1024;

/** Largest delay `setTimeout` honours (about 24.8 days), in ms. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Checks server limits before use, so a bad configuration fails at start-up
 * rather than on the first connection.
 *
 * @throws {RangeError} when `maxFrameBytes`, `maxInFlight`,
 * `maxQueuedBytes`, `maxConnections` or `maxConnectionsPerAddress` is not
 * a positive integer, `idleTimeoutMs`, `frameTimeoutMs`, `authTimeoutMs`
 * or `writeTimeoutMs` is negative or not a number, `maxDeadlineMs` is not a positive number,
 * or `authenticate` is not a function; the message names the option.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { validateServerLimits } from "./server_connection.ts";
 * validateServerLimits({ maxFrameBytes: 64 * 1024, idleTimeoutMs: 0 });
 * assert.throws(() => validateServerLimits({ maxFrameBytes: 0 }), RangeError);
 * assert.throws(
 *   () => validateServerLimits({ frameTimeoutMs: -1 }),
 *   /frameTimeoutMs must be a number of ms >= 0/,
 * );
 * ```
 */
export function validateServerLimits(limits: ServerLimits): void {
  for (
    const name of [
      "maxFrameBytes",
      "maxInFlight",
      "maxQueuedBytes",
      "maxConnections",
      "maxConnectionsPerAddress",
    ] as const
  ) {
    const value = limits[name];
    if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
      const unit = name.endsWith("Bytes") ? " number of bytes" : "";
      throw new RangeError(
        `${name} must be a positive integer${unit}, got ${value}`,
      );
    }
  }
  for (
    const name of [
      "idleTimeoutMs",
      "frameTimeoutMs",
      "authTimeoutMs",
      "writeTimeoutMs",
    ] as const
  ) {
    const value = limits[name];
    if (value !== undefined && !(typeof value === "number" && value >= 0)) {
      throw new RangeError(
        `${name} must be a number of ms >= 0 (0 disables it), got ${value}`,
      );
    }
  }
  const { maxDeadlineMs, authenticate } = limits;
  if (
    maxDeadlineMs !== undefined &&
    !(typeof maxDeadlineMs === "number" && maxDeadlineMs > 0)
  ) {
    throw new RangeError(
      `maxDeadlineMs must be a positive number of ms, got ${maxDeadlineMs}`,
    );
  }
  if (authenticate !== undefined && typeof authenticate !== "function") {
    throw new RangeError(
      `authenticate must be a function (token, session) => principal, got ${typeof authenticate}`,
    );
  }
}

/**
 * Serves JSON-RPC 2.0 on one byte stream until the connection is finished:
 * the peer closed it (after its last requests are answered), the idle
 * timeout passed, a read or write failed, or `options.signal` aborted.
 * Frames run concurrently; responses are written as they complete, and those
 * completed in the same tick share one write.
 *
 * The codec is the client's: a connection whose first byte is 0xd9 (the
 * CBOR self-describe tag `d9 d9 f7`) speaks length-prefixed CBOR, any other
 * NDJSON (see `codec.ts` for the wire format and the value rules). In a
 * process that has not loaded the CBOR codec (`@rafter/rpc/cbor`), a
 * connection opening with 0xd9 gets one NDJSON -32700 error saying so and
 * is closed.
 *
 * Bad input gets the specification's error response: an oversized NDJSON
 * line gets -32600 (`Invalid Request: frame exceeds <max> bytes; …`) and a
 * line that is not UTF-8 gets -32700, and the connection stays open; a CBOR
 * length above `maxFrameBytes` gets -32600 and the connection is closed
 * (after up to 1 s of reading and dropping what follows, so that the client
 * can read the answer), without the frame being buffered; malformed CBOR
 * gets -32700 and a CBOR value JSON cannot represent -32600 (the
 * connection stays open); a connection that ends inside a CBOR frame gets
 * -32700. A peer that disconnects mid-response is not an error.
 *
 * Deadlines and cancellation (see `handleText`): a request's `timeoutMs`
 * counts from when its frame was read, so time spent waiting for a slot
 * counts; `rpc.cancel` reaches the calls of this connection only; the
 * signals of its calls abort when the client's side of the stream ends
 * (it closed the connection, or only its sending side) or the connection
 * is closed. Plain handlers still run and are answered.
 *
 * @returns a promise that resolves, after the stream has been closed, when the
 * connection is finished. Never rejects.
 * @throws {RangeError} synchronously, for limits that
 * {@link validateServerLimits} refuses.
 *
 * @example Serve one accepted Deno connection
 * ```ts
 * import assert from "node:assert/strict";
 * import { serveStream } from "./server_connection.ts";
 * import { fromDenoConn } from "../../adapter/deno/tcp.ts";
 * import { dial } from "../transport/dial.ts";
 * const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
 * const client = dial(`tcp://127.0.0.1:${listener.addr.port}`);
 * const conn = await listener.accept();
 * const finished = serveStream(fromDenoConn(conn), { add: (a: number, b: number) => a + b });
 * const connection = await client;
 * assert.equal(await connection.call("add", [1, 2]), 3);
 * connection.close();
 * await finished; // the client closed the connection
 * listener.close();
 * ```
 */
export function serveStream(
  stream: ByteStream,
  methods: Methods | SessionMethods,
  options: ServeStreamOptions = {},
): Promise<void> {
  return new ServerConnection(stream, methods, options).run();
}

/**
 * Refuses a connection with one error frame: waits up to {@link LINGER_MS}
 * for the client's first bytes to learn its codec (NDJSON when it sends
 * nothing), answers `error` with id null in it, reads and drops input for
 * up to {@link LINGER_MS} more (until the client closes), then closes the
 * stream. A connection over `maxConnections` gets this.
 *
 * @param stream the connection to refuse; it is closed.
 * @param error what to answer, e.g. a -32014 LIMIT_EXCEEDED error.
 * @param signal aborting it closes the stream at once.
 * @returns settles once the stream is closed. Never rejects.
 */
export async function refuseStream(
  stream: ByteStream,
  error: RpcError,
  signal?: AbortSignal,
): Promise<void> {
  const direct = directOf(stream);
  const [read, cancel] = direct === undefined
    ? streamReading(stream.readable)
    : [direct.read, direct.cancel];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let end: () => void = () => {};
  const over = new Promise<null>((resolve) => {
    end = () => resolve(null);
    timer = setTimeout(end, LINGER_MS);
    signal?.addEventListener("abort", end, { once: true });
    if (signal?.aborted) end();
  });
  const next = () => Promise.race([read().catch(() => null), over]);
  try {
    const first = await next();
    const codec = first !== null && first.length > 0
      ? codecOfFirstByte(first[0])
      : ndjsonCodec;
    const writer = new FrameWriter(direct?.write ?? stream.writable);
    await writer.write(codec.frame(serializeError(codec, null, error)))
      .catch(() => {});
    clearTimeout(timer);
    timer = setTimeout(end, CLOSE_AFTER_ERROR_MS);
    if (first !== null) { while (await next() !== null); }
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", end);
    try {
      stream.close();
    } catch {
      // Already closed.
    }
    await cancel();
  }
}

/** A frame read and not yet dispatched. */
interface Waiting {
  /**
   * What to run (a decoded message or batch); a reply decided before it
   * ran; null once run out of turn.
   */
  frame:
    | { kind: "run"; value: unknown }
    | { kind: "reply"; part: unknown }
    | null;
  /** `Date.now()` when it was read, ms. */
  receivedAt: number;
  /** Its size, for the bound on waiting frames: its bytes on the wire. */
  size: number;
  /**
   * The id, when it is one request with an id (undefined: not looked at
   * yet; null: it is not).
   */
  requestId?: RequestId | null;
}

class ServerConnection {
  readonly #stream: ByteStream;
  readonly #methods: Methods;
  readonly #session: RpcSession;
  readonly #ended = new AbortController();
  /** Aborts when the client's side of the stream ends, or at #stop. */
  readonly #inputEnded = new AbortController();
  readonly #calls = new RunningCalls();
  readonly #options: ServeStreamOptions;
  readonly #dispatchOptions: DispatchOptions;
  readonly #onCall: ((call: CallInfo) => void) | undefined;
  readonly #maxFrameBytes: number;
  readonly #maxInFlight: number;
  readonly #idleTimeoutMs: number;
  readonly #frameTimeoutMs: number;
  readonly #maxQueuedBytes: number;
  readonly #writeTimeoutMs: number;
  /** The client's codec, known from its first byte. */
  #codec: FrameCodec | undefined;
  #decoder: FrameDecoder | undefined;
  /** Messages to send once the codec is known. */
  #early: Record<string, unknown>[] = [];
  readonly #writer: FrameWriter;
  /** The next chunk read, or null at the end. */
  readonly #read: () => Promise<Uint8Array | null>;
  /** Stops reading; settles once a pending read is over. Never rejects. */
  readonly #cancelRead: () => Promise<void>;
  /** Decoded frames waiting for a free slot; `#next` is the first unsent. */
  #backlog: Waiting[] = [];
  #next = 0;
  /** Frames of the backlog before this index were checked for rpc.cancel. */
  #scanned = 0;
  /** The sizes of the backlog's frames from `#next` on. */
  #waitingBytes = 0;
  #inFlight = 0;
  #stopped = false;
  /** A frame the codec could not go on from was read: nothing more runs. */
  #fatal = false;
  /**
   * The connection's one timer, for all its deadlines (idle, frame,
   * authentication): it fires at `#timerAt` or earlier, and then looks at
   * which deadline passed and when the next one is.
   */
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = 0;
  /**
   * `performance.now()` when the connection last became idle (nothing in
   * flight or waiting), or undefined while it is not idle.
   */
  #idleSince: number | undefined;
  /**
   * `performance.now()` when the frame being read began (counted from when
   * the server was reading), or undefined between frames.
   */
  #frameSince: number | undefined;
  /**
   * `performance.now()` since when the queued answers wait for the socket
   * (since the last write it took), or undefined while nothing is queued.
   */
  #writeSince: number | undefined;
  /** `performance.now()` by which the session must authenticate. */
  #authBy: number | undefined;
  /** What the `authenticate` hook returned for the session's token. */
  #principal: unknown = undefined;
  /**
   * A limit closes the connection: its error is written, nothing more
   * runs, input is dropped until it closes.
   */
  #closing = false;
  /** The extra dispatch hooks of an authenticating server. */
  readonly #authHooks: Pick<Hooks, "admit" | "authenticate"> | undefined;
  #wake: (() => void) | undefined;
  /** Settles once the read side is cancelled (and its pending read is over). */
  #cancelled: Promise<void> = Promise.resolve();

  constructor(
    stream: ByteStream,
    methods: Methods | SessionMethods,
    options: ServeStreamOptions,
  ) {
    this.#stream = stream;
    this.#options = options;
    validateServerLimits(options);
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.#maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.#frameTimeoutMs = options.frameTimeoutMs ?? DEFAULT_FRAME_TIMEOUT_MS;
    this.#maxQueuedBytes = options.maxQueuedBytes ?? DEFAULT_MAX_QUEUED_BYTES;
    this.#writeTimeoutMs = options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS;
    const direct = directOf(stream);
    const write = direct?.write;
    this.#writer = new FrameWriter(
      write === undefined
        ? stream.writable
        : (chunk) => this.#writeSliced(write, chunk),
      {
        onError: () => this.#stop(),
        onWritten: () => {
          this.#writeSince = this.#writer.queuedBytes > 0
            ? performance.now()
            : undefined;
        },
      },
    );
    [this.#read, this.#cancelRead] = direct === undefined
      ? streamReading(stream.readable)
      : [direct.read, direct.cancel];
    this.#session = this.#makeSession();
    this.#methods = typeof methods === "function"
      ? methods(this.#session)
      : methods;
    const onMethodNotFound = options.onMethodNotFound;
    this.#dispatchOptions = {
      onInternalError: options.onInternalError,
      onMethodNotFound: onMethodNotFound === undefined
        ? undefined
        : (method) => onMethodNotFound(method, this.#session),
      signal: this.#inputEnded.signal,
      calls: this.#calls,
      maxDeadlineMs: options.maxDeadlineMs,
      session: this.#session,
    };
    this.#onCall = options.onCall;
    const authenticate = options.authenticate;
    if (authenticate !== undefined) {
      this.#authHooks = {
        admit: (method) => this.#admit(method),
        authenticate: (params) => this.#authenticate(authenticate, params),
      };
      const ms = options.authTimeoutMs ?? DEFAULT_AUTH_TIMEOUT_MS;
      if (ms > 0) this.#authBy = performance.now() + ms;
    }
  }

  /**
   * Writes a chunk in slices of {@link WRITE_SLICE_BYTES}, so that a large
   * answer read slowly (but read) counts as progress for `writeTimeoutMs`.
   */
  async #writeSliced(
    write: (chunk: Uint8Array) => Promise<void>,
    chunk: Uint8Array,
  ): Promise<void> {
    if (chunk.length <= WRITE_SLICE_BYTES) return write(chunk);
    for (let at = 0; at < chunk.length; at += WRITE_SLICE_BYTES) {
      await write(chunk.subarray(at, at + WRITE_SLICE_BYTES));
      if (this.#writeSince !== undefined) this.#writeSince = performance.now();
    }
  }

  /** Refuses a call of an unauthenticated session, except the open ones. */
  #admit(method: string): RpcError | undefined {
    if (this.#principal || OPEN_METHODS.has(method)) return undefined;
    return new RpcError(
      UNAUTHENTICATED,
      `Unauthenticated: call ${AUTHENTICATE_METHOD} with { "token": "…" } before ${
        JSON.stringify(method)
      } (set the token or serverToken option of a Rafter client)`,
      { method },
    );
  }

  /** `rpc.authenticate`: checks the token with the hook. */
  async #authenticate(
    hook: NonNullable<ServerLimits["authenticate"]>,
    params: unknown,
  ): Promise<true> {
    const token = tokenOf(params);
    if (token === undefined) {
      throw new RpcError(
        INVALID_PARAMS,
        `Invalid params: ${AUTHENTICATE_METHOD} takes named params { "token": "<string>" }`,
      );
    }
    let principal: unknown;
    try {
      principal = await hook(token, this.#session);
    } catch (error) {
      if (error instanceof RpcError) throw error;
      principal = undefined;
    }
    if (!principal) {
      throw new RpcError(
        UNAUTHENTICATED,
        "Unauthenticated: the token was not accepted",
      );
    }
    this.#principal = principal;
    this.#authBy = undefined;
    return true;
  }

  #makeSession(): RpcSession {
    return new ServerSession(this, this.#stream, this.#ended.signal);
  }

  /** Bytes queued for the client (for {@link ServerSession}). */
  get queuedBytes(): number {
    return this.#writer.queuedBytes;
  }

  /** The session's principal (for {@link ServerSession}). */
  get principal(): unknown {
    return this.#principal;
  }

  /** Sends a notification (for {@link ServerSession}). */
  notifyClient(message: Record<string, unknown>): void {
    this.#send(message);
  }

  /** Ends the connection at once (for {@link ServerSession}). */
  end(): void {
    this.#stop();
  }

  /**
   * Writes a message in the client's codec; before the codec is known, a
   * JSON copy of it is kept until it is.
   *
   * @throws {TypeError} when a value in it has no JSON form.
   */
  #send(message: Record<string, unknown>): void {
    if (this.#codec === undefined) {
      this.#early.push(jsonValue(message) as Record<string, unknown>);
      return;
    }
    const frame = this.#codec.frame(this.#codec.message(message));
    this.#write(frame).catch(() => {});
  }

  /**
   * Queues a frame; closes the connection when the client leaves more than
   * `maxQueuedBytes` unread (one frame alone may be larger).
   */
  #write(frame: Frame): Promise<void> {
    const writer = this.#writer;
    const before = writer.queuedBytes;
    const written = writer.write(frame);
    if (
      before === 0 && this.#writeTimeoutMs > 0 && this.#writeSince === undefined
    ) {
      this.#writeSince = performance.now();
      this.#schedule();
    }
    if (
      before > 0 && writer.queuedBytes > this.#maxQueuedBytes && !this.#stopped
    ) {
      console.error(
        `rpc: closing the connection from ${
          this.#stream.remoteAddress ?? "a client"
        }: ${writer.queuedBytes} bytes of responses are queued for it and it does not read them (maxQueuedBytes ${this.#maxQueuedBytes}; raise it for clients that read large results slowly)`,
      );
      this.#stop();
    }
    return written;
  }

  async run(): Promise<void> {
    const { signal, goAway } = this.#options;
    const onAbort = () => this.#stop();
    const onGoAway = () => {
      if (!this.#stopped) this.#send({ jsonrpc: "2.0", method: GOAWAY_METHOD });
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    goAway?.addEventListener("abort", onGoAway, { once: true });
    if (signal?.aborted) this.#stop();
    else if (goAway?.aborted) onGoAway();
    this.#armIdle();
    this.#schedule();
    try {
      await this.#loop();
    } catch {
      // #loop only throws on a broken stream; the connection is finished.
    } finally {
      signal?.removeEventListener("abort", onAbort);
      goAway?.removeEventListener("abort", onGoAway);
      this.#stop();
      await this.#cancelled;
      await this.#writer.idle();
    }
  }

  async #loop(): Promise<void> {
    let ended = false;
    while (!this.#stopped) {
      this.#dispatchBacklog();
      if (ended) {
        if (this.#inFlight === 0 && this.#next === this.#backlog.length) {
          await this.#writer.idle();
          if (this.#fatal) await this.#linger();
          return;
        }
        await this.#change();
        continue;
      }
      if (
        this.#inFlight >= this.#maxInFlight &&
        this.#waitingBytes >= this.#maxFrameBytes
      ) {
        // Not reading: the frame deadline waits too.
        this.#frameSince = undefined;
        await this.#change();
        continue;
      }
      if (this.#decoder?.partial && this.#frameSince === undefined) {
        this.#startFrame();
      }
      const value = await this.#read();
      if (this.#stopped) return;
      const done = value === null;
      if (this.#closing) {
        if (!done) continue;
        await this.#writer.idle();
        return;
      }
      if (!done && value.length === 0) continue;
      const decoder = done ? this.#decoder : this.#decoderFor(value[0]);
      const frames = decoder === undefined
        ? []
        : done
        ? decoder.end()
        : decoder.push(value);
      if (done) {
        ended = true;
        this.#inputEnded.abort();
      }
      if (decoder !== undefined && !done) {
        if (!decoder.partial) this.#frameSince = undefined;
        else if (this.#frameSince === undefined) this.#startFrame();
      }
      if (frames.length > 0) this.#receive(frames);
      if (this.#fatal) {
        ended = true;
        this.#inputEnded.abort();
      }
    }
  }

  /** The decoder, chosen by the connection's first byte. */
  #decoderFor(firstByte: number): FrameDecoder {
    if (this.#decoder !== undefined) return this.#decoder;
    const codec = codecOfFirstByte(firstByte);
    this.#codec = codec;
    // CBOR without its codec loaded: one NDJSON answer saying so, then close.
    this.#decoder = missingCodecDecoder(firstByte) ?? codec.decoder({
      maxFrameBytes: this.#maxFrameBytes,
      preamble: true,
    });
    const early = this.#early;
    this.#early = [];
    for (const message of early) this.#send(message);
    return this.#decoder;
  }

  #receive(frames: InboundFrame[]): void {
    this.#clearIdle();
    const receivedAt = Date.now();
    const waiting: Waiting[] = [];
    for (const frame of frames) {
      waiting.push({
        frame: { kind: "run", value: frame.value },
        receivedAt,
        size: frame.bytes,
      });
      this.#waitingBytes += frame.bytes;
      if (frame.fatal !== undefined) {
        this.#fatal = true;
        break;
      }
    }
    this.#backlog = this.#backlog.slice(this.#next).concat(waiting);
    this.#scanned = Math.max(0, this.#scanned - this.#next);
    this.#next = 0;
  }

  /**
   * After a frame the codec could not go on from, reads and drops input
   * for up to {@link LINGER_MS}, or until the client closes.
   */
  async #linger(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, LINGER_MS);
    });
    try {
      while (!this.#stopped) {
        const read = await Promise.race([this.#read(), timeout]);
        if (read === undefined || read === null) return;
      }
    } finally {
      clearTimeout(timer);
    }
  }

  #dispatchBacklog(): void {
    if (this.#closing) return;
    while (
      this.#next < this.#backlog.length && this.#inFlight < this.#maxInFlight
    ) {
      const waiting = this.#backlog[this.#next++];
      this.#waitingBytes -= waiting.size;
      if (waiting.frame !== null) this.#dispatch(waiting);
    }
    if (this.#next === this.#backlog.length) {
      this.#backlog = [];
      this.#next = 0;
      this.#scanned = 0;
      this.#waitingBytes = 0;
      return;
    }
    // Frames wait for a slot: the cancels among them run now.
    for (
      let i = Math.max(this.#next, this.#scanned);
      i < this.#backlog.length;
      i++
    ) {
      const waiting = this.#backlog[i];
      const target = cancelTargetOf(waiting.frame);
      if (target === undefined) continue;
      waiting.frame = null;
      this.#waitingBytes -= waiting.size;
      waiting.size = 0;
      this.#cancel(target);
    }
    this.#scanned = this.#backlog.length;
  }

  /**
   * An `rpc.cancel` read while frames wait: aborts the running call, or
   * answers the waiting request without running it.
   */
  #cancel(target: RequestId): void {
    if (this.#calls.cancel(target)) return;
    for (let i = this.#next; i < this.#backlog.length; i++) {
      const waiting = this.#backlog[i];
      if (waiting.requestId === undefined) {
        waiting.requestId = requestIdOf(waiting.frame);
      }
      const id = waiting.requestId;
      if (id === null || typeof id !== typeof target || id !== target) {
        continue;
      }
      waiting.frame = {
        kind: "reply",
        part: serializeError(
          this.#codec!,
          id,
          new RpcError(
            CANCELLED,
            `Cancelled: the client cancelled the call before it ran (${CANCEL_METHOD})`,
          ),
        ),
      };
      this.#waitingBytes -= waiting.size;
      waiting.size = 0;
      return;
    }
  }

  /** Runs a frame and writes its answer; the slot is freed once written. */
  async #dispatch(waiting: Waiting): Promise<void> {
    this.#inFlight++;
    this.#clearIdle();
    try {
      if (this.#onCall !== undefined) {
        await this.#dispatchReported(waiting, this.#onCall);
        return;
      }
      const part = await this.#respond(waiting, undefined);
      if (part !== null && !this.#stopped && !this.#closing) {
        await this.#write(this.#codec!.frame(part));
      }
    } catch {
      // A failed write stops the connection through the writer's onError.
    } finally {
      this.#inFlight--;
      // Here, not only in #loop: it may be waiting for a read.
      if (!this.#stopped) this.#dispatchBacklog();
      this.#armIdle();
      this.#notify();
    }
  }

  /**
   * {@link #dispatch} with an `onCall` hook: a frame of one message is
   * reported with its bytes in and out, a batch's members without.
   */
  async #dispatchReported(
    waiting: Waiting,
    onCall: (call: CallInfo) => void,
  ): Promise<void> {
    const single = waiting.frame?.kind === "run" &&
      !Array.isArray(waiting.frame.value);
    let call: CallInfo | undefined;
    const part = await this.#respond(
      waiting,
      single ? (info) => call = info : onCall,
    );
    const frame = part === null ? null : this.#codec!.frame(part);
    if (call !== undefined) {
      call.bytesIn = waiting.size;
      call.bytesOut = frame === null
        ? 0
        : typeof frame === "string"
        ? utf8Length(frame) + 1
        : frame.length;
      reportCall(onCall, call);
    }
    if (frame !== null && !this.#stopped && !this.#closing) {
      await this.#write(frame);
    }
  }

  #respond(
    waiting: Waiting,
    onCall: ((call: CallInfo) => void) | undefined,
  ): Promise<unknown> {
    const frame = waiting.frame!;
    if (frame.kind === "reply") return Promise.resolve(frame.part);
    const hooks = hooksOf(this.#dispatchOptions, waiting.receivedAt);
    if (this.#authHooks !== undefined) Object.assign(hooks, this.#authHooks);
    if (onCall !== undefined) hooks.onCall = onCall;
    return dispatch(frame.value, this.#methods, hooks, this.#codec!);
  }

  /** Resolves at the next slot release or stop. */
  #change(): Promise<void> {
    return new Promise((resolve) => this.#wake = resolve);
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /**
   * Starts the idle timeout if the connection is idle. The timer is not
   * cancelled when a frame arrives ({@link #clearIdle} only notes that the
   * connection is busy), so a call costs no timer: when it fires, it closes
   * the connection if it has been idle for the whole timeout, and otherwise
   * waits for the rest of it.
   */
  #armIdle(): void {
    this.#clearIdle();
    if (
      this.#stopped || this.#idleTimeoutMs <= 0 || this.#inFlight > 0 ||
      this.#next < this.#backlog.length
    ) {
      return;
    }
    this.#idleSince = performance.now();
    this.#schedule();
  }

  /** The connection is busy: the idle timeout does not run. */
  #clearIdle(): void {
    this.#idleSince = undefined;
  }

  /** A frame has begun: its deadline runs. */
  #startFrame(): void {
    if (this.#frameTimeoutMs <= 0) return;
    this.#frameSince = performance.now();
    this.#schedule();
  }

  /** The earliest deadline of the connection, or undefined if none runs. */
  #nextDeadline(): number | undefined {
    let at = this.#authBy;
    if (this.#frameSince !== undefined) {
      const frameBy = this.#frameSince + this.#frameTimeoutMs;
      if (at === undefined || frameBy < at) at = frameBy;
    }
    if (this.#idleSince !== undefined) {
      const idleBy = this.#idleSince + this.#idleTimeoutMs;
      if (at === undefined || idleBy < at) at = idleBy;
    }
    if (this.#writeSince !== undefined) {
      const writeBy = this.#writeSince + this.#writeTimeoutMs;
      if (at === undefined || writeBy < at) at = writeBy;
    }
    return at;
  }

  /**
   * Makes the timer fire by the earliest deadline. A timer already set for
   * that time or earlier stays (it re-arms itself when it fires early), so
   * a deadline that moves later costs nothing.
   */
  #schedule(): void {
    if (this.#stopped || this.#closing) return;
    const at = this.#nextDeadline();
    if (at === undefined) return;
    if (this.#timer !== undefined) {
      if (this.#timerAt <= at) return;
      clearTimeout(this.#timer);
    }
    this.#timerAt = at;
    const ms = Math.min(Math.max(1, at - performance.now()), MAX_TIMER_MS);
    this.#timer = setTimeout(() => this.#onTimer(), ms);
  }

  #onTimer(): void {
    this.#timer = undefined;
    if (this.#stopped || this.#closing) return;
    // A timer may fire a little early by this clock: never close early.
    const now = performance.now();
    if (this.#authBy !== undefined && now >= this.#authBy) {
      const ms = this.#options.authTimeoutMs ?? DEFAULT_AUTH_TIMEOUT_MS;
      this.#closeWith(
        new RpcError(
          LIMIT_EXCEEDED,
          `Limit exceeded: the connection did not authenticate within ${ms} ms (authTimeoutMs) and is closed; call ${AUTHENTICATE_METHOD} with a token first (the token or serverToken option of a Rafter client)`,
          { limit: "authTimeoutMs", value: ms },
        ),
      );
    } else if (
      this.#frameSince !== undefined &&
      now >= this.#frameSince + this.#frameTimeoutMs
    ) {
      const ms = this.#frameTimeoutMs;
      this.#closeWith(
        new RpcError(
          LIMIT_EXCEEDED,
          `Limit exceeded: a frame took longer than ${ms} ms to arrive whole (frameTimeoutMs) and the connection is closed; send each frame at once, or raise the server's frameTimeoutMs`,
          { limit: "frameTimeoutMs", value: ms },
        ),
      );
    } else if (
      this.#writeSince !== undefined &&
      now >= this.#writeSince + this.#writeTimeoutMs
    ) {
      console.error(
        `rpc: closing the connection from ${
          this.#stream.remoteAddress ?? "a client"
        }: its socket took none of the ${this.#writer.queuedBytes} bytes queued for it in ${this.#writeTimeoutMs} ms, the client does not read (writeTimeoutMs)`,
      );
      this.#stop();
    } else if (
      this.#idleSince !== undefined &&
      now >= this.#idleSince + this.#idleTimeoutMs
    ) {
      this.#stop();
    } else {
      this.#schedule();
    }
  }

  /**
   * A limit ends the connection: answers `error` (id null, in the client's
   * codec, NDJSON before it is known), runs and reads nothing more, and
   * closes once the answer is written (at the latest after
   * {@link LINGER_MS}).
   */
  #closeWith(error: RpcError): void {
    if (this.#closing || this.#stopped) return;
    this.#closing = true;
    this.#frameSince = undefined;
    this.#authBy = undefined;
    this.#clearIdle();
    this.#inputEnded.abort();
    const codec = this.#codec ?? ndjsonCodec;
    this.#writer.write(codec.frame(serializeError(codec, null, error)))
      .catch(() => {});
    const stop = () => this.#stop();
    const latest = setTimeout(stop, LINGER_MS);
    this.#writer.idle().then(() =>
      setTimeout(() => {
        clearTimeout(latest);
        stop();
      }, CLOSE_AFTER_ERROR_MS)
    );
    this.#notify();
  }

  #stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#ended.abort();
    this.#inputEnded.abort();
    this.#clearIdle();
    this.#frameSince = undefined;
    this.#authBy = undefined;
    this.#writeSince = undefined;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    try {
      this.#stream.close();
    } catch {
      // Already closed.
    }
    this.#cancelled = this.#cancelRead();
    this.#notify();
  }
}

/**
 * The {@link RpcSession} of a connection: a class rather than an object
 * literal with getters, which V8 keeps as a dictionary (a few hundred bytes
 * more per idle connection).
 */
class ServerSession implements RpcSession {
  readonly id: number = nextSessionId++;
  readonly remoteAddress: string | undefined;
  readonly secure: boolean;
  readonly peerCertificate: PeerCertificate | null;
  readonly signal: AbortSignal;
  /** Its own function, so that it may be passed on as a callback. */
  readonly close: () => void;
  readonly #connection: ServerConnection;

  constructor(
    connection: ServerConnection,
    stream: ByteStream,
    signal: AbortSignal,
  ) {
    this.#connection = connection;
    this.remoteAddress = stream.remoteAddress;
    this.secure = stream.secure === true;
    this.peerCertificate = stream.peerCertificate ?? null;
    this.signal = signal;
    this.close = () => connection.end();
  }

  get queuedBytes(): number {
    return this.#connection.queuedBytes;
  }

  get principal(): unknown {
    return this.#connection.principal;
  }

  notify(method: string, params?: Params): boolean {
    if (this.signal.aborted) return false;
    const message: Record<string, unknown> = { jsonrpc: "2.0", method };
    if (params !== undefined) message.params = params;
    try {
      this.#connection.notifyClient(message);
    } catch (error) {
      throw new RpcError(
        INVALID_PARAMS,
        `Invalid params: the notification ${
          JSON.stringify(method)
        } cannot be encoded as JSON: ${messageOf(error)}`,
      );
    }
    return true;
  }
}

/** What an unauthenticated session may call. */
const OPEN_METHODS: ReadonlySet<string> = new Set([
  "rpc.ping",
  AUTHENTICATE_METHOD,
  CANCEL_METHOD,
]);

/**
 * The token of `rpc.authenticate`'s params: `{ token }`, or `[{ token }]`
 * (a stub's one argument), or `[token]`; undefined when there is none.
 */
function tokenOf(params: unknown): string | undefined {
  const one = Array.isArray(params) && params.length === 1 ? params[0] : params;
  if (typeof one === "string") return Array.isArray(params) ? one : undefined;
  if (typeof one !== "object" || one === null || Array.isArray(one)) {
    return undefined;
  }
  const token = (one as Record<string, unknown>).token;
  return typeof token === "string" ? token : undefined;
}

/** The message a waiting frame runs, when it is one (not a batch). */
function messageIn(frame: Waiting["frame"]): Record<string, unknown> | null {
  if (frame?.kind !== "run") return null;
  const value = frame.value;
  return typeof value === "object" && value !== null &&
      !Array.isArray(value) && !(value instanceof Refusal)
    ? value as Record<string, unknown>
    : null;
}

/** The id an `rpc.cancel` notification frame names, or undefined if it is none. */
function cancelTargetOf(frame: Waiting["frame"]): RequestId | undefined {
  const value = messageIn(frame);
  if (
    value === null || value.jsonrpc !== "2.0" ||
    value.method !== CANCEL_METHOD || "id" in value
  ) {
    return undefined;
  }
  const params = value.params;
  if (typeof params !== "object" || params === null || Array.isArray(params)) {
    return undefined;
  }
  const id = (params as Record<string, unknown>).id;
  return isRequestId(id) && id !== null ? id : undefined;
}

/** The id of a frame that is one request with an id, else null. */
function requestIdOf(frame: Waiting["frame"]): RequestId | null {
  const value = messageIn(frame);
  if (value === null || typeof value.method !== "string") return null;
  return isRequestId(value.id) ? value.id : null;
}
