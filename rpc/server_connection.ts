/**
 * The server side of one connection: reads NDJSON frames from a byte stream,
 * runs them against a method table, and writes the responses back, within
 * the connection's limits (frame size, requests in flight, idle time).
 *
 * @module
 */

import { handleText, type Methods } from "./dispatcher.ts";
import { FrameWriter } from "./frame_writer.ts";
import {
  DEFAULT_MAX_FRAME_BYTES,
  encodeTextFrame,
  type Frame,
  NdjsonDecoder,
} from "./ndjson.ts";
import { GOAWAY_METHOD, type Params } from "./message.ts";
import type { ByteStream } from "./transport.ts";
import { INVALID_PARAMS, messageOf, RpcError } from "./errors.ts";

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
   * reached, the server stops reading from the socket until one finishes, so
   * TCP flow control slows the client down. A frame counts until its response
   * has been written.
   */
  maxInFlight?: number;
  /**
   * Closes a connection after this many ms with no frame received and
   * nothing in flight (default 300_000 ms; 0 disables the timeout; values
   * above about 24.8 days are capped to that).
   */
  idleTimeoutMs?: number;
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
 * integer, or `idleTimeoutMs` is negative or not a number; the message names
 * the option.
 *
 * @example
 * ```ts
 * import { validateServerLimits } from "./server_connection.ts";
 * validateServerLimits({ maxFrameBytes: 64 * 1024, idleTimeoutMs: 0 });
 * ```
 */
export function validateServerLimits(limits: ServerLimits): void {
  const { maxFrameBytes, maxInFlight, idleTimeoutMs } = limits;
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

class ServerConnection {
  readonly #stream: ByteStream;
  readonly #methods: Methods;
  readonly #session: RpcSession;
  readonly #ended = new AbortController();
  readonly #options: ServeStreamOptions;
  readonly #maxFrameBytes: number;
  readonly #maxInFlight: number;
  readonly #idleTimeoutMs: number;
  readonly #decoder: NdjsonDecoder;
  readonly #writer: FrameWriter;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  /** Decoded frames waiting for a free slot; `#next` is the first unsent. */
  #backlog: Frame[] = [];
  #next = 0;
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
      if (this.#inFlight >= this.#maxInFlight) {
        await this.#change();
        continue;
      }
      const { done, value } = await this.#reader.read();
      if (this.#stopped) return;
      const frames = done ? this.#decoder.end() : this.#decoder.push(value);
      if (done) ended = true;
      if (frames.length > 0) {
        this.#clearIdle();
        this.#backlog = this.#backlog.slice(this.#next).concat(frames);
        this.#next = 0;
      }
    }
  }

  #dispatchBacklog(): void {
    while (
      this.#next < this.#backlog.length && this.#inFlight < this.#maxInFlight
    ) {
      this.#dispatch(this.#backlog[this.#next++]);
    }
    if (this.#next === this.#backlog.length) {
      this.#backlog = [];
      this.#next = 0;
    }
  }

  #dispatch(frame: Frame): void {
    this.#inFlight++;
    this.#clearIdle();
    this.#respond(frame)
      .then((text) => {
        if (text === null || this.#stopped) return;
        return this.#writer.write(encodeTextFrame(text));
      })
      .catch(() => {
        // A failed write stops the connection through the writer's onError.
      })
      .finally(() => {
        this.#inFlight--;
        this.#armIdle();
        this.#notify();
      });
  }

  #respond(frame: Frame): Promise<string | null> {
    switch (frame.kind) {
      case "text":
        return handleText(frame.text, this.#methods, {
          onInternalError: this.#options.onInternalError,
          onMethodNotFound: this.#options.onMethodNotFound === undefined
            ? undefined
            : (method) =>
              this.#options.onMethodNotFound!(method, this.#session),
        });
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
