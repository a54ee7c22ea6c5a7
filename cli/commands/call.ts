/**
 * `rafter call NAME METHOD [PARAMS-JSON]`: calls METHOD on a server bound
 * under NAME through a cluster stub, as grpcurl does, and prints the
 * result as JSON; exit 1 for an error answer, 4 when no endpoint serves
 * NAME (saying why: nothing bound, none with the query's attributes, or
 * those failing their health check).
 *
 * @module
 */

import { checkName } from "../args.ts";
import type { Command, Context } from "../context.ts";
import { EXIT, UsageError } from "../errors.ts";
import { clusterTarget } from "../cluster_target.ts";
import {
  describeNoEndpoints,
  printNoEndpoints,
  whyNoEndpoints,
} from "../no_endpoints.ts";
import { NO_ENDPOINTS } from "../../protocol/registry.ts";
import { RpcError } from "../../rpc/errors.ts";
import { leader } from "../../stub/distributors/leader.ts";

/** The spec of `rafter call`. */
export const callCommand: Command = {
  name: "call",
  args: "NAME METHOD [PARAMS-JSON]",
  summary: "call METHOD on a server of NAME",
  about:
    `Calls METHOD on a server bound under NAME (NAME?key=value&... picks among
those with the attributes) and prints the result as JSON. PARAMS-JSON is
a JSON array (positional params) or object (named params); none by
default. A server that checks tokens gets the one from --server-token,
else RAFTER_SERVER_TOKEN, with rpc.authenticate first (the registry gets
its own, --token). Exit 1 when the server answers with an error, 4 when
nothing is bound under NAME, 5 when the server refused the token.`,
  options: {
    idempotent: { type: "boolean" },
    "server-token": { type: "string" },
  },
  optionHelp: [
    "  --idempotent      safe to run twice: retry on another server after a failure",
    "  --server-token T  the servers' token (default $RAFTER_SERVER_TOKEN)",
  ].join("\n"),
  positionals: [2, 3],
  run: (c, [name, method, params], v) =>
    call(
      c,
      checkName(name),
      method,
      callParams(params),
      v.idempotent === true,
    ),
};

/** Runs `rafter call`. */
export async function call(
  context: Context,
  name: string,
  method: string,
  params: unknown[] | Record<string, unknown>,
  idempotent: boolean,
): Promise<number> {
  const { client, globals, out } = context;
  // NAME@CLUSTER: the cluster's registry, as the local one names it (its
  // errors' hints name that registry).
  context.cluster = await clusterTarget(client, name);
  // leader(): a replica of a replicated service that answers NOT_LEADER
  // (it did not run the call) sends it on to the leader; any other
  // service answers the first try.
  const stub = client.stub<Record<string, never>>(name, {
    distributor: leader(),
    deadlineMs: globals.timeoutMs,
    idempotent,
  });
  let result: unknown;
  try {
    result = await stub.$call(method, params);
  } catch (error) {
    if (error instanceof RpcError && error.code === NO_ENDPOINTS) {
      return await noEndpoints(context, name, error);
    }
    throw error;
  }
  out(JSON.stringify(result ?? null, null, 2));
  return EXIT.ok;
}

/**
 * No endpoint to call: says why (nothing bound under the name, none with
 * the query's attributes, or those failing their health check), exit 4;
 * the stub's own error when the registry cannot tell.
 */
async function noEndpoints(
  context: Context,
  name: string,
  error: RpcError,
): Promise<number> {
  let why;
  try {
    why = await whyNoEndpoints(context, name);
  } catch {
    throw error;
  }
  printNoEndpoints(describeNoEndpoints(why, context, { all: false }), context, {
    code: error.code,
    data: {
      ...(error.data as Record<string, unknown> | undefined),
      base: why.base,
      query: why.query,
      cluster: why.cluster,
      bound: why.bound.length,
      matching: why.matching.length,
    },
  });
  return EXIT.notFound;
}

/** PARAMS-JSON as params: a JSON array or object; none when not given. */
function callParams(
  text: string | undefined,
): unknown[] | Record<string, unknown> {
  if (text === undefined) return [];
  let params: unknown;
  try {
    params = JSON.parse(text);
  } catch (error) {
    throw new UsageError(
      `PARAMS-JSON must be a JSON array or object (${
        (error as Error).message
      }); e.g. '["Ada"]' or '{"name":"Ada"}'`,
    );
  }
  if (typeof params !== "object" || params === null) {
    throw new UsageError(
      `PARAMS-JSON must be a JSON array or object, not ${text}; e.g. '[${text}]'`,
    );
  }
  return params as unknown[] | Record<string, unknown>;
}
