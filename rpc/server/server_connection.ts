/**
 * The server side of one connection: reads frames (NDJSON or CBOR, told
 * apart by the first byte) from a byte stream, runs them against a method
 * table, and writes the responses back in the same codec, within the
 * connection's limits (frame size, requests in flight, idle time).
 *
 * @module
 */

import {
  type DispatchOptions,
  hooksOf,
  type Methods,
  RunningCalls,
} from "./dispatcher.ts";
import type { RpcSession } from "./method.ts";
import { FrameWriter } from "../framing/_frame_writer.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "../framing/_ndjson.ts";
import {
  CANCEL_METHOD,
  GOAWAY_METHOD,
  isRequestId,
  type Params,
  type RequestId,
} from "../message.ts";
import type { ByteStream } from "../transport/transport.ts";
import { CANCELLED, INVALID_PARAMS, messageOf, RpcError } from "../errors.ts";
import type {
  FrameCodec,
  FrameDecoder,
  InboundFrame,
} from "../codec/_frame_codec.ts";
import { codecOfFirstByte } from "../codec/codecs.ts";
import { dispatch, serializeError } from "./_dispatch.ts";
import { jsonValue } from "../codec/_json_value.ts";
import { Refusal } from "../framing/_refusal.ts";
import { directOf, streamReading } from "../transport/conn_stream.ts";

export type { RpcSession } from "./method.ts";

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

/** Largest delay `setTimeout` honours (about 24.8 days), in ms. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Checks server limits before use, so a bad configuration fails at start-up
 * rather than on the first connection.
 *
 * @throws {RangeError} when `maxFrameBytes` or `maxInFlight` is not a positive
 * integer, `idleTimeoutMs` is negative or not a number, or `maxDeadlineMs`
 * is not a positive number; the message names the option.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { validateServerLimits } from "./server_connection.ts";
 * validateServerLimits({ maxFrameBytes: 64 * 1024, idleTimeoutMs: 0 });
 * assert.throws(() => validateServerLimits({ maxFrameBytes: 0 }), RangeError);
 * ```
 */
export function validateServerLimits(limits: ServerLimits): void {
  const { maxFrameBytes, maxInFlight, idleTimeoutMs, maxDeadlineMs } = limits;
  if (
    maxFrameBytes !== undefined &&
    !(Number.isSafeInteger(maxFrameBytes) && maxFrameBytes > 0)
  ) {
    throw new RangeError(
      `maxFrameBytes must be a positive integer number of bytes, got ${maxFrameBytes}`,
    );
  }
  if (
    maxInFlight !== undefined &&
    !(Number.isSafeInteger(maxInFlight) && maxInFlight > 0)
  ) {
    throw new RangeError(
      `maxInFlight must be a positive integer, got ${maxInFlight}`,
    );
  }
  if (
    idleTimeoutMs !== undefined &&
    !(typeof idleTimeoutMs === "number" && idleTimeoutMs >= 0)
  ) {
    throw new RangeError(
      `idleTimeoutMs must be a number of ms >= 0 (0 disables it), got ${idleTimeoutMs}`,
    );
  }
  if (
    maxDeadlineMs !== undefined &&
    !(typeof maxDeadlineMs === "number" && maxDeadlineMs > 0)
  ) {
    throw new RangeError(
      `maxDeadlineMs must be a positive number of ms, got ${maxDeadlineMs}`,
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
 * NDJSON (see `codec.ts` for the wire format and the value rules).
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
  readonly #maxFrameBytes: number;
  readonly #maxInFlight: number;
  readonly #idleTimeoutMs: number;
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
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  /**
   * `performance.now()` when the connection last became idle (nothing in
   * flight or waiting), or undefined while it is not idle.
   */
  #idleSince: number | undefined;
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
    this.#idleTimeoutMs = Math.min(
      options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
      MAX_TIMER_MS,
    );
    const direct = directOf(stream);
    this.#writer = new FrameWriter(direct?.write ?? stream.writable, {
      onError: () => this.#stop(),
    });
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
  }

  #makeSession(): RpcSession {
    const writer = this.#writer;
    const signal = this.#ended.signal;
    const send = (message: Record<string, unknown>) => this.#send(message);
    const stop = () => this.#stop();
    return {
      id: nextSessionId++,
      remoteAddress: this.#stream.remoteAddress,
      secure: this.#stream.secure === true,
      peerCertificate: this.#stream.peerCertificate ?? null,
      signal,
      get queuedBytes() {
        return writer.queuedBytes;
      },
      notify(method: string, params?: Params): boolean {
        if (signal.aborted) return false;
        const message: Record<string, unknown> = { jsonrpc: "2.0", method };
        if (params !== undefined) message.params = params;
        try {
          send(message);
        } catch (error) {
          throw new RpcError(
            INVALID_PARAMS,
            `Invalid params: the notification ${
              JSON.stringify(method)
            } cannot be encoded as JSON: ${messageOf(error)}`,
          );
        }
        return true;
      },
      close: stop,
    };
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
    this.#writer.write(frame).catch(() => {});
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
        await this.#change();
        continue;
      }
      const value = await this.#read();
      if (this.#stopped) return;
      const done = value === null;
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
    this.#decoder = codec.decoder({
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
      const part = await this.#respond(waiting);
      if (part !== null && !this.#stopped) {
        await this.#writer.write(this.#codec!.frame(part));
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

  #respond(waiting: Waiting): Promise<unknown> {
    const frame = waiting.frame!;
    if (frame.kind === "reply") return Promise.resolve(frame.part);
    return dispatch(
      frame.value,
      this.#methods,
      hooksOf(this.#dispatchOptions, waiting.receivedAt),
      this.#codec!,
    );
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
    if (this.#idleTimer === undefined) this.#waitIdle(this.#idleTimeoutMs);
  }

  #waitIdle(ms: number): void {
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      if (this.#stopped || this.#idleSince === undefined) return;
      const left = this.#idleSince + this.#idleTimeoutMs - performance.now();
      if (left <= 0) this.#stop();
      // A timer may fire a little early by this clock: never close early.
      else this.#waitIdle(Math.max(1, left));
    }, ms);
  }

  /** The connection is busy: the idle timeout does not run. */
  #clearIdle(): void {
    this.#idleSince = undefined;
  }

  #stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#ended.abort();
    this.#inputEnded.abort();
    this.#clearIdle();
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    try {
      this.#stream.close();
    } catch {
      // Already closed.
    }
    this.#cancelled = this.#cancelRead();
    this.#notify();
  }
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
