/**
 * Error codes and error classes of the RPC layer.
 *
 * Codes -32700 and -32600..-32603 are those of the JSON-RPC 2.0
 * specification (https://www.jsonrpc.org/specification#error_object).
 * Rafter's own errors use the server-error range -32000..-32099 and carry a
 * `data` object that says what to do next. The registry's codes
 * (NOT_LEADER, NO_ENDPOINTS, UNAVAILABLE, LEASE_NOT_FOUND, COMPACTED…) are
 * part of its contract, in `protocol/registry.ts`.
 *
 * @module
 */

/** Invalid JSON was received: the frame could not be parsed (JSON-RPC 2.0). */
export const PARSE_ERROR: -32700 = -32700;
/** The JSON sent is not a valid Request object (JSON-RPC 2.0). */
export const INVALID_REQUEST: -32600 = -32600;
/** The method does not exist or is not available (JSON-RPC 2.0). */
export const METHOD_NOT_FOUND: -32601 = -32601;
/** Invalid method parameters (JSON-RPC 2.0). */
export const INVALID_PARAMS: -32602 = -32602;
/** Internal JSON-RPC error: the method threw (JSON-RPC 2.0). */
export const INTERNAL_ERROR: -32603 = -32603;

/** The call's deadline passed before a response arrived (Rafter). */
export const DEADLINE_EXCEEDED: -32003 = -32003;
/** The connection closed or could not be opened (Rafter, client side only). */
export const CONNECTION_FAILED: -32004 = -32004;
/** The caller aborted the call through its `AbortSignal` (Rafter). */
export const CANCELLED: -32005 = -32005;
/**
 * The call needs a credential and the connection has presented none, or
 * one that is not valid (unknown, revoked): authenticate first (Rafter).
 * The registry's `registry.authenticate` and a server's `rpc.authenticate`
 * take a bearer token.
 */
export const UNAUTHENTICATED: -32012 = -32012;
/**
 * The connection's credential is valid but lacks the permission the call
 * needs; `data` names the permission and, where there is one, the name
 * (Rafter).
 */
export const PERMISSION_DENIED: -32013 = -32013;
/**
 * A limit of the server was reached (connections, watches, bindings per
 * lease, a frame or handshake deadline); `data` names the limit and its
 * value (Rafter).
 */
export const LIMIT_EXCEEDED: -32014 = -32014;

/** `data` of {@link PERMISSION_DENIED}. */
export interface PermissionDeniedData {
  /** The method refused. */
  method: string;
  /** The permission it needs, e.g. `"bind:billing.pay"` or `"admin"`. */
  permission: string;
  /** The name the permission was needed on, when there is one. */
  name?: string;
}

/** `data` of {@link LIMIT_EXCEEDED}. */
export interface LimitExceededData {
  /** The option that sets the limit, e.g. `"maxConnectionsPerAddress"`. */
  limit: string;
  /** Its value. */
  value: number;
}

/** The `message` the JSON-RPC 2.0 specification gives each of its codes. */
export const STANDARD_MESSAGES: Readonly<Record<number, string>> = {
  [PARSE_ERROR]: "Parse error",
  [INVALID_REQUEST]: "Invalid Request",
  [METHOD_NOT_FOUND]: "Method not found",
  [INVALID_PARAMS]: "Invalid params",
  [INTERNAL_ERROR]: "Internal error",
};

/** The JSON shape of a JSON-RPC 2.0 error object. */
export interface ErrorObject {
  /** Integer error code; see the constants of this module. */
  code: number;
  /** One-sentence description of what went wrong and what to do. */
  message: string;
  /** Optional structured detail (e.g. the leader's URL of a registry NOT_LEADER error). */
  data?: unknown;
}

/**
 * An error carried by a JSON-RPC error response, or raised by a method to
 * produce one. A method that throws an `RpcError` sends exactly its code,
 * message and data; any other thrown value becomes {@link INTERNAL_ERROR}.
 *
 * @example Refuse bad params from a method
 * ```ts
 * import assert from "node:assert/strict";
 * import { INVALID_PARAMS, RpcError } from "./errors.ts";
 * function greet(name: unknown): string {
 *   if (typeof name !== "string") {
 *     throw new RpcError(INVALID_PARAMS, "Invalid params: name must be a string");
 *   }
 *   return `Hello, ${name}!`;
 * }
 * assert.throws(() => greet(42), { code: -32602 });
 * ```
 */
export class RpcError extends Error {
  /** Integer JSON-RPC error code. */
  readonly code: number;
  /** Optional structured detail sent as the error object's `data`. */
  readonly data?: unknown;

  /**
   * Makes an error to throw from a method or to reject a call with.
   *
   * @param code JSON-RPC error code (see this module's constants).
   * @param message What went wrong and what to do about it.
   * @param data Optional JSON value sent as the error object's `data`.
   */
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = "RpcError";
    this.code = code;
    if (data !== undefined) this.data = data;
  }

  /** The error object to put in a response. */
  toJSON(): ErrorObject {
    const object: ErrorObject = { code: this.code, message: this.message };
    if (this.data !== undefined) object.data = this.data;
    return object;
  }

  /** Rebuilds an `RpcError` from an error object received on the wire. */
  static fromObject(object: ErrorObject): RpcError {
    return new RpcError(object.code, object.message, object.data);
  }
}

