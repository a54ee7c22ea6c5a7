/**
 * The client side of a connection: many concurrent JSON-RPC calls
 * multiplexed over one byte stream, matched to their responses by id.
 *
 * @module
 */

import {
  CANCELLED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  INVALID_PARAMS,
  messageOf,
  RpcError,
} from "../errors.ts";
import type { Params, Response } from "../message.ts";
import {
  CANCEL_METHOD,
  GOAWAY_METHOD,
  TIMEOUT_MEMBER,
  validateResponse,
} from "../message.ts";
import { type Frame, FrameWriter } from "../framing/_frame_writer.ts";
import type { ByteStream } from "../transport/transport.ts";
import type { Codec } from "../codec/codec.ts";
import type { FrameCodec, FrameDecoder } from "../codec/_frame_codec.ts";
import { codecNamed } from "../codec/codecs.ts";
import { Refusal } from "../framing/_refusal.ts";
import { Deadlines } from "./_deadlines.ts";
import { directOf, streamReading } from "../transport/conn_stream.ts";

/** Default largest response frame a client accepts: 16 MiB (16_777_216 bytes). */
export const DEFAULT_CLIENT_MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** Default deadline of a call: 30_000 ms. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/** Largest delay `setTimeout` honours (about 24.8 days), in ms. */
const MAX_TIMER_MS = 2_147_483_647;

/** Options of {@link RpcConnection}. */
export interface RpcConnectionOptions {
  /** The peer's URL, used in error messages (e.g. `tcp://127.0.0.1:7001`). */
  url?: string;
  /**
   * The wire codec: `"json"` (NDJSON, one JSON text per line) or `"cbor"`
   * (the connection opens with the CBOR self-describe tag `d9 d9 f7`, then
   * each frame is a 4-byte big-endian length and one CBOR item). Every
   * Rafter server accepts both on one port. Calls mean the same under
   * both: params are sent as JSON would send them (see `codec.ts`).
   * @default "json"
   */
  codec?: Codec;
  /**
   * Largest frame accepted from the server, in bytes (default 16 MiB): an
   * NDJSON line, or a CBOR item without its length. A larger frame closes
   * the connection: its response cannot be matched.
   */
  maxFrameBytes?: number;
  /**
   * Default deadline of each call, in ms (default 30_000). `Infinity` means
   * no deadline.
   */
  timeoutMs?: number;
  /**
   * Whether the server is told about deadlines and abandoned calls (Rafter
   * extensions of JSON-RPC 2.0, which a plain server ignores): each request
   * carries the ms the client will wait in its {@link TIMEOUT_MEMBER} member
   * (`"timeoutMs": 2931`), and a call abandoned after its request was
   * written (its deadline passed, or its signal aborted) is followed by the
   * notification {@link CANCEL_METHOD} `{ "id": <its id> }`, so a Rafter
   * server stops working on it. Turn it off for a server that refuses
   * unknown members. @default true
   */
  propagateDeadlines?: boolean;
  /**
   * Called with each valid response whose id matches no outstanding call:
   * a late response to a call that timed out or was cancelled, a response
   * with id null (the server could not read a request), or a stray one.
   * Such responses are otherwise ignored.
   */
  onUnmatchedResponse?(response: Response): void;
  /**
   * Called with each notification the server sends (a request without an
   * id; e.g. a registry's watch events), in the order received. `rpc.goaway`
   * is handled by the connection itself and not passed on. Server requests
   * that carry an id are ignored: this side answers nothing.
   */
  onNotification?(method: string, params: Params | undefined): void;
}

/** Options of one {@link RpcConnection.call}. */
export interface CallOptions {
  /**
   * Aborting it rejects the call with `CANCELLED` (-32005) at once, and
   * (once the request was written) tells the server with `rpc.cancel`.
   */
  signal?: AbortSignal;
  /**
   * Deadline of this call in ms, overriding the connection's `timeoutMs`.
   * Zero or less rejects at once with `DEADLINE_EXCEEDED`, without sending;
   * `Infinity` (or more than about 24.8 days) means no deadline. Sent to the
   * server, rounded up to whole ms, as the request's `timeoutMs` member.
   */
  timeoutMs?: number;
}

