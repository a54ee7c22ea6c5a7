/**
 * How a client of the registry cluster reads the errors of its calls, and
 * words its own when no node succeeded: shared by the stubs'
 * `RegistryClient` (`stub/registry_client/`) and the registry's own join
 * client (`registry/node/join_client.ts`), which sit in layers that may not
 * import each other. Not part of `@rafter/rpc/protocol`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RpcError } from "../rpc/errors.ts";
 * import { NOT_LEADER } from "./registry.ts";
 * import { leaderHint } from "./registry_failover.ts";
 * const hint = new RpcError(NOT_LEADER, "Not leader", {
 *   leaderUrl: "tcp://127.0.0.1:7002",
 * });
 * assert.equal(leaderHint(hint), "tcp://127.0.0.1:7002");
 * assert.equal(leaderHint(new Error("refused")), null);
 * ```
 *
 * @module
 */

import {
  ConnectionError,
  DEADLINE_EXCEEDED,
  RpcError,
  tlsFailureOf,
} from "../rpc/errors.ts";
import {
  NOT_LEADER,
  type NotLeaderData,
  UNAVAILABLE,
  type UnavailableData,
} from "./registry.ts";

/** The leader's client URL a NOT_LEADER answer names, else null. */
export function leaderHint(error: unknown): string | null {
  if (!(error instanceof RpcError) || error.code !== NOT_LEADER) return null;
  const data = error.data as Partial<NotLeaderData> | undefined;
  return typeof data?.leaderUrl === "string" ? data.leaderUrl : null;
}

/** Whether `error` is the client's own attempt timeout (not a node's answer). */
export function isLocalTimeout(error: unknown): boolean {
  return error instanceof RpcError && error.code === DEADLINE_EXCEEDED &&
    (error.data as { written?: unknown } | undefined)?.written !== undefined;
}

/**
 * What a node answered: not a dead node's refusal nor the client's own
 * timer. The final error quotes the last such answer, which says more.
 */
export function isNodeAnswer(error: unknown): error is RpcError {
  return error instanceof RpcError && !(error instanceof ConnectionError) &&
    !isLocalTimeout(error);
}

/**
 * Whether running `method` with `params` twice may do more than once:
 * `lease.grant` without an `id` (a second lease, which the caller never
 * hears of) and `registry.tokenCreate` (a second token). Every other
 * registry write converges when repeated: `registry.bind` with `grant`
 * moves the binding to the newest lease, and the other one expires.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { repeatsHarm } from "./registry_failover.ts";
 * assert.equal(repeatsHarm("lease.grant", { ttlMs: 5000 }), true);
 * assert.equal(repeatsHarm("lease.grant", { ttlMs: 5000, id: "l1" }), false);
 * assert.equal(repeatsHarm("registry.unbind", { name: "a", id: "a-1" }), false);
 * ```
 */
export function repeatsHarm(method: string, params: unknown): boolean {
  const named = typeof params === "object" && params !== null &&
      !Array.isArray(params)
    ? params as Record<string, unknown>
    : undefined;
  switch (method) {
    case "lease.grant":
      return named?.id === undefined;
    case "registry.tokenCreate":
      return true;
    default:
      return false;
  }
}

/**
 * Whether the write `error` ended may have been applied: UNAVAILABLE with
 * `data.applied: "unknown"`, a connection that failed after the request was
 * written, or this client's own timeout after sending.
 */
export function mayHaveApplied(error: unknown): boolean {
  if (!(error instanceof RpcError)) return false;
  if (error.code === UNAVAILABLE) {
    return (error.data as UnavailableData | undefined)?.applied === "unknown";
  }
  if (error instanceof ConnectionError) return error.written;
  return isLocalTimeout(error) &&
    (error.data as { written?: unknown }).written === true;
}

/**
 * UNAVAILABLE with `data.applied: "unknown"` for a write that must not be
 * sent again blindly (see {@link repeatsHarm}), quoting `error`.
 */
export function unknownOutcomeError(method: string, error: RpcError): RpcError {
  const data: UnavailableData = { retryAfterMs: 0, applied: "unknown" };
  return new RpcError(
    UNAVAILABLE,
    `Unavailable: ${method} may have been applied (${error.message}); it was not sent again, since a second one would not be the same (a second lease or token): check before retrying`,
    data,
  );
}

/** An answer the next node, or a later round, may not repeat. */
export function isRetryableAnswer(error: unknown): boolean {
  return error instanceof RpcError &&
    (error.code === UNAVAILABLE || error.code === DEADLINE_EXCEEDED ||
      error.code === NOT_LEADER);
}

/**
 * What to do when no registry node accepted a connection, by the last
 * error's cause: a registry whose TLS certificate this client does not
 * trust (or another TLS failure) is running, so "start a registry" would
 * point away from it; anything else (a refused connection) gets that hint.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { noRegistryHint } from "./registry_failover.ts";
 * const untrusted = Object.assign(new Error("TLS failed"), {
 *   tlsFailure: "untrusted",
 * });
 * assert.match(noRegistryHint(untrusted), /not trusted.*tls\.caFile/);
 * assert.match(noRegistryHint(new Error("Connection refused")), /Start a registry/);
 * ```
 */
export function noRegistryHint(lastError: unknown): string {
  switch (tlsFailureOf(lastError)) {
    case "untrusted":
      return "The registry node is up, but its TLS certificate is not trusted here: pass tls.caFile (or tls.ca) with the CA certificate that signed it";
    case "handshake":
      return "The registry node accepted the connection, but the TLS handshake failed (e.g. its certificate is not trusted here: give this client the CA that signed it)";
    case undefined:
      return "Start a registry (deno task registry) or check the registry URLs";
    default:
      return "The registry node is up, but TLS with it failed: see the last error";
  }
}

/**
 * UNAVAILABLE: no registry node even accepted a connection (or finished a
 * TLS handshake) for `method`; `data.tlsFailure` says why TLS failed,
 * when it did (see `tlsFailureOf`).
 */
export function noRegistryError(
  method: string,
  urls: readonly string[],
  lastError: unknown,
): RpcError {
  const reason = lastError instanceof Error
    ? `; last error: ${lastError.message}`
    : "";
  const tlsFailure = tlsFailureOf(lastError);
  const data: UnavailableData = {
    retryAfterMs: 1000,
    tried: [...urls],
    ...(tlsFailure === undefined ? {} : { tlsFailure }),
  };
  return new RpcError(
    UNAVAILABLE,
    `Unavailable: no registry node accepted a connection for ${method} (tried ${
      urls.join(", ")
    })${reason}. ${noRegistryHint(lastError)}`,
    data,
  );
}

/**
 * What a call ends with once its deadline passed without success:
 * DEADLINE_EXCEEDED quoting `reported` (the last answer, else the last
 * error) when it is an RpcError, else that error itself.
 */
export function noSuccessError(
  method: string,
  urls: readonly string[],
  reported: unknown,
): unknown {
  if (reported instanceof RpcError) {
    return new RpcError(
      DEADLINE_EXCEEDED,
      `Deadline exceeded: ${method} did not succeed on any registry node (${
        urls.join(", ")
      }); last error: ${reported.message}`,
      { lastError: reported.toJSON() },
    );
  }
  return reported ??
    new RpcError(DEADLINE_EXCEEDED, `Deadline exceeded: ${method}`);
}
