/**
 * The params of every registry method, declared once: each method's fields
 * in checking order, each field with the parser that reads it from the
 * wire (normalized, defaults filled in) or refuses it with a message that
 * names the field and says what is expected. The params types of the
 * contract (`BindParams`… in `registry.ts`) are checked against these
 * declarations by the compiler (`params<BindParams>()(…)` wants exactly
 * one field per key, optional exactly when the key is); the registry
 * service validates each call with them (`method(REGISTRY_PARAMS[m],
 * handler)`), refusing unknown params too.
 *
 * Web-standard and dependency-free, as `registry.ts`.
 *
 * @module
 */

import {
  formatTcpUrl,
  isWildcardHost,
  parseTcpUrl,
} from "../rpc/transport/transport.ts";
import {
  optional,
  type OutputOf,
  params,
  ParamsError,
  required,
} from "./_schema.ts";
import {
  type Attributes,
  baseNameProblem,
  type BindParams,
  checkAttributes,
  type Consistency,
  DEFAULT_HEALTH_CHECK,
  type EndpointSpec,
  type HealthCheck,
  type LeaderTransferParams,
  type LeaseGrantParams,
  type LeaseIdParams,
  type LeaseKeepAliveParams,
  type ListParams,
  type LookupParams,
  MAX_NAME_LENGTH,
  type MemberAddParams,
  type MemberIdParams,
  mergeAttributes,
  type ParsedName,
  parseName,
  REGISTRY_METHODS,
  type Scope,
  type SetStateParams,
  type SnapshotChunkParams,
  type UnbindParams,
  type UnwatchParams,
  type WatchParams,
} from "./registry.ts";
import {
  AUTH_METHODS,
  type AuthenticateParams,
  MAX_TOKEN_NAME_LENGTH,
  normalizePermission,
  type Permission,
  type TokenCreateParams,
  type TokenIdParams,
} from "./auth.ts";

/** Longest zone name, in characters. */
export const MAX_ZONE_LENGTH = 64;
/** Largest endpoint weight. */
export const MAX_WEIGHT = 1_000_000;
/** Largest lease TTL, ms (about 24.8 days: the longest timer). */
export const MAX_TTL_MS = 2_147_483_647;
/** Shortest and longest health check interval, ms. */
export const CHECK_INTERVAL_RANGE_MS: readonly [number, number] = [
  100,
  3_600_000,
];
/** Largest `timeoutMs` of a leader transfer, ms. */
export const MAX_TRANSFER_TIMEOUT_MS = 60_000;

/** A lease id: 1..64 characters of `A-Z a-z 0-9 _ -`. */
export const LEASE_ID: RegExp = /^[A-Za-z0-9_-]{1,64}$/;

/** The states `registry.setState` sets (a health check sets `unhealthy`). */
export const SETTABLE_STATES: readonly ("serving" | "draining")[] = [
  "serving",
  "draining",
];
/** The kinds of health check. */
export const CHECK_KINDS: readonly HealthCheck["kind"][] = ["tcp", "ping"];

/** An endpoint as a bind reads it: validated, the name's attributes merged. */
export interface ParsedEndpoint {
  /** Instance id (the URL when not given). */
  id: string;
  /** `tcp://host:port`, in one spelling. */
  url: string;
  /** The name's query attributes merged with `attrs`. */
  attrs: Attributes;
  /** Relative share of calls. */
  weight: number;
  /** Failure zone, or null. */
  zone: string | null;
  /** The health check, defaults filled in, when one was asked for. */
  check?: HealthCheck;
}

// --- field parsers -----------------------------------------------------------

/** Runs `read`, turning the error of a shared checker (a TypeError) into a refusal. */
function refusing<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (!(error instanceof Error)) throw error;
    throw new ParamsError(error.message);
  }
}

/** A name that may carry a query: its base and attributes. */
function nameWithQuery(value: unknown): ParsedName {
  return refusing(() => parseName(value, "name"));
}

/** A plain base name or id (no query). */
export function requireBase(value: unknown, field: string): string {
  const problem = baseNameProblem(value, field);
  if (problem !== null) throw new ParamsError(problem);
  return value as string;
}

