/**
 * The errors a cluster stub's call ends with, typed by what may have
 * happened on the servers, so a caller knows whether it may retry a call
 * that is not idempotent:
 *
 * - {@link NotSentError}: no server can have run the call (the request
 *   never left this client: connections refused, nothing bound, the
 *   deadline passed or the caller aborted before it was sent);
 * - {@link AmbiguousError}: the request was sent and no answer came (the
 *   connection broke, or the attempt or the call timed out): it may have
 *   run, on `endpoint`;
 * - {@link ServerError}: the server answered with an error response (its
 *   code, message and data, unchanged).
 *
 * All three are {@link RpcError}s with the underlying JSON-RPC code.
 *
 * @module
 */

import { CONNECTION_FAILED, RpcError } from "../../rpc/errors.ts";

/** Where a call went wrong, for the typed errors. */
export interface CallErrorDetail {
  /** JSON-RPC code of the underlying failure. @default CONNECTION_FAILED (-32004) */
  code?: number;
  /** The endpoint's URL, or null when none was chosen. */
  endpoint: string | null;
  /** The underlying error. */
  cause?: unknown;
  /** More fields for the error's `data` (e.g. `{ name }`). */
  data?: Record<string, unknown>;
}

/**
 * The call never reached a server: it is always safe to make it again.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { NotSentError } from "./call_errors.ts";
 * const error = new NotSentError("connection refused", { endpoint: "tcp://127.0.0.1:9001" });
 * assert.equal(error.code, -32004);
 * assert.equal(error.written, false);
 * assert.equal(error.endpoint, "tcp://127.0.0.1:9001");
 * ```
 */
export class NotSentError extends RpcError {
  /** Always false: no request bytes left this client for a server that could run them. */
  readonly written = false;
  /** The endpoint it was for, or null. */
  readonly endpoint: string | null;

  /**
   * Makes the error; `data` is `{ written: false, endpoint }` (and
   * `detail.data`).
   *
   * @param message what happened and what to do.
   * @param detail code, endpoint and cause.
   */
  constructor(message: string, detail: CallErrorDetail) {
    super(detail.code ?? CONNECTION_FAILED, message, {
      ...detail.data,
      written: false,
      endpoint: detail.endpoint,
    });
    this.name = "NotSentError";
    this.endpoint = detail.endpoint;
    if (detail.cause !== undefined) this.cause = detail.cause;
  }
}

/**
 * The call was sent to `endpoint` and no answer came: it may have run
 * there. Retried by a stub only for idempotent methods.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { AmbiguousError } from "./call_errors.ts";
 * const error = new AmbiguousError("connection reset", { endpoint: "tcp://127.0.0.1:9001" });
 * assert.equal(error.written, true);
 * assert.equal(error.endpoint, "tcp://127.0.0.1:9001");
 * ```
 */
export class AmbiguousError extends RpcError {
  /** Always true: the request was handed to the transport. */
  readonly written = true;
  /** The endpoint that may have run it. */
  readonly endpoint: string;

  /**
   * Makes the error; `data` is `{ written: true, endpoint }` (and
   * `detail.data`).
   *
   * @param message what happened and what to do.
   * @param detail code, endpoint (required) and cause.
   */
  constructor(message: string, detail: CallErrorDetail & { endpoint: string }) {
    super(detail.code ?? CONNECTION_FAILED, message, {
      ...detail.data,
      written: true,
      endpoint: detail.endpoint,
    });
    this.name = "AmbiguousError";
    this.endpoint = detail.endpoint;
    if (detail.cause !== undefined) this.cause = detail.cause;
  }
}

/**
 * The server at `endpoint` answered with an error response: its code,
 * message and data, as it sent them.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ServerError } from "./call_errors.ts";
 * const error = new ServerError(-32602, "Invalid params: name", undefined, "tcp://127.0.0.1:9001");
 * assert.equal(error.code, -32602);
 * assert.equal(error.message, "Invalid params: name");
 * assert.equal(error.endpoint, "tcp://127.0.0.1:9001");
 * ```
 */
export class ServerError extends RpcError {
  /** The endpoint that answered. */
  readonly endpoint: string;

  /**
   * Makes the error from a server's error object.
   *
   * @param code the server's code.
   * @param message the server's message.
   * @param data the server's data, if any.
   * @param endpoint the URL of the server that answered.
   */
  constructor(code: number, message: string, data: unknown, endpoint: string) {
    super(code, message, data);
    this.name = "ServerError";
    this.endpoint = endpoint;
  }
}
