/**
 * How the CLI ends: its exit codes ({@link EXIT}), the {@link UsageError}
 * a bad command line raises, and how an error is printed for a person (with
 * a hint on what to try) or as one JSON line, with its exit code.
 *
 * @module
 */

import {
  CANCELLED,
  CONNECTION_FAILED,
  DEADLINE_EXCEEDED,
  PERMISSION_DENIED,
  type PermissionDeniedData,
  RpcError,
  saysUntrustedCertificate,
  UNAUTHENTICATED,
} from "../rpc/errors.ts";
import { tokenIdOf } from "../protocol/auth.ts";
import { AuthenticationError } from "../stub/authenticate.ts";
import { ServerError } from "../stub/call/call_errors.ts";
import type { DeadlineData } from "../stub/call/outcome.ts";
import {
  ID_IN_USE,
  type IdInUseData,
  LEASE_NOT_FOUND,
  NO_ENDPOINTS,
  NOT_LEADER,
  UNAVAILABLE,
  type UnavailableData,
} from "../protocol/registry.ts";
import type { Context, Out } from "./context.ts";
import { notASiblingLine, siblingRegistryFlag } from "./cluster_target.ts";

/** Exit codes of the CLI. */
export const EXIT = {
  /** The command did what it was asked. */
  ok: 0,
  /** The registry or the service answered with an error; `status`: degraded. */
  failed: 1,
  /** Bad command line (the usage is printed). */
  usage: 2,
  /** No registry node or server could be reached, or none answered in time. */
  unavailable: 3,
  /** Nothing found: no endpoint, no such lease or binding. */
  notFound: 4,
  /** No valid token: none given to a registry with access control, or one refused. */
  unauthenticated: 5,
  /** The token is valid but lacks the permission the command needs. */
  permissionDenied: 6,
  /** Stopped by Ctrl-C (SIGINT). */
  interrupted: 130,
} as const;

/** Raised for bad command lines: printed with the usage, exit 2. */
export class UsageError extends Error {}

/** What to do when no registry node answers. */
export const START_HINT =
  "Start a registry with: deno task registry (or deno task rafter registry), or point at yours with --registry tcp://host:port,... or RAFTER_REGISTRY.";

/** What to do when a TLS peer's certificate is not trusted. */
export const TLS_TRUST_HINT =
  "The registry (or server) serves TLS with a certificate this machine does not trust: pass --cacert FILE (or set RAFTER_CA) with the CA certificate that signed it (the ca.pem rafter cert ca made).";

/** What to do when a tcp:// URL may name a TLS port. */
export const TLS_SCHEME_HINT =
  "If the registry (or server) serves TLS, a tcp:// URL cannot reach it (it closes the connection at once): use tls://host:port URLs.";

/** What to do when a tls:// port closes the connection at once. */
export const TLS_CLIENT_CERT_HINT =
  "The registry closed the TLS connection at once: if it asks for client certificates (--tls-client-ca; an etcd front reachable from other hosts does), pass --cert FILE and --key FILE (or RAFTER_CERT and RAFTER_KEY) with a certificate of that CA (rafter cert …).";

/**
 * Whether `message` (a connection closed at once) may come from a
 * tls:// port that wants a client certificate this client did not give.
 */
export function mayWantClientCert(
  message: string,
  urls: readonly string[],
  cert: boolean,
): boolean {
  return !cert && urls.some((url) => url.startsWith("tls://")) &&
    /closed before the response|the peer closed the connection|connection reset/i
      .test(message);
}

/**
 * Whether `message` (a connection closed at once) may come from a
 * tcp:// URL pointed at a TLS port, given the URLs used.
 */
export function mayBeTlsPort(
  message: string,
  urls: readonly string[],
): boolean {
  return urls.some((url) => url.startsWith("tcp://")) &&
    /closed before the response|the peer closed the connection|connection reset/i
      .test(message);
}

/** Whether an error's text says a TLS certificate was not trusted. */
export const isTlsTrustProblem: (message: string) => boolean =
  saysUntrustedCertificate;

/**
 * Prints a bad command line's `message` with `usage` (or, under `--json`,
 * both as one JSON line) and returns {@link EXIT.usage}.
 */
export function usageFailure(
  message: string,
  usage: string,
  argv: string[],
  err: Out,
  name?: string,
): number {
  if (argv.includes("--json")) {
    err(JSON.stringify({ error: { message, usage: usage.split("\n")[0] } }));
  } else {
    err(`rafter${name === undefined ? "" : ` ${name}`}: ${message}\n${usage}`);
  }
  return EXIT.usage;
}