/** A lease id: 1..64 characters of `A-Z a-z 0-9 _ -`. */
export function requireLeaseId(value: unknown, field = "id"): string {
  if (typeof value !== "string" || !LEASE_ID.test(value)) {
    throw new ParamsError(
      `"${field}" must be a lease id: 1..64 characters of A-Z a-z 0-9 _ -`,
    );
  }
  return value;
}

function optionalLeaseId(value: unknown): string | undefined {
  return value === undefined ? undefined : requireLeaseId(value, "leaseId");
}

/**
 * A TTL in ms: an integer up to {@link MAX_TTL_MS}. Its lower bound is the
 * registry's ({@link minTtlProblem}).
 */
function ttl(value: unknown, field: string): number {
  if (!Number.isSafeInteger(value)) {
    throw new ParamsError(`"${field}" must be an integer number of ms`);
  }
  if ((value as number) > MAX_TTL_MS) {
    throw new ParamsError(
      `"${field}" is ${value} ms; at most ${MAX_TTL_MS} ms allowed`,
    );
  }
  return value as number;
}

/**
 * Why a TTL is too short for a registry whose smallest is `minTtlMs` (1.5 ×
 * its election timeout), or null.
 */
export function minTtlProblem(
  ttlMs: number,
  field: string,
  minTtlMs: number,
): string | null {
  return ttlMs < minTtlMs
    ? `"${field}" is ${ttlMs} ms; it must be at least ${minTtlMs} ms (1.5 × this registry's election timeout), or a leader change could expire a lease that is kept alive`
    : null;
}

/**
 * An endpoint URL: `tcp://host:port` (a bare `host:port` is taken as tcp),
 * no path, query or fragment, no wildcard host; returned in one spelling.
 */
