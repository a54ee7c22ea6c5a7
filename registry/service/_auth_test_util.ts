/**
 * The set-up of the auth tests: a single node started with `--auth`
 * (or without), its bootstrap admin token, and connections that
 * authenticate with a token.
 *
 * @module
 */

import { dial } from "../../rpc/transport/dial.ts";
import type { RpcConnection } from "../../rpc/client/connection.ts";
import type { TokenCreateResult } from "../../protocol/auth.ts";
import type { RegistryNode } from "../../testing/registry.ts";
import type { RegistryNodeOptions } from "../node/options.ts";
import { withSingleNode } from "./_test_util.ts";

/** What an auth test works with. */
export interface AuthCluster {
  /** The node. */
  node: RegistryNode;
  /** A connection that presented no token. */
  anonymous: RpcConnection;
  /** A connection authenticated with the bootstrap admin token. */
  admin: RpcConnection;
  /** The bootstrap admin token's text. */
  adminToken: string;
  /** Where the bootstrap admin token file is. */
  adminTokenFile: string;
  /** A new connection, authenticated with `token` when given. */
  connect(token?: string): Promise<RpcConnection>;
  /** Makes a token through the admin connection; returns its text. */
  makeToken(name: string, permissions: string[]): Promise<TokenCreateResult>;
}

/** A single node (with `--auth` unless `node.auth` says otherwise). */
export async function withAuthNode(
  fn: (cluster: AuthCluster) => Promise<void>,
  node: Partial<RegistryNodeOptions> = {},
): Promise<void> {
  const tokenDir = await Deno.makeTempDir({ prefix: "rafter_auth_" });
  const adminTokenFile = `${tokenDir}/admin_token`;
  const opened: RpcConnection[] = [];
  try {
    await withSingleNode(async (started, anonymous) => {
      const connect = async (token?: string) => {
        const connection = await dial(started.url);
        opened.push(connection);
        if (token !== undefined) {
          await connection.call("registry.authenticate", { token });
        }
        return connection;
      };
      const adminToken = (await Deno.readTextFile(adminTokenFile)).trim();
      const admin = await connect(adminToken);
      await fn({
        node: started,
        anonymous,
        admin,
        adminToken,
        adminTokenFile,
        connect,
        makeToken: (name, permissions) =>
          admin.call<TokenCreateResult>("registry.tokenCreate", {
            name,
            permissions,
          }),
      });
    }, { node: { auth: true, adminTokenFile, ...node } });
  } finally {
    for (const connection of opened) {
      connection.close();
      await connection.closed;
    }
    await Deno.remove(tokenDir, { recursive: true });
  }
}