/**
 * A call failed because its connection could not be opened or closed while
 * the call was outstanding. `written` tells whether the request bytes were
 * handed to the transport: when `false` the server cannot have seen the call
 * and it is always safe to retry it elsewhere; when `true` it may have run.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ConnectionError } from "./errors.ts";
 * const error = new ConnectionError("connect refused", false);
 * assert.equal(error.code, -32004);
 * assert.equal(error.written, false);
 * ```
 */
export class ConnectionError extends RpcError {
  /** Whether the request may have reached the server. */
  readonly written: boolean;

  /**
   * Makes a connection failure; its code is {@link CONNECTION_FAILED} and its
   * `data` is `{ written }`.
   *
   * @param message What failed (e.g. "connection to tcp://127.0.0.1:7001 refused").
   * @param written Whether the request bytes were handed to the transport.
   * @param options.cause The underlying error, if any.
   */
  constructor(
    message: string,
    written: boolean,
    options?: { cause?: unknown },
  ) {
    super(CONNECTION_FAILED, message, { written });
    this.name = "ConnectionError";
    this.written = written;
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

/**
 * The message of a thrown value, for error texts: an `Error`'s message, or
 * the value as a string ("unknown error" when even that fails).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { messageOf } from "./errors.ts";
 * assert.equal(messageOf(new Error("refused")), "refused");
 * assert.equal(messageOf(42), "42");
 * ```
 */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  try {
    return String(error);
  } catch {
    return "unknown error";
  }
}

/**
 * Why a TLS connection failed, as the dialers tag their errors (property
 * `tlsFailure`): `"untrusted"` (the server's certificate does not chain to
 * a CA this client trusts), `"nameMismatch"` (not valid for the host
 * dialed), `"expired"` (expired or not yet valid), `"clientCertificate"`
 * (the server wants, or refused, our client certificate), `"handshake"`
 * (the TCP connection was accepted, then the handshake failed for a reason
 * the runtime does not say: workerd's `connect()`, whose log says why).
 */
export type TlsFailure =
  | "untrusted"
  | "nameMismatch"
  | "expired"
  | "clientCertificate"
  | "handshake";

const TLS_FAILURES: ReadonlySet<string> = new Set<TlsFailure>([
  "untrusted",
  "nameMismatch",
  "expired",
  "clientCertificate",
  "handshake",
]);

/** Texts of an untrusted certificate, for errors no dialer tagged. */
const UNTRUSTED_TEXT =
  /UnknownIssuer|UnknownCA|unable to (get|verify) (local issuer|the first) certificate|self[- ]signed certificate|certificate (is not|not) trusted|UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_UNTRUSTED/i;

/**
 * Whether `text` (an error's message, or its chain's) says a TLS
 * certificate was not trusted: the text test {@link tlsFailureOf} falls
 * back to for untagged errors (not re-exported by the entries).
 */
export function saysUntrustedCertificate(text: string): boolean {
  return UNTRUSTED_TEXT.test(text);
}

/**
 * Why `error` (or an error it wraps, through `cause`, or the
 * `tlsFailure` of an RpcError's `data`) is a failed TLS connection, else
 * undefined: the `tlsFailure` the dialers tag their errors with, else
 * `"untrusted"` for the texts of an untrusted certificate
 * (`UnknownIssuer`, `self-signed certificate`…) in an untagged message.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ConnectionError, tlsFailureOf } from "./errors.ts";
 * const tls = Object.assign(new Error("TLS to tls://h:7001 failed"), {
 *   tlsFailure: "untrusted",
 * });
 * const wrapped = new ConnectionError("cannot connect", false, { cause: tls });
 * assert.equal(tlsFailureOf(wrapped), "untrusted");
 * assert.equal(
 *   tlsFailureOf(new Error("invalid peer certificate: UnknownIssuer")),
 *   "untrusted",
 * );
 * assert.equal(tlsFailureOf(new Error("Connection refused")), undefined);
 * ```
 */
export function tlsFailureOf(error: unknown): TlsFailure | undefined {
  let current = error;
  for (let depth = 0; depth < 8 && current !== undefined; depth++) {
    if (typeof current !== "object" || current === null) break;
    const tagged = (current as { tlsFailure?: unknown }).tlsFailure ??
      (current instanceof RpcError
        ? (current.data as { tlsFailure?: unknown } | undefined)?.tlsFailure
        : undefined);
    if (typeof tagged === "string" && TLS_FAILURES.has(tagged)) {
      return tagged as TlsFailure;
    }
    current = (current as { cause?: unknown }).cause;
  }
  let text = "";
  current = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    text += ` ${current.message}`;
    current = current.cause;
  }
  return saysUntrustedCertificate(text) ? "untrusted" : undefined;
}
