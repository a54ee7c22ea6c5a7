/**
 * JSON-RPC 2.0 message shapes and their validation
 * (https://www.jsonrpc.org/specification).
 *
 * @module
 */

import { type ErrorObject, INVALID_REQUEST, RpcError } from "./errors.ts";

/**
 * The notification a draining server sends each connection (like HTTP/2's
 * GOAWAY): send no new requests here; open a new connection or use another
 * server. Rafter's clients finish their calls under way, then close.
 */
export const GOAWAY_METHOD = "rpc.goaway";

/**
 * The notification a Rafter client sends when it gives up on a call whose
 * request it wrote (its deadline passed, or its `AbortSignal` aborted):
 * `{"jsonrpc":"2.0","method":"rpc.cancel","params":{"id":7}}`, with the id
 * of the abandoned request. A Rafter server aborts that call's
 * `CallContext.signal`; a plain JSON-RPC 2.0 server ignores it (an unknown
 * method in a notification gets no response).
 */
export const CANCEL_METHOD = "rpc.cancel";

/**
 * The member of a request in which a Rafter client says how long it will
 * wait for the response: the milliseconds left before its deadline, an
 * integer, e.g.
 * `{"jsonrpc":"2.0","method":"greet","params":["Ada"],"id":1,"timeoutMs":2931}`.
 * A Rafter extension of JSON-RPC 2.0: absent for calls without a deadline,
 * and ignored by plain servers (the specification defines no such member). A
 * Rafter server counts it from the moment it read the request.
 */
export const TIMEOUT_MEMBER = "timeoutMs";

/**
 * A request id: a string, a number, or null (JSON-RPC 2.0 §4). An integer
 * id beyond ±(2^53 − 1), which a double cannot hold, is a `bigint`: a
 * Rafter server reads such an id exactly (from the JSON text, or a CBOR
 * 64-bit integer) and echoes it unchanged, digit for digit.
 */
export type RequestId = string | number | bigint | null;

/** Structured parameters: by position (array) or by name (object). */
export type Params = unknown[] | Record<string, unknown>;

/** A request (has an `id`) or a notification (has no `id` member). */
export interface Request {
  /** Protocol version, always `"2.0"`. */
  jsonrpc: "2.0";
  /** Name of the method to call. */
  method: string;
  /** Positional or named params; absent when there are none. */
  params?: Params;
  /** Absent for a notification; present (possibly null) for a request. */
  id?: RequestId;
  /**
   * Rafter extension ({@link TIMEOUT_MEMBER}): ms the client will wait for
   * the response; absent when it has no deadline.
   */
  timeoutMs?: number;
}

/** A successful response. */
export interface SuccessResponse {
  /** Protocol version, always `"2.0"`. */
  jsonrpc: "2.0";
  /** The method's return value (`null` when it returned nothing). */
  result: unknown;
  /** The id of the request this answers. */
  id: RequestId;
}

/** An error response. `id` is null when the request's id could not be read. */
export interface ErrorResponse {
  /** Protocol version, always `"2.0"`. */
  jsonrpc: "2.0";
  /** What went wrong. */
  error: ErrorObject;
  /** The id of the request this answers, or null when it could not be read. */
  id: RequestId;
}

/** Either kind of response. */
export type Response = SuccessResponse | ErrorResponse;

/** Whether `value` is a valid request id (string, finite number, bigint or null). */
export function isRequestId(value: unknown): value is RequestId {
  return value === null || typeof value === "string" ||
    typeof value === "bigint" ||
    (typeof value === "number" && Number.isFinite(value));
}

/** Whether a validated request is a notification (no `id` member). */
export function isNotification(request: Request): boolean {
  return !("id" in request);
}

/**
 * Checks that `value` is a JSON-RPC 2.0 Request object.
 *
 * @returns the request, or an {@link RpcError} with code -32600 whose message
 * says which member is wrong. The caller answers such an error with the
 * request's id when that id is itself valid, else with null.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { validateRequest } from "./message.ts";
 * import { RpcError } from "./errors.ts";
 * const checked = validateRequest({ jsonrpc: "2.0", method: 1, id: 7 });
 * assert.ok(checked instanceof RpcError);
 * assert.equal(checked.code, -32600);
 * ```
 */
export function validateRequest(value: unknown): Request | RpcError {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return invalid("a request must be a JSON object");
  }
  const record = value as Record<string, unknown>;
  if (record.jsonrpc !== "2.0") {
    return invalid('"jsonrpc" must be exactly "2.0"');
  }
  if (typeof record.method !== "string") {
    return invalid('"method" must be a string');
  }
  if (
    "params" in record &&
    (typeof record.params !== "object" || record.params === null)
  ) {
    return invalid('"params" must be an array or an object when present');
  }
  if ("id" in record && !isRequestId(record.id)) {
    return invalid('"id" must be a string, a number or null when present');
  }
  return record as unknown as Request;
}

/**
 * Checks that `value` is a JSON-RPC 2.0 Response object.
 *
 * @returns the response, or null when it is not one.
 */
export function validateResponse(value: unknown): Response | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return null;
  }
  const record = value as Record<string, unknown>;
  if (
    record.jsonrpc !== "2.0" || !("id" in record) || !isRequestId(record.id)
  ) {
    return null;
  }
  const hasResult = "result" in record;
  const hasError = "error" in record;
  if (hasResult === hasError) return null;
  if (hasError) {
    const error = record.error as Record<string, unknown> | null;
    if (
      typeof error !== "object" || error === null ||
      typeof error.code !== "number" || typeof error.message !== "string"
    ) {
      return null;
    }
  }
  return record as unknown as Response;
}

/** Builds an error response. */
export function errorResponse(id: RequestId, error: RpcError): ErrorResponse {
  return { jsonrpc: "2.0", error: error.toJSON(), id };
}

function invalid(detail: string): RpcError {
  return new RpcError(INVALID_REQUEST, `Invalid Request: ${detail}`);
}
