/**
 * What the hello server and client read from the environment to reach a
 * registry deployed across hosts (docs/deploy.md): the
 * registry URLs (`RAFTER_REGISTRY`), the token (`RAFTER_TOKEN`) and the CA
 * that signed the registry's and servers' certificates (`RAFTER_CA`), the
 * same variables the `rafter` CLI reads.
 *
 * @module
 */

import { DEFAULT_REGISTRY_URL } from "../../mod.ts";

/** Connection settings from the environment. */
export interface Reach {
  /** `RAFTER_REGISTRY`, else the default registry URL. */
  registry: string;
  /** `RAFTER_TOKEN`, when set. */
  token: string | undefined;
  /** TLS trust for `tls://` URLs: `RAFTER_CA`, when set. */
  tls: { caFile: string } | undefined;
}

/**
 * Reads {@link Reach} from `env`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { reachFromEnv } from "./security.ts";
 * const env: Record<string, string> = { RAFTER_CA: "ca.pem" };
 * const reach = reachFromEnv((name) => env[name]);
 * assert.equal(reach.registry, "tcp://127.0.0.1:7001");
 * assert.deepEqual(reach.tls, { caFile: "ca.pem" });
 * assert.equal(reach.token, undefined);
 * ```
 */
export function reachFromEnv(
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): Reach {
  const value = (name: string) => env(name)?.trim() || undefined;
  const caFile = value("RAFTER_CA");
  return {
    registry: value("RAFTER_REGISTRY") ?? DEFAULT_REGISTRY_URL,
    token: value("RAFTER_TOKEN"),
    tls: caFile === undefined ? undefined : { caFile },
  };
}
