/**
 * The server side of one connection: reads NDJSON frames from a byte stream,
 * runs them against a method table, and writes the responses back, within
 * the connection's limits (frame size, requests in flight, idle time).
 *
 * @module
 */

import { handleText, type Methods, RunningCalls } from "./dispatcher.ts";
import { FrameWriter } from "./frame_writer.ts";
import {
  DEFAULT_MAX_FRAME_BYTES,
  encodeTextFrame,
  type Frame,
  NdjsonDecoder,
} from "./ndjson.ts";
import {
  CANCEL_METHOD,
  GOAWAY_METHOD,
  isRequestId,
  type Params,
  type RequestId,
} from "./message.ts";
import type { ByteStream } from "./transport.ts";
import { INVALID_PARAMS, messageOf, RpcError } from "./errors.ts";
import { exactIds, idJson } from "./_json_ids.ts";

/**
 * One client connection as the server's methods see it: a way to push
 * notifications to that client (server → client, as JSON-RPC 2.0 allows
 * either side to send requests), and to learn when it goes away.
 */
export interface RpcSession {
  /** Unique among the sessions of this process, from 1. */
  readonly id: number;
  /** The peer's address as the transport reports it (e.g. `127.0.0.1:51234`), if known. */
  readonly remoteAddress: string | undefined;
  /** Aborts when the connection ends, for whatever reason. */
  readonly signal: AbortSignal;
  /**
   * Bytes queued for this client and not yet taken by the transport: grows
   * when the client reads slower than the server writes.
   */
  readonly queuedBytes: number;
  /**
   * Queues a notification to the client (a request without an id).
   *
   * @returns false, sending nothing, when the connection has ended.
   * @throws {RpcError} INVALID_PARAMS when `params` cannot be encoded as JSON.
   */
  notify(method: string, params?: Params): boolean;
  /** Ends the connection at once (responses not yet written are dropped). */
  close(): void;
}

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
   * Largest request frame accepted, in bytes (default 1 MiB). A larger frame
   * is answered with -32600 and skipped; the connection stays open.
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

