/**
 * Validation of the registry API's params: each parser takes what arrived
 * on the wire and returns typed, normalized values, or throws a -32602
 * (INVALID_PARAMS) error whose message names the field and says what is
 * expected. Nothing is proposed to Raft before its params pass.
 *
 * @module
 */

import { INVALID_PARAMS, RpcError } from "../rpc/errors.ts";
import {
  formatTcpUrl,
  isWildcardHost,
  parseTcpUrl,
} from "../rpc/transport/transport.ts";
import {
  type Attributes,
  baseNameProblem,
  checkAttributes,
  type Consistency,
  DEFAULT_HEALTH_CHECK,
  type HealthCheck,
  mergeAttributes,
  parseName,
  type Scope,
} from "../protocol/registry.ts";
import { type EndpointRecord, MAX_TTL_MS } from "./state.ts";

/** Longest zone name, in characters. */
export const MAX_ZONE_LENGTH = 64;
/** Largest endpoint weight. */
export const MAX_WEIGHT = 1_000_000;
/** Shortest and longest health check interval, ms. */
export const CHECK_INTERVAL_RANGE_MS: readonly [number, number] = [
  100,
  3_600_000,
];

const LEASE_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** The -32602 error for a bad field. */
export function invalid(message: string): RpcError {
  return new RpcError(INVALID_PARAMS, `Invalid params: ${message}`);
}

/**
 * Named params as an object, or positional params mapped to names in order.
 *
 * @throws {RpcError} -32602 naming `method` and its params shape.
 */
export function paramsObject(
  args: unknown[],
  method: string,
  shape: string,
  positional: readonly string[] = [],
): Record<string, unknown> {
  const [first] = args;
  if (args.length === 0 && positional.length === 0) return {};
  if (
    args.length === 1 && typeof first === "object" && first !== null &&
    !Array.isArray(first)
  ) {
    return first as Record<string, unknown>;
  }
  if (positional.length > 0 && typeof first === "string") {
    const named: Record<string, unknown> = {};
    positional.forEach((key, i) => {
      if (args[i] !== undefined) named[key] = args[i];
    });
    return named;
  }
  throw invalid(`${method} takes ${shape}`);
}

/** A name that may carry a query: its base and attributes. */
export function requireName(
  value: unknown,
  field = "name",
): { base: string; query: Attributes } {
  try {
    return parseName(value, field);
  } catch (error) {
    throw invalid((error as Error).message);
  }
}

/** A plain base name or id (no query). */
export function requireBase(value: unknown, field: string): string {
  const problem = baseNameProblem(value, field);
  if (problem !== null) throw invalid(problem);
  return value as string;
}

/** A lease id: 1..64 characters of `A-Z a-z 0-9 _ -`. */
export function requireLeaseId(value: unknown, field = "id"): string {
  if (typeof value !== "string" || !LEASE_ID.test(value)) {
    throw invalid(
      `"${field}" must be a lease id: 1..64 characters of A-Z a-z 0-9 _ -`,
    );
  }
  return value;
}

/** An optional lease id. */
export function optionalLeaseId(
  value: unknown,
  field: string,
): string | undefined {
  return value === undefined ? undefined : requireLeaseId(value, field);
}

/**
 * A TTL in ms, at least `minTtlMs` (1.5 × the election timeout).
 *
 * @throws {RpcError} -32602 saying the allowed range and why.
 */
export function requireTtl(
  value: unknown,
  field: string,
  minTtlMs: number,
): number {
  if (!Number.isSafeInteger(value)) {
    throw invalid(`"${field}" must be an integer number of ms`);
  }
  const ttl = value as number;
  if (ttl < minTtlMs) {
    throw invalid(
      `"${field}" is ${ttl} ms; it must be at least ${minTtlMs} ms (1.5 × this registry's election timeout), or a leader change could expire a lease that is kept alive`,
    );
  }
  if (ttl > MAX_TTL_MS) {
    throw invalid(`"${field}" is ${ttl} ms; at most ${MAX_TTL_MS} ms allowed`);
  }
  return ttl;
}

/**
 * An endpoint URL: `tcp://host:port` (a bare `host:port` is taken as tcp),
 * no path, query or fragment, no wildcard host; returned in one spelling.
 */
export function requireEndpointUrl(value: unknown, field: string): string {
  if (typeof value !== "string") {
    throw invalid(`"${field}" must be a string like tcp://127.0.0.1:9001`);
  }
  let address;
  try {
    address = parseTcpUrl(value);
  } catch (error) {
    const hint = /no path, query/.test((error as Error).message)
      ? ' (attributes go in the name, "name?key=value", or in "endpoint.attrs")'
      : "";
    throw invalid(`"${field}": ${(error as Error).message}${hint}`);
  }
  if (isWildcardHost(address.hostname)) {
    throw invalid(
      `"${field}" ${
        JSON.stringify(value)
      } names a wildcard address, which no client can dial; bind the server's reachable address (serve({ advertise }) or --advertise)`,
    );
  }
  // One spelling per address (tcp://host:port), so the same server bound
  // as "127.0.0.1:9001" and "tcp://127.0.0.1:9001" is one endpoint.
  return formatTcpUrl(address);
}