function endpointUrl(value: unknown, field: string): string {
  if (typeof value !== "string") {
    throw new ParamsError(
      `"${field}" must be a string like tcp://127.0.0.1:9001`,
    );
  }
  let address;
  try {
    address = parseTcpUrl(value);
  } catch (error) {
    const message = (error as Error).message;
    const hint = /no path, query/.test(message)
      ? ' (attributes go in the name, "name?key=value", or in "endpoint.attrs")'
      : "";
    throw new ParamsError(`"${field}": ${message}${hint}`);
  }
  if (isWildcardHost(address.hostname)) {
    throw new ParamsError(
      `"${field}" ${
        JSON.stringify(value)
      } names a wildcard address, which no client can dial; bind the server's reachable address (serve({ advertise }) or --advertise)`,
    );
  }
  // One spelling per address (tcp://host:port), so the same server bound
  // as "127.0.0.1:9001" and "tcp://127.0.0.1:9001" is one endpoint.
  return formatTcpUrl(address);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A health check spec, with defaults filled in. */
function healthCheck(value: unknown, field: string): HealthCheck {
  if (!isObject(value)) {
    throw new ParamsError(
      `"${field}" must be { kind: "tcp" | "ping", intervalMs?, timeoutMs?, failuresBeforeUnhealthy? }`,
    );
  }
  const kind = oneOf(`${field}.kind`, CHECK_KINDS)(value.kind);
  const intervalMs = integer(
    value.intervalMs,
    `${field}.intervalMs`,
    DEFAULT_HEALTH_CHECK.intervalMs,
    CHECK_INTERVAL_RANGE_MS[0],
    CHECK_INTERVAL_RANGE_MS[1],
  );
  const timeoutMs = integer(
    value.timeoutMs,
    `${field}.timeoutMs`,
    Math.min(DEFAULT_HEALTH_CHECK.timeoutMs, intervalMs - 1),
    10,
    intervalMs - 1,
  );
  const failuresBeforeUnhealthy = integer(
    value.failuresBeforeUnhealthy,
    `${field}.failuresBeforeUnhealthy`,
    DEFAULT_HEALTH_CHECK.failuresBeforeUnhealthy,
    1,
    100,
  );
  return { kind, intervalMs, timeoutMs, failuresBeforeUnhealthy };
}

/** The endpoint of a bind, with the name's query attributes merged in. */
function endpoint(value: unknown, nameAttributes: Attributes): ParsedEndpoint {
  if (!isObject(value)) {
    throw new ParamsError(`"endpoint" must be ${ENDPOINT_SHAPE}`);
  }
  const url = endpointUrl(value.url, "endpoint.url");
  const id = value.id === undefined
    ? url
    : requireBase(value.id, "endpoint.id");
  const attrs = refusing(() =>
    mergeAttributes(
      nameAttributes,
      value.attrs === undefined
        ? {}
        : checkAttributes(value.attrs, "endpoint.attrs"),
    )
  );
  const weight = integer(value.weight, "endpoint.weight", 1, 1, MAX_WEIGHT);
  let zone: string | null = null;
  if (value.zone !== undefined && value.zone !== null) {
    if (
      typeof value.zone !== "string" || value.zone.length === 0 ||
      value.zone.length > MAX_ZONE_LENGTH
    ) {
      throw new ParamsError(
        `"endpoint.zone" must be a string of 1..${MAX_ZONE_LENGTH} characters, or null`,
      );
    }
    zone = value.zone;
  }
  const parsed: ParsedEndpoint = { id, url, attrs, weight, zone };
  if (value.check !== undefined && value.check !== null) {
    parsed.check = healthCheck(value.check, "endpoint.check");
  }
  return parsed;
}

const ENDPOINT_SHAPE = "{ url, id?, attrs?, weight?, zone?, check? }";

/** One of `choices`, or `fallback` when absent. */
function oneOf<T extends string>(
  field: string,
  choices: readonly T[],
  fallback?: T,
): (value: unknown) => T {
  return (value) => {
    if (value === undefined && fallback !== undefined) return fallback;
    if (choices.includes(value as T)) return value as T;
    throw new ParamsError(
      `"${field}" must be ${
        choices.map((c) => JSON.stringify(c)).join(" or ")
      }`,
    );
  };
}

const consistency = oneOf<Consistency>(
  "consistency",
  ["linearizable", "serializable"],
  "linearizable",
);
const scope = oneOf<Scope>("scope", ["global", "local"], "global");

/** An optional boolean flag. */
function flag(field: string, fallback: boolean): (value: unknown) => boolean {
  return (value) => {
    if (value === undefined) return fallback;
    if (typeof value !== "boolean") {
      throw new ParamsError(`"${field}" must be a boolean`);
    }
    return value;
  };
}

/** A string. */
function text(field: string) {
  return (value: unknown): string => {
    if (typeof value !== "string") {
      throw new ParamsError(`"${field}" must be a string`);
    }
    return value;
  };
}

/**
 * A name prefix ("" for every name): the start of a base name, so at most
 * 256 characters, with no whitespace, control characters, `?` or `#` (a
 * query has no place in a prefix: no name could ever match it).
 */
function prefix(value: unknown): string {
  if (value === undefined || value === "") return "";
  if (typeof value !== "string" || value.length > MAX_NAME_LENGTH) {
    throw new ParamsError(
      `"prefix" must be a string of at most ${MAX_NAME_LENGTH} characters`,
    );
  }
  if (baseNameProblem(value, "prefix") !== null) {
    throw new ParamsError(
      `"prefix" ${
        JSON.stringify(value)
      } may not contain whitespace, control characters, "?" or "#": it is the start of a name, and no name has a query (attributes are matched by lookups)`,
    );
  }
  return value;
}

/** An optional integer >= 1; refused with `message` otherwise. */
function positiveInteger(message: string) {
  return (value: unknown): number | undefined => {
    if (value === undefined) return undefined;
    if (!Number.isSafeInteger(value) || (value as number) < 1) {
      throw new ParamsError(message);
    }
    return value as number;
  };
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
    throw new ParamsError(`"${field}" must be an integer in ${min}..${max}`);
  }
  return value as number;
}