/** Prints `error` for a person (or as JSON) and returns its exit code. */
export function report(error: unknown, context: Context): number {
  const { globals, err } = context;
  const code = exitCodeOf(error);
  if (globals.json) {
    err(JSON.stringify({
      error: error instanceof RpcError
        ? error.toJSON()
        : { message: (error as Error)?.message ?? String(error) },
    }));
    return code;
  }
  const message = error instanceof AuthenticationError
    ? `the registry at ${error.url} refused the token from ${globals.tokenSource}${
      error.tokenId === null ? "" : ` (id ${error.tokenId})`
    }: ${(error.data as { answer: { message: string } }).answer.message}`
    : (error as Error)?.message ?? String(error);
  err(`rafter: ${message}${hintFor(error, context)}`);
  return code;
}

/**
 * The permission a command's registry calls need, for the hint of a
 * refused one (the registry checks the same: `caller.need` in
 * `registry/service/`): admin for membership, leadership, snapshots,
 * tokens and the auth switch; bind for writes under a name; else read.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { permissionOf } from "./errors.ts";
 * assert.equal(permissionOf("snapshot save"), "admin");
 * assert.equal(permissionOf("bind"), "bind:<prefix>");
 * assert.equal(permissionOf("lookup"), "read:<prefix>");
 * ```
 */
export function permissionOf(command: string): string {
  const group = command.split(" ")[0];
  if (
    ["member", "leader", "snapshot", "token", "auth"].includes(group) &&
    command !== "member list" && command !== "auth status"
  ) {
    return "admin";
  }
  if (["bind", "unbind", "drain", "lease"].includes(group)) {
    return "bind:<prefix>";
  }
  return "read:<prefix>";
}

/** What to do after UNAUTHENTICATED or PERMISSION_DENIED: a line to print. */
function accessHint(error: RpcError, context: Context): string {
  if (error instanceof ServerError) {
    // A service's server refused, not the registry.
    return error.code === UNAUTHENTICATED
      ? `\nThe server at ${error.endpoint} wants a token: set RAFTER_SERVER_TOKEN (or --server-token) to one it accepts (RAFTER_TOKEN is the registry's).`
      : `\nThe server at ${error.endpoint} refused the call for the token from RAFTER_SERVER_TOKEN: ask the service's owner for a token that may.`;
  }
  const { token, tokenSource } = context.globals;
  const id = token === undefined ? null : tokenIdOf(token);
  const which = `The token from ${tokenSource}${
    id === null ? "" : ` (id ${id})`
  }`;
  if (error.code === UNAUTHENTICATED) {
    const perm = permissionOf(context.command);
    return token === undefined
      ? `\nThe registry has access control on and this command gave no token: set RAFTER_TOKEN (or --token) to a token of it; ask an admin: rafter token create NAME --perm ${perm}.`
      : `\n${which} is unknown to the registry or revoked: set RAFTER_TOKEN to a valid one; ask an admin: rafter token create NAME --perm ${perm} (rafter token list shows the tokens).`;
  }
  const data = error.data as Partial<PermissionDeniedData> | undefined;
  const permission = typeof data?.permission === "string"
    ? data.permission
    : "the permission it needs";
  const on = typeof data?.name === "string" ? ` on "${data.name}"` : "";
  const perm = typeof data?.permission === "string"
    ? data.permission
    : "<permission>";
  return `\n${
    token === undefined ? "No token was given" : which
  } lacks ${permission}${on}: set RAFTER_TOKEN to a token with ${permission}, or ask an admin: rafter token create NAME --perm ${perm}.`;
}

/** The exit code an error from the registry or a server ends a command with. */
export function exitCodeOf(error: unknown): number {
  if (!(error instanceof RpcError)) return EXIT.failed;
  switch (error.code) {
    case UNAVAILABLE:
    case DEADLINE_EXCEEDED:
    case NOT_LEADER:
    case CONNECTION_FAILED:
      return EXIT.unavailable;
    case LEASE_NOT_FOUND:
    case NO_ENDPOINTS:
      return EXIT.notFound;
    case CANCELLED:
      return EXIT.interrupted;
    case UNAUTHENTICATED:
      return EXIT.unauthenticated;
    case PERMISSION_DENIED:
      return EXIT.permissionDenied;
    default:
      return EXIT.failed;
  }
}

/**
 * What to try next after `error`: lines to print after its message; for a
 * `NAME@CLUSTER` whose cluster is no sibling, a line saying so too (not
 * after a server's own answer: the name reached a server).
 */