/** A health check spec, with defaults filled in. */
export function requireCheck(value: unknown, field: string): HealthCheck {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalid(
      `"${field}" must be { kind: "tcp" | "ping", intervalMs?, timeoutMs?, failuresBeforeUnhealthy? }`,
    );
  }
  const check = value as Record<string, unknown>;
  if (check.kind !== "tcp" && check.kind !== "ping") {
    throw invalid(`"${field}.kind" must be "tcp" or "ping"`);
  }
  const intervalMs = integer(
    check.intervalMs,
    `${field}.intervalMs`,
    DEFAULT_HEALTH_CHECK.intervalMs,
    CHECK_INTERVAL_RANGE_MS[0],
    CHECK_INTERVAL_RANGE_MS[1],
  );
  const timeoutMs = integer(
    check.timeoutMs,
    `${field}.timeoutMs`,
    Math.min(DEFAULT_HEALTH_CHECK.timeoutMs, intervalMs - 1),
    10,
    intervalMs - 1,
  );
  const failuresBeforeUnhealthy = integer(
    check.failuresBeforeUnhealthy,
    `${field}.failuresBeforeUnhealthy`,
    DEFAULT_HEALTH_CHECK.failuresBeforeUnhealthy,
    1,
    100,
  );
  return { kind: check.kind, intervalMs, timeoutMs, failuresBeforeUnhealthy };
}

/**
 * The endpoint of a bind: validated, with the name's query attributes
 * merged into `attrs`.
 */
export function requireEndpoint(
  value: unknown,
  nameAttributes: Attributes,
): EndpointRecord {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalid(
      '"endpoint" must be { url, id?, attrs?, weight?, zone?, check? }',
    );
  }
  const endpoint = value as Record<string, unknown>;
  const url = requireEndpointUrl(endpoint.url, "endpoint.url");
  const id = endpoint.id === undefined
    ? url
    : requireBase(endpoint.id, "endpoint.id");
  let attrs: Attributes;
  try {
    const given = endpoint.attrs === undefined
      ? {}
      : checkAttributes(endpoint.attrs, "endpoint.attrs");
    attrs = mergeAttributes(nameAttributes, given);
  } catch (error) {
    throw invalid((error as Error).message);
  }
  const weight = integer(endpoint.weight, "endpoint.weight", 1, 1, MAX_WEIGHT);
  let zone: string | null = null;
  if (endpoint.zone !== undefined && endpoint.zone !== null) {
    if (
      typeof endpoint.zone !== "string" || endpoint.zone.length === 0 ||
      endpoint.zone.length > MAX_ZONE_LENGTH
    ) {
      throw invalid(
        `"endpoint.zone" must be a string of 1..${MAX_ZONE_LENGTH} characters, or null`,
      );
    }
    zone = endpoint.zone;
  }
  const record: EndpointRecord = { id, url, attrs, weight, zone };
  if (endpoint.check !== undefined && endpoint.check !== null) {
    record.check = requireCheck(endpoint.check, "endpoint.check");
  }
  return record;
}

/** `consistency`, default linearizable. */
export function requireConsistency(value: unknown): Consistency {
  if (value === undefined) return "linearizable";
  if (value === "linearizable" || value === "serializable") return value;
  throw invalid('"consistency" must be "linearizable" or "serializable"');
}

/** `scope`, default global. */
export function requireScope(value: unknown): Scope {
  if (value === undefined) return "global";
  if (value === "global" || value === "local") return value;
  throw invalid('"scope" must be "global" or "local"');
}

/** An optional boolean flag. */
export function optionalBoolean(
  value: unknown,
  field: string,
  fallback: boolean,
): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw invalid(`"${field}" must be a boolean`);
  return value;
}

/**
 * A name prefix ("" for every name): the start of a base name, so at most
 * 256 characters, with no whitespace, control characters, `?` or `#` (a
 * query has no place in a prefix: no name could ever match it).
 */
export function requirePrefix(value: unknown, field: string): string {
  if (value === undefined || value === "") return "";
  if (typeof value !== "string" || value.length > 256) {
    throw invalid(`"${field}" must be a string of at most 256 characters`);
  }
  if (baseNameProblem(value, field) !== null) {
    throw invalid(
      `"${field}" ${
        JSON.stringify(value)
      } may not contain whitespace, control characters, "?" or "#": it is the start of a name, and no name has a query (attributes are matched by lookups)`,
    );
  }
  return value;
}

/** An optional count limit: an integer >= 1 (undefined: no limit). */
export function optionalLimit(
  value: unknown,
  field: string,
): number | undefined {
  return optionalPositiveInteger(
    value,
    `"${field}" must be an integer >= 1 (leave it out for every endpoint)`,
  );
}

/** An optional revision: an integer >= 1. */
export function optionalRevision(
  value: unknown,
  field: string,
): number | undefined {
  return optionalPositiveInteger(
    value,
    `"${field}" must be a revision: an integer >= 1`,
  );
}

/** An optional integer >= 1; -32602 with `message` otherwise. */
function optionalPositiveInteger(
  value: unknown,
  message: string,
): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isSafeInteger(value) || (value as number) < 1) {
    throw invalid(message);
  }
  return value as number;
}

/** A reported load: a finite number. */
export function optionalLoad(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw invalid('"load" must be a finite number');
  }
  return value;
}

function integer(
  value: unknown,
  field: string,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined) return fallback;
  if (
    !Number.isSafeInteger(value) || (value as number) < min ||
    (value as number) > max
  ) {
    throw invalid(`"${field}" must be an integer in ${min}..${max}`);
  }
  return value as number;
}