/** A member id: non-empty, at most 64 characters, no `|`. */
function memberId(value: unknown): string {
  if (
    typeof value !== "string" || value.trim() === "" || value.includes("|") ||
    value.length > 64
  ) {
    throw new ParamsError(
      `"id" must be a member id (a non-empty string of at most 64 characters, without "|"), not ${
        JSON.stringify(value)
      }`,
    );
  }
  return value;
}

/** A `tcp://host:port` URL, normalised. */
function memberUrl(field: string) {
  return (value: unknown): string => {
    try {
      if (typeof value !== "string") throw new Error("not a string");
      return formatTcpUrl(parseTcpUrl(value));
    } catch (error) {
      throw new ParamsError(
        `"${field}" must be a tcp://host:port or tls://host:port URL, not ${
          JSON.stringify(value)
        } (${(error as Error).message})`,
      );
    }
  };
}

const leaseIdField = {
  /** The lease. */
  id: required<string>((value) => requireLeaseId(value, "id")),
};

const memberIdField = {
  /** The member's id. */
  id: required<string>(memberId),
};

// --- the params of each method ---------------------------------------------

/**
 * The params of every registry method that takes any, by method name:
 * Standard Schemas of the argument list, for `method(schema, handler)`.
 */
export const REGISTRY_PARAMS = {
  [REGISTRY_METHODS.bind]: params<BindParams>()(REGISTRY_METHODS.bind, {
    name: required<string, ParsedName>(nameWithQuery),
    endpoint: required<EndpointSpec, ParsedEndpoint>(
      (value, earlier) => endpoint(value, (earlier.name as ParsedName).query),
      `: ${ENDPOINT_SHAPE}`,
    ),
    leaseId: optional<string>(optionalLeaseId),
    grant: optional<{ ttlMs: number }>((value) => {
      if (value === undefined) return undefined;
      if (typeof value !== "object" || value === null) {
        throw new ParamsError('"grant" must be { ttlMs }');
      }
      return {
        ttlMs: ttl((value as { ttlMs?: unknown }).ttlMs, "grant.ttlMs"),
      };
    }, ": { ttlMs }"),
    scope: optional<Scope, Scope>(scope),
  }, {
    positional: ["name", "endpoint"],
    check({ grant, leaseId }) {
      if (grant !== undefined && leaseId !== undefined) {
        throw new ParamsError(
          'give "leaseId" (an existing lease) or "grant", not both',
        );
      }
    },
  }),
  [REGISTRY_METHODS.unbind]: params<UnbindParams>()(REGISTRY_METHODS.unbind, {
    name: required<string>((value) => nameWithQuery(value).base),
    id: required<string>((value) => requireBase(value, "id")),
    leaseId: optional<string>(optionalLeaseId),
    scope: optional<Scope, Scope>(scope),
  }, { positional: ["name", "id"] }),
  [REGISTRY_METHODS.setState]: params<SetStateParams>()(
    REGISTRY_METHODS.setState,
    {
      name: required<string>((value) => nameWithQuery(value).base),
      id: required<string>((value) => requireBase(value, "id")),
      state: required<"serving" | "draining">(
        oneOf("state", SETTABLE_STATES),
        ': "serving" | "draining"',
      ),
      leaseId: optional<string>(optionalLeaseId),
      scope: optional<Scope, Scope>(scope),
    },
  ),
  [REGISTRY_METHODS.lookup]: params<LookupParams>()(REGISTRY_METHODS.lookup, {
    name: required<string, ParsedName>(nameWithQuery),
    consistency: optional<Consistency, Consistency>(consistency),
    rotate: optional<boolean, boolean>(flag("rotate", true)),
    includeUnhealthy: optional<boolean, boolean>(
      flag("includeUnhealthy", false),
    ),
    limit: optional<number>(
      positiveInteger(
        '"limit" must be an integer >= 1 (leave it out for every endpoint)',
      ),
    ),
  }, { positional: ["name", "consistency"] }),
  [REGISTRY_METHODS.list]: params<ListParams>()(REGISTRY_METHODS.list, {
    prefix: optional<string, string>(prefix),
    consistency: optional<Consistency, Consistency>(consistency),
    endpoints: optional<boolean, boolean>(flag("endpoints", false)),
  }),
  [REGISTRY_METHODS.watch]: params<WatchParams>()(REGISTRY_METHODS.watch, {
    prefix: required<string>(prefix),
    fromRevision: optional<number>(
      positiveInteger('"fromRevision" must be a revision: an integer >= 1'),
    ),
    watchId: optional<string>((value) =>
      value === undefined ? undefined : text("watchId")(value)
    ),
    loads: optional<boolean, boolean>(flag("loads", false)),
  }),
  [REGISTRY_METHODS.unwatch]: params<UnwatchParams>()(
    REGISTRY_METHODS.unwatch,
    {
      watchId: required<string>(text("watchId")),
    },
  ),
  [REGISTRY_METHODS.status]: params<Record<never, never>>()(
    REGISTRY_METHODS.status,
    {},
  ),
  [REGISTRY_METHODS.leaderTransfer]: params<LeaderTransferParams>()(
    REGISTRY_METHODS.leaderTransfer,
    {
      to: optional<string, unknown>((value) => value),
      timeoutMs: optional<number>((value) => {
        if (value === undefined) return undefined;
        if (
          typeof value !== "number" || !Number.isSafeInteger(value) ||
          value < 1 || value > MAX_TRANSFER_TIMEOUT_MS
        ) {
          throw new ParamsError(
            `"timeoutMs" must be an integer number of ms from 1 to ${MAX_TRANSFER_TIMEOUT_MS}, not ${
              JSON.stringify(value)
            }`,
          );
        }
        return value;
      }),
    },
  ),
  [REGISTRY_METHODS.memberList]: params<Record<never, never>>()(
    REGISTRY_METHODS.memberList,
    {},
  ),
  [REGISTRY_METHODS.memberAdd]: params<MemberAddParams>()(
    REGISTRY_METHODS.memberAdd,
    {
      id: required<string>(memberId),
      peerUrl: required<string>(memberUrl("peerUrl")),
      clientUrl: optional<string>((value) =>
        value === undefined ? undefined : memberUrl("clientUrl")(value)
      ),
      learner: optional<boolean, boolean>(flag("learner", true)),
      promoteWhenCaughtUp: optional<boolean, boolean>(
        flag("promoteWhenCaughtUp", false),
      ),
    },
  ),
  [REGISTRY_METHODS.memberPromote]: params<MemberIdParams>()(
    REGISTRY_METHODS.memberPromote,
    memberIdField,
    { positional: ["id"] },
  ),
  [REGISTRY_METHODS.memberRemove]: params<MemberIdParams>()(
    REGISTRY_METHODS.memberRemove,
    memberIdField,
    { positional: ["id"] },
  ),
  [REGISTRY_METHODS.leaseGrant]: params<LeaseGrantParams>()(
    REGISTRY_METHODS.leaseGrant,
    {
      ttlMs: required<number>((value) => ttl(value, "ttlMs")),
      id: optional<string>((value) =>
        value === undefined ? undefined : requireLeaseId(value, "id")
      ),
    },
  ),
  [REGISTRY_METHODS.leaseKeepAlive]: params<LeaseKeepAliveParams>()(
    REGISTRY_METHODS.leaseKeepAlive,
    {
      ...leaseIdField,
      load: optional<number>((value) => {
        if (value === undefined) return undefined;
        if (typeof value !== "number" || !Number.isFinite(value)) {
          throw new ParamsError('"load" must be a finite number');
        }
        return value;
      }),
    },
  ),
  [REGISTRY_METHODS.leaseRevoke]: params<LeaseIdParams>()(
    REGISTRY_METHODS.leaseRevoke,
    leaseIdField,
  ),
  [REGISTRY_METHODS.leaseTimeToLive]: params<LeaseIdParams>()(
    REGISTRY_METHODS.leaseTimeToLive,
    leaseIdField,
  ),
  [REGISTRY_METHODS.leaseList]: params<Record<never, never>>()(
    REGISTRY_METHODS.leaseList,
    {},
  ),
  [REGISTRY_METHODS.snapshot]: params<Record<never, never>>()(
    REGISTRY_METHODS.snapshot,
    {},
  ),
  [REGISTRY_METHODS.snapshotChunk]: params<SnapshotChunkParams>()(
    REGISTRY_METHODS.snapshotChunk,
    {
      snapshotId: required<string>(text("snapshotId")),
      n: required<number>((value) =>
        integer(value, "n", 0, 0, Number.MAX_SAFE_INTEGER)
      ),
    },
  ),
} as const;