/** One member of a {@link RpcConnection.batch}. */
export interface BatchRequest {
  /** Method name. */
  method: string;
  /** Positional (array) or named (object) params; omitted when undefined. */
  params?: Params;
  /** Send it as a notification: no id, no answer, `{ ok: true, value: undefined }` in the results. */
  notification?: boolean;
}

/**
 * How one member of a batch ended: its result, or the server's error
 * answer for it. Failures of the whole batch (connection, deadline,
 * abort) reject the batch instead.
 */
export type BatchResult =
  | { ok: true; value: unknown }
  | { ok: false; error: RpcError };

interface PendingCall {
  method: string;
  resolve(result: unknown): void;
  reject(error: unknown): void;
  /** Removes the call's abort listener. */
  cleanup(): void;
  /**
   * The writer's batch holding its request (see `FrameWriter.lastBatch`):
   * not handed to the stream when the connection ends, it was not sent.
   * Undefined: counted as sent.
   */
  batch?: number;
}

/** Options of a call that gives none. */
const NO_OPTIONS: CallOptions = Object.freeze({});

/** One {@link RpcConnection.call} waiting for its response. */
class WaitingCall implements PendingCall {
  /** Its deadline, a `performance.now()` time in ms (Infinity: none). */
  at = Infinity;
  /** Its abort listener, when it has a signal. */
  onAbort: (() => void) | undefined;
  /** The writer's batch holding its request. */
  batch = 0;

  constructor(
    readonly id: number,
    readonly method: string,
    readonly timeoutMs: number,
    readonly resolve: (result: unknown) => void,
    readonly reject: (error: unknown) => void,
    readonly signal: AbortSignal | undefined,
  ) {}

  cleanup(): void {
    if (this.onAbort !== undefined) {
      this.signal!.removeEventListener("abort", this.onAbort);
    }
  }
}

/**
 * A client connection that multiplexes concurrent calls over one byte stream,
 * using numeric request ids; responses may arrive in any order. Requests sent
 * in the same tick share one write.
 *
 * How a call fails tells whether it may have run on the server:
 * - {@link ConnectionError} with `written: false`: the request was never handed
 *   to the transport (the connection was already closed); always safe to retry.
 * - {@link ConnectionError} with `written: true`: the connection ended (peer
 *   closed it, read or write error, `close()`) after the request was handed
 *   to the transport; it may have run.
 * - {@link RpcError} `DEADLINE_EXCEEDED` (-32003) or `CANCELLED` (-32005):
 *   the call was abandoned; `data.written` says whether it was sent. A late
 *   response is ignored.
 * - any other {@link RpcError}: the server's error response.
 *
 * Deadlines reach the server (unless `propagateDeadlines: false`): each
 * request carries the ms left in a `timeoutMs` member, and a call abandoned
 * after its request was written is followed by
 * `{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":<id>}}`. A call
 * that was answered, or never sent, is never cancelled.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { dial } from "../transport/dial.ts";
 * import { serve } from "../../adapter/deno/serve.ts";
 * const server = serve({ methods: { add: (a: number, b: number) => a + b } });
 * const connection = await dial(server.url);
 * assert.equal(await connection.call<string>("rpc.ping"), "pong");
 * assert.equal(await connection.call<number>("add", [1, 2], { timeoutMs: 1000 }), 3);
 * connection.close();
 * await connection.closed;
 * await server.close();
 * ```
 */
export class RpcConnection {
  /** The peer's URL as given in the options (for messages), or "the peer". */
  readonly url: string;
  /**
   * Resolves once the connection has ended, from either side, and its stream
   * is closed. Never rejects.
   */
  readonly closed: Promise<void>;

