/**
 * Secure by default (as CockroachDB refuses to start without certificates
 * unless told `--insecure`): a registry node whose client or peer port
 * listens on an address other hosts can reach must have TLS on that port
 * (mutual TLS on the peer port, where certificates name the members) and
 * enforce auth on its client port, unless it is started with an explicit
 * `--insecure`. Loopback-only nodes (the one-node development registry on
 * 127.0.0.1) need no setup.
 *
 * @module
 */

import type { TcpAddress } from "../../rpc/transport/transport.ts";
import { isLoopbackHost } from "../../internal/metrics.ts";

/** What decides whether a node may start as configured. */
export interface Exposure {
  /** The client port's listen address. */
  listen: TcpAddress;
  /** The peer port's listen address. */
  peerListen: TcpAddress;
  /** Whether the client port serves TLS. */
  clientTls: boolean;
  /** Whether the peer port serves mutual TLS (certificates naming members). */
  peerTls: boolean;
  /** Whether the node enforces tokens on its client port (`--auth`). */
  auth: boolean;
  /** Started with `--insecure`. */
  insecure: boolean;
}

/**
 * The {@link Exposure} of a node listening on `ports` with `flags` (its
 * options, or its command line: both name the fields alike).
 */
export function exposureOf(
  ports: { listen: TcpAddress; peerListen: TcpAddress },
  flags: {
    tls?: unknown;
    peerTls?: unknown;
    auth?: boolean;
    insecure?: boolean;
  },
): Exposure {
  return {
    listen: ports.listen,
    peerListen: ports.peerListen,
    clientTls: flags.tls !== undefined,
    peerTls: flags.peerTls !== undefined,
    auth: flags.auth === true,
    insecure: flags.insecure === true,
  };
}

export { isLoopbackHost };

/**
 * What is missing for the node to start safely: one line per problem,
 * saying which flag fixes it; empty when it may start (or `insecure` is
 * set: see {@link insecureWarning}).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { exposureProblems } from "./exposure.ts";
 * const open = {
 *   listen: { hostname: "0.0.0.0", port: 7001 },
 *   peerListen: { hostname: "127.0.0.1", port: 7101 },
 *   clientTls: false, peerTls: false, auth: false, insecure: false,
 * };
 * assert.equal(exposureProblems(open).length, 2); // TLS and auth on the client port
 * assert.deepEqual(exposureProblems({ ...open, clientTls: true, auth: true }), []);
 * assert.deepEqual(exposureProblems({ ...open, insecure: true }), []);
 * ```
 */
export function exposureProblems(exposure: Exposure): string[] {
  if (exposure.insecure) return [];
  const problems: string[] = [];
  const { listen, peerListen } = exposure;
  if (!isLoopbackHost(listen.hostname)) {
    if (!exposure.clientTls) {
      problems.push(
        `the client port listens on ${listen.hostname}, which other hosts can reach, without TLS: pass --tls-cert and --tls-key (rafter cert member ID … makes them)`,
      );
    }
    if (!exposure.auth) {
      problems.push(
        `the client port listens on ${listen.hostname} without auth: pass --auth (clients then need a token; the bootstrap admin token is written to --admin-token-file)`,
      );
    }
  }
  if (!isLoopbackHost(peerListen.hostname) && !exposure.peerTls) {
    problems.push(
      `the peer port listens on ${peerListen.hostname}, which other hosts can reach, without mutual TLS: pass --peer-tls-cert, --peer-tls-key and --peer-tls-ca (rafter cert member ID … makes them)`,
    );
  }
  return problems;
}

/**
 * What is missing for an etcd front (`--engine etcd`) to start safely, as
 * {@link exposureProblems} for a node: a front on an address other hosts
 * can reach needs TLS on its client port and, since tokens are not served
 * over etcd, client certificates (`--tls-client-ca`: only clients holding
 * a certificate of that CA connect); or `--insecure`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { frontExposureProblems } from "./exposure.ts";
 * const listen = { hostname: "0.0.0.0", port: 7001 };
 * assert.equal(frontExposureProblems({ listen, insecure: false }).length, 1);
 * assert.deepEqual(frontExposureProblems({ listen, insecure: false, tls: { caFile: "ca.pem" } }), []);
 * assert.deepEqual(frontExposureProblems({ listen: { hostname: "127.0.0.1", port: 7001 }, insecure: false }), []);
 * ```
 */
export function frontExposureProblems(options: {
  listen: TcpAddress;
  tls?: { caFile?: string };
  insecure: boolean;
}): string[] {
  const { listen, tls, insecure } = options;
  if (insecure || isLoopbackHost(listen.hostname)) return [];
  if (tls === undefined) {
    return [
      `the client port listens on ${listen.hostname}, which other hosts can reach, without TLS and without client certificates (an etcd front serves no tokens): pass --tls-cert, --tls-key and --tls-client-ca (rafter cert … makes them)`,
    ];
  }
  if (tls.caFile === undefined) {
    return [
      `the client port listens on ${listen.hostname} with TLS but without client certificates, and an etcd front serves no tokens, so anyone who reaches it could revoke any lease: pass --tls-client-ca (clients then need a certificate of that CA)`,
    ];
  }
  return [];
}

/**
 * The warning a node started with `--insecure` logs at every start, or
 * null when nothing it listens on is exposed without protection.
 */
export function insecureWarning(exposure: Exposure): string | null {
  if (!exposure.insecure) return null;
  const problems = exposureProblems({ ...exposure, insecure: false });
  if (problems.length === 0) return null;
  return `WARNING: started with --insecure: ${
    problems.map((problem) => problem.replace(/: pass .*$/, "")).join("; ")
  }. Anyone who reaches these ports can read and change the registry.`;
}