/** The params registry method `M` gets once they passed, from its declaration. */
export type ReadParams<M extends keyof typeof REGISTRY_PARAMS> = OutputOf<
  (typeof REGISTRY_PARAMS)[M]["fields"]
>;

// --- the params of the access-management methods (protocol/auth.ts) ---------

/** Most permissions on one token. */
export const MAX_TOKEN_PERMISSIONS = 64;

const TOKEN_NAME = /^[A-Za-z0-9._-]+$/;

const noParams = (method: string) => params<Record<never, never>>()(method, {});

/**
 * The params of every access-management method (`registry.authenticate`,
 * `registry.tokenCreate`…), by method name, as {@link REGISTRY_PARAMS}.
 */
export const AUTH_PARAMS = {
  [AUTH_METHODS.authenticate]: params<AuthenticateParams>()(
    AUTH_METHODS.authenticate,
    {
      token: required<string>((value) => {
        if (typeof value !== "string" || value.length === 0) {
          throw new ParamsError(
            '"token" must be a non-empty string: rft_<tokenId>_<secret>',
          );
        }
        return value;
      }),
    },
    { positional: ["token"] },
  ),
  [AUTH_METHODS.authStatus]: noParams(AUTH_METHODS.authStatus),
  [AUTH_METHODS.authEnable]: noParams(AUTH_METHODS.authEnable),
  [AUTH_METHODS.authDisable]: noParams(AUTH_METHODS.authDisable),
  [AUTH_METHODS.tokenCreate]: params<TokenCreateParams>()(
    AUTH_METHODS.tokenCreate,
    {
      name: required<string>((value) => {
        if (
          typeof value !== "string" || value.length === 0 ||
          value.length > MAX_TOKEN_NAME_LENGTH || !TOKEN_NAME.test(value)
        ) {
          throw new ParamsError(
            `"name" must be 1..${MAX_TOKEN_NAME_LENGTH} characters of A-Z a-z 0-9 . _ -, not ${
              JSON.stringify(value)
            }`,
          );
        }
        return value;
      }),
      permissions: required<Permission[]>((value) => {
        if (
          !Array.isArray(value) || value.length === 0 ||
          value.length > MAX_TOKEN_PERMISSIONS
        ) {
          throw new ParamsError(
            `"permissions" must be a list of 1..${MAX_TOKEN_PERMISSIONS} permissions: read:<prefix>, bind:<prefix> or admin`,
          );
        }
        const normalized = value.map((item) => {
          if (typeof item !== "string") {
            throw new ParamsError(
              `"permissions" items must be strings: read:<prefix>, bind:<prefix> or admin, not ${
                JSON.stringify(item)
              }`,
            );
          }
          return refusing(() => normalizePermission(item));
        });
        return [...new Set(normalized)];
      }),
    },
  ),
  [AUTH_METHODS.tokenList]: noParams(AUTH_METHODS.tokenList),
  [AUTH_METHODS.tokenRevoke]: params<TokenIdParams>()(
    AUTH_METHODS.tokenRevoke,
    {
      tokenId: required<string>((value) => {
        if (typeof value !== "string" || !/^[0-9a-f]{16}$/.test(value)) {
          throw new ParamsError(
            `"tokenId" must be a token id, 16 hex digits (rafter token list shows them), not ${
              JSON.stringify(value)
            }`,
          );
        }
        return value;
      }),
    },
    { positional: ["tokenId"] },
  ),
} as const;