  readonly #stream: ByteStream;
  readonly #writer: FrameWriter;
  /** The next chunk read, or null at the end. */
  readonly #read: () => Promise<Uint8Array | null>;
  /** Stops reading; settles once a pending read is over. Never rejects. */
  readonly #cancelRead: () => Promise<void>;
  readonly #codec: FrameCodec;
  readonly #decoder: FrameDecoder;
  readonly #maxFrameBytes: number;
  readonly #timeoutMs: number;
  readonly #propagateDeadlines: boolean;
  readonly #onUnmatchedResponse?: (response: Response) => void;
  readonly #onNotification?: (
    method: string,
    params: Params | undefined,
  ) => void;
  readonly #pending = new Map<number, PendingCall>();
  /** The deadlines of the calls in #pending that have one. */
  readonly #deadlines = new Deadlines<WaitingCall>({
    isLive: (call) => this.#pending.get(call.id) === call,
    live: () => this.#pending.size,
    expire: (call) => {
      this.#abandon(call.id);
      call.reject(
        new RpcError(
          DEADLINE_EXCEEDED,
          `Deadline exceeded: no response to ${
            JSON.stringify(String(call.method))
          } within ${Math.round(call.timeoutMs)} ms`,
          { timeoutMs: call.timeoutMs, written: true },
        ),
      );
    },
  });
  #nextId = 1;
  #isClosed = false;
  #draining = false;
  /** The last error the server answered with id null (a frame it refused). */
  #refused: string | undefined;
  /** Whether a byte was read yet (the first one tells a codec mismatch). */
  #heard = false;
  /** Why the connection failed before the server could read any request. */
  #unread: string | undefined;
  #cancelled: Promise<void> = Promise.resolve();

  /**
   * Starts reading responses from `stream` at once. The connection owns the
   * stream from now on and closes it when it ends.
   *
   * @throws {RangeError} when `maxFrameBytes` or `timeoutMs` is not a
   * positive number, or `codec` is neither `"json"` nor `"cbor"`.
   */
  constructor(stream: ByteStream, options: RpcConnectionOptions = {}) {
    this.url = options.url ?? "the peer";
    this.#maxFrameBytes = options.maxFrameBytes ??
      DEFAULT_CLIENT_MAX_FRAME_BYTES;
    if (!Number.isSafeInteger(this.#maxFrameBytes) || this.#maxFrameBytes < 1) {
      throw new RangeError(
        `maxFrameBytes must be a positive integer number of bytes, got ${this.#maxFrameBytes}`,
      );
    }
    this.#codec = codecNamed(options.codec);
    this.#decoder = this.#codec.decoder({
      maxFrameBytes: this.#maxFrameBytes,
      preamble: false,
    });
    const timeoutMs = options.timeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    if (typeof timeoutMs !== "number" || !(timeoutMs > 0)) {
      throw new RangeError(
        `timeoutMs must be a positive number of ms, got ${timeoutMs}`,
      );
    }
    this.#timeoutMs = timeoutMs;
    this.#propagateDeadlines = options.propagateDeadlines ?? true;
    this.#onUnmatchedResponse = options.onUnmatchedResponse;
    this.#onNotification = options.onNotification;
    this.#stream = stream;
    const direct = directOf(stream);
    this.#writer = new FrameWriter(direct?.write ?? stream.writable, {
      onError: (error) =>
        this.#shutdown(`write failed: ${messageOf(error)}`, error),
      // Nothing reads this side's queued bytes: no UTF-8 count per request.
      exactTextBytes: false,
    });
    [this.#read, this.#cancelRead] = direct === undefined
      ? streamReading(stream.readable)
      : [direct.read, direct.cancel];
    if (this.#codec.preamble.length > 0) {
      // A failed write ends the connection.
      this.#writer.write(this.#codec.preamble).catch(() => {});
    }
    this.closed = this.#readLoop();
  }

  /**
   * Whether the connection takes no new calls: it has ended, or its server
   * asked it to go away (`rpc.goaway`) and it closes once its calls are
   * answered. Calls on it fail with `written: false`.
   */
  get isClosed(): boolean {
    return this.#isClosed || this.#draining;
  }

  /** How many calls are waiting for their response. */
  get pendingCalls(): number {
    return this.#pending.size;
  }

  /**
   * Calls a method and waits for its result.
   *
   * @param method Method name, e.g. `"greet"`.
   * @param params Positional (array) or named (object) params; omit for none.
   * @param options.timeoutMs Deadline in ms (default: the connection's, 30_000);
   * sent to the server as the request's `timeoutMs` member.
   * @param options.signal Aborting it abandons the call: it rejects at once,
   * and the server is sent `rpc.cancel` for it.
   * @returns the response's `result`, typed as `T` without checking.
   * @throws {ConnectionError} `written: false` when the connection is closed
   * (nothing is sent); `written: true` when it ends before the response.
   * @throws {RpcError} the server's error response; `DEADLINE_EXCEEDED` when
   * no response came in time; `CANCELLED` when the signal aborted (at once,
   * without sending, if it already had); `INVALID_PARAMS` when `params` is not
   * an array or object or cannot be encoded as JSON (nothing is sent).
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { dial } from "../transport/dial.ts";
   * import { serve } from "../../adapter/deno/serve.ts";
   * const server = serve({ methods: { greet: ({ name }: { name: string }) => `Hello, ${name}!` } });
   * const connection = await dial(server.url);
   * const greeting = await connection.call<string>("greet", { name: "Ada" }, {
   *   timeoutMs: 2_000,
   *   signal: AbortSignal.timeout(5_000),
   * });
   * assert.equal(greeting, "Hello, Ada!");
   * connection.close();
   * await server.close();
   * ```
   */
  call<T = unknown>(
    method: string,
    params?: Params,
    options: CallOptions = NO_OPTIONS,
  ): Promise<T> {
    const timeoutMs = this.#timeoutOf(
      String(method),
      undefined,
      options,
      "call",
    );
    if (typeof timeoutMs !== "number") return Promise.reject(timeoutMs);
    const { signal } = options;
    const id = this.#nextId++;
    const timed = timeoutMs <= MAX_TIMER_MS;
    let frame: Frame;
    try {
      frame = encodeRequest(
        this.#codec,
        method,
        params,
        id,
        timed && this.#propagateDeadlines ? Math.ceil(timeoutMs) : undefined,
      );
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<T>((resolve, reject) => {
      const call = new WaitingCall(
        id,
        method,
        timeoutMs,
        resolve as (result: unknown) => void,
        reject,
        signal,
      );
      this.#pending.set(id, call);
      if (timed) {
        // One timer for the connection, not one per call, and one clock
        // reading per turn, not per call (`_deadlines.ts`).
        this.#deadlines.addAfterTurn(call);
      }
      if (signal !== undefined) {
        call.onAbort = () => {
          this.#abandon(id);
          reject(
            cancelledError(JSON.stringify(String(method)), true, signal.reason),
          );
        };
        signal.addEventListener("abort", call.onAbort, { once: true });
      }
      // A failed write ends the connection, which rejects this call.
      this.#writer.write(frame);
      call.batch = this.#writer.lastBatch;
    });
  }

  /**
   * Sends `requests` as one JSON-RPC 2.0 batch (one JSON array on one
   * line, JSON-RPC 2.0 §6): the server runs them concurrently and answers
   * with one array. Resolves once every request with an id is answered,
   * with one {@link BatchResult} per request, in order (notifications get
   * `{ ok: true, value: undefined }`). One deadline and one signal cover
   * the whole batch; each request carries the time left, and on timeout
   * or abort every unanswered one is cancelled with `rpc.cancel`.
   *
   * @throws {RangeError} for an empty batch or a bad `timeoutMs`.
   * @throws {TypeError} / {@link RpcError} `INVALID_PARAMS` as
   * {@link call} does, for any member; nothing is sent then.
   * @throws the batch's failure as {@link call} does: {@link ConnectionError}
   * (`written` says whether it left), `DEADLINE_EXCEEDED`, `CANCELLED`.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { dial } from "../transport/dial.ts";
   * import { serve } from "../../adapter/deno/serve.ts";
   * const server = serve({
   *   methods: {
   *     add: (a: number, b: number) => a + b,
   *     greet: (name: string) => `Hello, ${name}!`,
   *   },
   * });
   * const connection = await dial(server.url);
   * const [sum, greeting] = await connection.batch([
   *   { method: "add", params: [1, 2] },
   *   { method: "greet", params: ["Ada"] },
   * ]);
   * assert.deepEqual(sum, { ok: true, value: 3 });
   * assert.deepEqual(greeting, { ok: true, value: "Hello, Ada!" });
   * connection.close();
   * await server.close();
   * ```
   */
  batch(
    requests: readonly BatchRequest[],
    options: CallOptions = {},
  ): Promise<BatchResult[]> {
    if (!Array.isArray(requests) || requests.length === 0) {
      return Promise.reject(
        new RangeError("a batch must hold at least one request"),
      );
    }
    const name = `a batch of ${requests.length} (${
      requests.slice(0, 3).map((r) => JSON.stringify(String(r.method))).join(
        ", ",
      )
    }${requests.length > 3 ? ", …" : ""})`;
    const first = String(requests[0].method);
    const timeoutMs = this.#timeoutOf(first, name, options, "send");
    if (typeof timeoutMs !== "number") return Promise.reject(timeoutMs);
    const { signal } = options;
    const timed = timeoutMs <= MAX_TIMER_MS;
    const sentTimeout = timed && this.#propagateDeadlines
      ? Math.ceil(timeoutMs)
      : undefined;
    const ids: (number | null)[] = [];
    const parts: unknown[] = [];
    try {
      for (const request of requests) {
        const id = request.notification === true ? null : this.#nextId++;
        ids.push(id);
        parts.push(
          requestPart(
            this.#codec,
            request.method,
            request.params,
            id ?? undefined,
            id === null ? undefined : sentTimeout,
          ),
        );
      }
    } catch (error) {
      return Promise.reject(error);
    }
    const results: BatchResult[] = ids.map(() => ({
      ok: true,
      value: undefined,
    }));
    const frame = this.#codec.frame(this.#codec.batch(parts));
    const waiting = ids.filter((id): id is number => id !== null);
    if (waiting.length === 0) {
      return this.#writer.write(frame).then(() => results, (error) => {
        throw new ConnectionError(
          `connection to ${this.url} failed while sending ${name}: ${
            messageOf(error)
          }`,
          true,
          { cause: error },
        );
      });
    }
    return new Promise<BatchResult[]>((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      let open = waiting.length;
      let settled = false;
      const giveUp = (error: unknown) => {
        if (settled) return;
        settled = true;
        cleanup();
        for (const id of waiting) this.#abandon(id);
        reject(error);
      };
      const onAbort = () => giveUp(cancelledError(name, true, signal?.reason));
      const cleanup = () => {
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      ids.forEach((id, index) => {
        if (id === null) return;
        this.#pending.set(id, {
          method: requests[index].method,
          resolve: (value) => {
            results[index] = { ok: true, value };
            if (--open === 0 && !settled) {
              settled = true;
              cleanup();
              resolve(results);
            }
          },
          reject: (error) => {
            if (
              error instanceof RpcError && !(error instanceof ConnectionError)
            ) {
              // The server's error answer for this member.
              results[index] = { ok: false, error };
              if (--open === 0 && !settled) {
                settled = true;
                cleanup();
                resolve(results);
              }
              return;
            }
            giveUp(error);
          },
          cleanup: () => {},
        });
      });
      if (timed) {
        timer = setTimeout(() => {
          giveUp(
            new RpcError(
              DEADLINE_EXCEEDED,
              `Deadline exceeded: no response to ${name} within ${
                Math.round(timeoutMs)
              } ms`,
              { timeoutMs, written: true },
            ),
          );
        }, timeoutMs);
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#writer.write(frame);
    });
  }

  /**
   * Sends a notification: a request without an id, which gets no response.
   *
   * @returns a promise that resolves once the frame has been written to the
   * transport (not when the server has run it).
   * @throws {ConnectionError} `written: false` when the connection is closed;
   * `written: true` when writing fails.
   * @throws {RpcError} `INVALID_PARAMS` when `params` cannot be encoded.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { dial } from "../transport/dial.ts";
   * import { serve } from "../../adapter/deno/serve.ts";
   * const logged: string[] = [];
   * const server = serve({ methods: { log: (line: string) => void logged.push(line) } });
   * const connection = await dial(server.url);
   * await connection.notify("log", ["started"]);
   * await connection.call("rpc.ping"); // answered after the notification ran
   * assert.deepEqual(logged, ["started"]);
   * connection.close();
   * await server.close();
   * ```
   */
  async notify(method: string, params?: Params): Promise<void> {
    if (this.isClosed) throw this.#closedError(method);
    const frame = encodeRequest(this.#codec, method, params, undefined);
    try {
      await this.#writer.write(frame);
    } catch (error) {
      throw new ConnectionError(
        `connection to ${this.url} failed while sending the notification ${
          JSON.stringify(String(method))
        }: ${messageOf(error)}`,
        true,
        { cause: error },
      );
    }
  }

  /**
   * Closes the connection gracefully: it takes no new calls (they fail with
   * `written: false`, so a caller can send them elsewhere), and closes once
   * the calls under way are answered, as when its server sends
   * `rpc.goaway`. Safe to call more than once.
   */
  drain(): void {
    this.#goAway();
  }

  /**
   * Closes the connection now. Calls still waiting reject with a
   * `ConnectionError` (`written: true`); frames not yet written are dropped,
   * so await `notify` first if it must go out. Safe to call more than once.
   * Await {@link closed} to know the stream is closed.
   *
   * @example
   * ```ts
   * import assert from "node:assert/strict";
   * import { dial } from "../transport/dial.ts";
   * import { ConnectionError } from "../errors.ts";
   * import { serve } from "../../adapter/deno/serve.ts";
   * const server = serve({ methods: {} });
   * const connection = await dial(server.url);
   * connection.close();
   * await connection.closed;
   * await assert.rejects(
   *   connection.call("rpc.ping"),
   *   (error) => error instanceof ConnectionError && !error.written,
   * );
   * await server.close();
   * ```
   */
  close(): void {
    this.#shutdown("close() was called");
  }

  async #readLoop(): Promise<void> {
    let reason = "the peer closed the connection";
    let cause: unknown;
    try {
      while (!this.#isClosed) {
        const value = await this.#read();
        if (this.#isClosed) return;
        const done = value === null;
        if (!done && !this.#heard && value.length > 0) {
          this.#heard = true;
          if (answersInJson(this.#codec, value[0], this.#maxFrameBytes)) {
            reason =
              this.#unread =
                `the server at ${this.url} answered in NDJSON: it has no CBOR codec loaded (import "@rafter/rpc/cbor" in the server's process), or use codec: "json"`;
            return;
          }
        }
        const frames = done ? this.#decoder.end() : this.#decoder.push(value);
        for (const frame of frames) {
          if (frame.tooLarge) {
            reason =
              `received a frame larger than maxFrameBytes (${this.#maxFrameBytes} bytes)`;
            return;
          }
          if (frame.fatal !== undefined) {
            reason = frame.fatal;
            return;
          }
          this.#receive(frame.value);
        }
        if (done) {
          if (this.#refused !== undefined) {
            reason =
              `the server closed the connection after refusing a frame: ${this.#refused}`;
          }
          return;
        }
      }
    } catch (error) {
      reason = `read failed: ${messageOf(error)}`;
      if (this.#refused !== undefined) {
        reason += ` (the server had refused a frame: ${this.#refused})`;
      }
      cause = error;
    } finally {
      this.#shutdown(reason, cause);
      await this.#cancelled;
      await this.#writer.idle();
    }
  }

  #receive(value: unknown): void {
    if (Array.isArray(value)) {
      for (const item of value) this.#receiveOne(item);
    } else {
      // Not wrapped in an array: one allocation less per response.
      this.#receiveOne(value);
    }
    this.#closeIfDrained();
  }

  /** One message of a received frame (a batch's member, or the frame). */
  #receiveOne(item: unknown): void {
    // A frame this side cannot read holds no response it could match.
    if (item instanceof Refusal) return;
    const response = validateResponse(item);
    if (response === null) {
      const notification = asNotification(item);
      if (notification === null) return;
      if (notification.method === GOAWAY_METHOD) {
        this.#goAway();
      } else if (this.#onNotification !== undefined) {
        try {
          this.#onNotification(notification.method, notification.params);
        } catch {
          // A failing callback must not stop the connection.
        }
      }
      return;
    }
    // This side's ids are safe integers: any other id is not one of ours.
    const call = Number.isSafeInteger(response.id)
      ? this.#pending.get(response.id as number)
      : undefined;
    if (call === undefined) {
      if (response.id === null && "error" in response) {
        this.#refused = response.error.message;
      }
      try {
        this.#onUnmatchedResponse?.(response);
      } catch {
        // A failing callback must not stop the connection.
      }
      return;
    }
    this.#pending.delete(response.id as number);
    if (this.#pending.size === 0) this.#deadlines.idle();
    call.cleanup();
    if ("error" in response) call.reject(RpcError.fromObject(response.error));
    else call.resolve(response.result);
  }

  /**
   * Gives up on a call that is still waiting: tells the server (its request
   * was written), then forgets it. Nothing for a call already answered.
   */
  #abandon(id: number): void {
    if (!this.#pending.has(id)) return;
    if (this.#propagateDeadlines && !this.#isClosed) {
      // Before #forget: a draining connection closes with its last call.
      this.#writer.write(this.#codec.frame(this.#codec.message({
        jsonrpc: "2.0",
        method: CANCEL_METHOD,
        params: { id },
      }))).catch(() => {
        // A failed write ends the connection; the server sees it end.
      });
    }
    this.#forget(id);
  }

  #forget(id: number): void {
    const call = this.#pending.get(id);
    if (call === undefined) return;
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#deadlines.idle();
    call.cleanup();
    this.#closeIfDrained();
  }

  /** The server is shutting down: finish the calls under way, then close. */
  #goAway(): void {
    this.#draining = true;
    this.#closeIfDrained();
  }

  #closeIfDrained(): void {
    if (this.#draining && this.#pending.size === 0) {
      this.#shutdown("the server asked the client to go away");
    }
  }

  /**
   * The timeout of a call or batch about to be sent, or the error it fails
   * with at once: the connection is closed, the signal aborted, or no time
   * is left (`verb` says which: "call" or "send").
   */
  #timeoutOf(
    method: string,
    name: string | undefined,
    options: CallOptions,
    verb: "call" | "send",
  ): number | Error {
    if (this.isClosed) return this.#closedError(method);
    const { signal } = options;
    if (signal?.aborted) {
      return cancelledError(
        name ?? JSON.stringify(method),
        false,
        signal.reason,
      );
    }
    const timeoutMs = options.timeoutMs ?? this.#timeoutMs;
    if (typeof timeoutMs !== "number" || Number.isNaN(timeoutMs)) {
      return new RangeError(
        `timeoutMs must be a number of ms, got ${timeoutMs}`,
      );
    }
    if (timeoutMs <= 0) {
      return new RpcError(
        DEADLINE_EXCEEDED,
        `Deadline exceeded: no time left to ${verb} ${
          name ?? JSON.stringify(method)
        } (timeoutMs ${timeoutMs})`,
        { timeoutMs, written: false },
      );
    }
    return timeoutMs;
  }

  #closedError(method: string): ConnectionError {
    const state = this.#isClosed
      ? "is closed"
      : "is going away (its server is shutting down)";
    return new ConnectionError(
      `connection to ${this.url} ${state}; ${
        JSON.stringify(String(method))
      } was not sent${this.#unread === undefined ? "" : `: ${this.#unread}`}`,
      false,
    );
  }

  #shutdown(reason: string, cause?: unknown): void {
    if (this.#isClosed) return;
    this.#isClosed = true;
    const calls = [...this.#pending.values()];
    this.#pending.clear();
    this.#deadlines.clear();
    // A server that answered in NDJSON read no request of this CBOR
    // connection: none ran, so each is safe to send again (written false).
    // Nor did one whose request was still queued in the writer (the
    // connection ended in the tick it was made, or behind a write).
    const read = this.#unread === undefined;
    const handed = this.#writer.handedThrough;
    for (const call of calls) {
      call.cleanup();
      const written = read &&
        (call.batch === undefined || call.batch <= handed);
      call.reject(
        new ConnectionError(
          `connection to ${this.url} closed before ${
            written ? "the response to " : ""
          }${JSON.stringify(call.method)}${
            written ? "" : " was sent"
          }: ${reason}`,
          written,
          cause === undefined ? undefined : { cause },
        ),
      );
    }
    try {
      this.#stream.close();
    } catch {
      // Already closed.
    }
    this.#cancelled = this.#cancelRead();
  }
}