function hintFor(error: unknown, context: Context): string {
  const hint = registryHint(error, context);
  const notSibling = context.cluster === undefined ||
      context.cluster === null || error instanceof ServerError
    ? null
    : notASiblingLine(
      context.cluster,
      context.cluster.kind === "misplaced"
        ? context.cluster.base
        : `${context.cluster.base}@${context.cluster.cluster}`,
      context.globals.registry,
    );
  return notSibling === null ? hint : `${hint}\n${notSibling}`;
}

/**
 * What to try next after `error`: a line to print after its message. The
 * registry it names is the sibling cluster's when the command's
 * `NAME@CLUSTER` reached one ({@link Context.cluster}): its URLs, as the
 * local registry named them, and how to ask it.
 */
function registryHint(error: unknown, context: Context): string {
  if (!(error instanceof RpcError)) return "";
  const { globals, command } = context;
  const sibling = context.cluster?.kind === "sibling" ? context.cluster : null;
  const chain = causeChain(error);
  if (isTlsTrustProblem(chain)) return `\n${TLS_TRUST_HINT}`;
  if (mayBeTlsPort(chain, sibling?.urls ?? globals.registry)) {
    return `\n${TLS_SCHEME_HINT}`;
  }
  if (
    mayWantClientCert(
      chain,
      sibling?.urls ?? globals.registry,
      globals.tls?.certFile !== undefined,
    )
  ) {
    return `\n${TLS_CLIENT_CERT_HINT}`;
  }
  if (error.code === UNAUTHENTICATED || error.code === PERMISSION_DENIED) {
    return accessHint(error, context);
  }
  const stale = command === "ls" || command === "lookup"
    ? " Without a quorum, --serializable answers from one node (possibly stale)."
    : "";
  // Whose registry failed: the sibling's (named by the local registry),
  // or the local one.
  const urls = sibling === null
    ? `Registry URLs: ${
      globals.registry.join(", ")
    } (from ${globals.registrySource})`
    : `Cluster ${sibling.cluster}'s registry URLs: ${
      sibling.urls.join(", ")
    } (the registry at ${
      globals.registry.join(", ")
    } names them for its sibling ${sibling.cluster})`;
  const statusCommand = sibling === null
    ? "rafter status shows which members answer"
    : `rafter status --registry ${
      siblingRegistryFlag(sibling)
    } shows which of cluster ${sibling.cluster}'s members answer`;
  if (error.code === UNAVAILABLE) {
    const applied = (error.data as UnavailableData | undefined)?.applied;
    if (applied === "unknown") {
      return `\nThe write may have been applied: check (rafter lookup, rafter lease ls) before running it again.`;
    }
    if (applied === false) {
      return `\nThe write was not applied: running it again is safe once the registry has a leader (rafter status).`;
    }
    const tried = (error.data as UnavailableData | undefined)?.tried;
    if (sibling !== null) {
      return tried === undefined
        ? `\nCluster ${sibling.cluster}'s registry has no quorum now; ${statusCommand}.${stale}\n${urls}.`
        : `\n${urls}; ${statusCommand}.`;
    }
    return tried === undefined
      ? `\nThe registry has no quorum now; ${statusCommand}.${stale}`
      : `\n${urls}.`;
  }
  if (error.code === ID_IN_USE) {
    const data = error.data as Partial<IdInUseData> | undefined;
    if (typeof data?.leaseId === "string") {
      return `\nrafter lookup ${data.name} shows the holder; bind with another --id, or free the id at once with rafter lease revoke ${data.leaseId} (it unbinds the other server).`;
    }
    return "";
  }
  if (error.code === DEADLINE_EXCEEDED) {
    // A service's server did not answer (stub calls say which): not the
    // registry's fault.
    const data = error.data as Partial<DeadlineData> | undefined;
    if (
      data?.waitingFor === "endpoint" ||
      (data?.waitingFor === "nothing" && (data.endpoints ?? []).length > 0)
    ) {
      const named = (data.endpoints ?? []).map((e) =>
        `Endpoint ${e.id} at ${e.url}`
      ).join(" and ");
      return `\n${
        named === "" ? "The server" : named
      } did not answer in time: check that its server runs and is not stopped (SIGSTOP) or overloaded; --timeout-ms N allows more time (now ${globals.timeoutMs} ms).`;
    }
    return `\n${urls}. ${statusCommand}; --timeout-ms N allows more time (now ${globals.timeoutMs} ms).${stale}`;
  }
  return "";
}

/** The messages of `error` and its causes, joined. */
function causeChain(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    parts.push(current.message);
    current = current.cause;
  }
  return parts.join(" | ");
}