const GOAWAY_FRAME = `{"jsonrpc":"2.0","method":"${GOAWAY_METHOD}"}`;

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
 * import { validateServerLimits } from "./server_connection.ts";
 * validateServerLimits({ maxFrameBytes: 64 * 1024, idleTimeoutMs: 0 });
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
 * Serves JSON-RPC 2.0 over NDJSON on one byte stream until the connection is
 * finished: the peer closed it (after its last requests are answered), the
 * idle timeout passed, a read or write failed, or `options.signal` aborted.
 * Frames run concurrently; responses are written as they complete, and those
 * completed in the same tick share one write.
 *
 * Bad input gets the specification's error response: an oversized frame gets
 * -32600 (`Invalid Request: frame exceeds <max> bytes; …`) and a frame that is
 * not UTF-8 gets -32700; the connection stays open. A peer that disconnects
 * mid-response is not an error.
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
 * ```ts ignore
 * import { serveStream } from "./server_connection.ts";
 * import { fromDenoConn } from "./deno_tcp.ts";
 * const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
 * const conn = await listener.accept();
 * await serveStream(fromDenoConn(conn), { add: (a: number, b: number) => a + b });
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
  /** What to run; a precomputed reply; null once run out of turn. */
  frame: Frame | { kind: "reply"; text: string } | null;
  /** `Date.now()` when it was read, ms. */
  receivedAt: number;
  /** Its size, for the bound on waiting frames: text length, else 0. */
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
  readonly #maxFrameBytes: number;
  readonly #maxInFlight: number;
  readonly #idleTimeoutMs: number;
  readonly #maxDeadlineMs: number | undefined;
  readonly #decoder: NdjsonDecoder;
  readonly #writer: FrameWriter;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  /** Decoded frames waiting for a free slot; `#next` is the first unsent. */
  #backlog: Waiting[] = [];
  #next = 0;
  /** Frames of the backlog before this index were checked for rpc.cancel. */
  #scanned = 0;
  /** The sizes of the backlog's frames from `#next` on. */
  #waitingBytes = 0;
  #inFlight = 0;
  #stopped = false;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
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
    this.#maxDeadlineMs = options.maxDeadlineMs;
    this.#decoder = new NdjsonDecoder({ maxFrameBytes: this.#maxFrameBytes });
    this.#writer = new FrameWriter(stream.writable, {
      onError: () => this.#stop(),
    });
    this.#reader = stream.readable.getReader();
    this.#session = this.#makeSession();
    this.#methods = typeof methods === "function"
      ? methods(this.#session)
      : methods;
  }

  #makeSession(): RpcSession {
    const writer = this.#writer;
    const signal = this.#ended.signal;
    const stop = () => this.#stop();
    return {
      id: nextSessionId++,
      remoteAddress: this.#stream.remoteAddress,
      signal,
      get queuedBytes() {
        return writer.queuedBytes;
      },
      notify(method: string, params?: Params): boolean {
        if (signal.aborted) return false;
        let text: string;
        try {
          text = JSON.stringify({ jsonrpc: "2.0", method, params });
        } catch (error) {
          throw new RpcError(
            INVALID_PARAMS,
            `Invalid params: the notification ${
              JSON.stringify(method)
            } cannot be encoded as JSON: ${messageOf(error)}`,
          );
        }
        writer.write(encodeTextFrame(text)).catch(() => {});
        return true;
      },
      close: stop,
    };
  }

  async run(): Promise<void> {
    const { signal, goAway } = this.#options;
    const onAbort = () => this.#stop();
    const onGoAway = () => {
      if (!this.#stopped) {
        this.#writer.write(encodeTextFrame(GOAWAY_FRAME)).catch(() => {});
      }
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
      const { done, value } = await this.#reader.read();
      if (this.#stopped) return;
      const frames = done ? this.#decoder.end() : this.#decoder.push(value);
      if (done) {
        ended = true;
        this.#inputEnded.abort();
      }
      if (frames.length > 0) {
        this.#clearIdle();
        const receivedAt = Date.now();
        const waiting = frames.map((frame): Waiting => {
          const size = frame.kind === "text" ? frame.text.length : 0;
          this.#waitingBytes += size;
          return { frame, receivedAt, size };
        });
        this.#backlog = this.#backlog.slice(this.#next).concat(waiting);
        this.#scanned = Math.max(0, this.#scanned - this.#next);
        this.#next = 0;
      }
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
        text:
          `{"jsonrpc":"2.0","error":{"code":-32005,"message":"Cancelled: the client cancelled the call before it ran (${CANCEL_METHOD})"},"id":${
            idJson(id)
          }}`,
      };
      this.#waitingBytes -= waiting.size;
      waiting.size = 0;
      return;
    }
  }

  #dispatch(waiting: Waiting): void {
    this.#inFlight++;
    this.#clearIdle();
    this.#respond(waiting)
      .then((text) => {
        if (text === null || this.#stopped) return;
        return this.#writer.write(encodeTextFrame(text));
      })
      .catch(() => {
        // A failed write stops the connection through the writer's onError.
      })
      .finally(() => {
        this.#inFlight--;
        // Here, not only in #loop: it may be waiting for a read.
        if (!this.#stopped) this.#dispatchBacklog();
        this.#armIdle();
        this.#notify();
      });
  }

  #respond(waiting: Waiting): Promise<string | null> {
    const frame = waiting.frame!;
    switch (frame.kind) {
      case "text":
        return handleText(frame.text, this.#methods, {
          onInternalError: this.#options.onInternalError,
          onMethodNotFound: this.#options.onMethodNotFound === undefined
            ? undefined
            : (method) =>
              this.#options.onMethodNotFound!(method, this.#session),
          signal: this.#inputEnded.signal,
          calls: this.#calls,
          receivedAt: waiting.receivedAt,
          maxDeadlineMs: this.#maxDeadlineMs,
          session: this.#session,
        });
      case "reply":
        return Promise.resolve(frame.text);
      case "tooLarge":
        return Promise.resolve(
          `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: frame exceeds ${this.#maxFrameBytes} bytes; send smaller messages or raise maxFrameBytes"},"id":null}`,
        );
      case "badUtf8":
        return Promise.resolve(
          `{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: frame is not valid UTF-8"},"id":null}`,
        );
    }
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

  #armIdle(): void {
    this.#clearIdle();
    if (
      this.#stopped || this.#idleTimeoutMs <= 0 || this.#inFlight > 0 ||
      this.#next < this.#backlog.length
    ) {
      return;
    }
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      this.#stop();
    }, this.#idleTimeoutMs);
  }

  #clearIdle(): void {
    if (this.#idleTimer !== undefined) {
      clearTimeout(this.#idleTimer);
      this.#idleTimer = undefined;
    }
  }

  #stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#ended.abort();
    this.#inputEnded.abort();
    this.#clearIdle();
    try {
      this.#stream.close();
    } catch {
      // Already closed.
    }
    this.#cancelled = this.#reader.cancel().catch(() => {});
    this.#notify();
  }
}

/** The id an `rpc.cancel` notification frame names, or undefined if it is none. */
function cancelTargetOf(frame: Waiting["frame"]): RequestId | undefined {
  if (frame?.kind !== "text" || !frame.text.includes(CANCEL_METHOD)) {
    return undefined;
  }
  const value = parseObject(frame.text);
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
  if (frame?.kind !== "text") return null;
  const value = parseObject(frame.text);
  if (value === null || typeof value.method !== "string") return null;
  return isRequestId(value.id) ? value.id : null;
}

function parseObject(text: string): Record<string, unknown> | null {
  let value: unknown;
  try {
    value = exactIds(text, JSON.parse(text));
  } catch {
    return null;
  }
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? value as Record<string, unknown>
    : null;
}