/** The method and params of a received notification, or null if `item` is none. */
function asNotification(
  item: unknown,
): { method: string; params: Params | undefined } | null {
  if (typeof item !== "object" || item === null || Array.isArray(item)) {
    return null;
  }
  const record = item as Record<string, unknown>;
  if (
    record.jsonrpc !== "2.0" || typeof record.method !== "string" ||
    "id" in record
  ) {
    return null;
  }
  const params = record.params;
  if (params !== undefined && (typeof params !== "object" || params === null)) {
    return null;
  }
  return { method: record.method, params: params as Params | undefined };
}

function encodeRequest(
  codec: FrameCodec,
  method: string,
  params: Params | undefined,
  id: number | undefined,
  timeoutMs?: number,
): Frame {
  return codec.frame(requestPart(codec, method, params, id, timeoutMs));
}

/**
 * Whether the first byte a CBOR connection received is JSON text's (`{` or
 * `[`: the server took the client for NDJSON and answered so) rather than
 * a frame's length: read as one, it would be at least `byte` × 2^24 bytes,
 * above `maxFrameBytes` (a larger limit keeps reading it as a length).
 */
function answersInJson(
  codec: FrameCodec,
  byte: number,
  maxFrameBytes: number,
): boolean {
  return codec.name === "cbor" && (byte === 0x7b || byte === 0x5b) &&
    byte * 2 ** 24 > maxFrameBytes;
}

/**
 * One request in the codec's form; throws TypeError or INVALID_PARAMS for
 * what cannot be sent.
 */
function requestPart(
  codec: FrameCodec,
  method: string,
  params: Params | undefined,
  id: number | undefined,
  timeoutMs?: number,
): unknown {
  if (typeof method !== "string") {
    throw new TypeError(`method must be a string, got ${typeof method}`);
  }
  if (params !== undefined && (typeof params !== "object" || params === null)) {
    throw new RpcError(
      INVALID_PARAMS,
      `Invalid params: the params of ${
        JSON.stringify(String(method))
      } must be an array or an object, got ${
        params === null ? "null" : typeof params
      }`,
    );
  }
  // Only the members that are there: undefined ones would cost CBOR a copy.
  const request: Record<string, unknown> = { jsonrpc: "2.0", method };
  if (params !== undefined) request.params = params;
  if (id !== undefined) request.id = id;
  if (timeoutMs !== undefined) request[TIMEOUT_MEMBER] = timeoutMs;
  try {
    return codec.message(request);
  } catch (error) {
    throw new RpcError(
      INVALID_PARAMS,
      `Invalid params: the params of ${
        JSON.stringify(String(method))
      } cannot be encoded as JSON: ${messageOf(error)}`,
    );
  }
}

function cancelledError(
  name: string,
  written: boolean,
  reason: unknown,
): RpcError {
  const error = new RpcError(
    CANCELLED,
    `Cancelled: the call to ${name} was aborted${
      written ? "" : " before it was sent"
    }`,
    { written },
  );
  if (reason !== undefined) error.cause = reason;
  return error;
}
