/**
 * The shared set-up of the registry service tests: an elected single node
 * or three nodes, a raw connection, the assertion of an RpcError, and a
 * node with auth (its bootstrap admin token, authenticated connections).
 *
 * @module
 */

import assert from "node:assert/strict";
import { dial } from "../../rpc/transport/dial.ts";
import type { RpcConnection } from "../../rpc/client/connection.ts";
import { RpcError } from "../../rpc/errors.ts";
import type { Params } from "../../rpc/message.ts";
import { freePorts } from "../../testing/ports.ts";
import { TEST_SECRET } from "../../testing/cluster.ts";
import { waitFor } from "../../testing/time.ts";
import {
  type RegistryNode,
  startRegistryNode,
} from "../../testing/registry.ts";
import type {
  LookupResult,
  PeerSecurityStatus,
} from "../../protocol/registry.ts";
import type { RegistryNodeOptions } from "../node/options.ts";
import type { TokenCreateResult } from "../../protocol/auth.ts";
import { emptyCoreStats } from "../../raft/core.ts";

/** A single-node registry (elected) and a raw connection to it. */
export async function withSingleNode(
  fn: (node: RegistryNode, connection: RpcConnection) => Promise<void>,
  options: {
    onNotification?: (method: string, params: Params | undefined) => void;
    /** More options of the node (auth, limits). */
    node?: Partial<RegistryNodeOptions>;
  } = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "rafter_service_" });
  const node = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir: dir,
    tickMs: 10,
    electionTicks: 5,
    ...options.node,
  });
  let connection: RpcConnection | undefined;
  try {
    await waitFor(
      () => node.raft.status.role === "leader" && node.state.bootstrapped,
      "n1 to lead and record its bootstrap admin token",
    );
    connection = await dial(node.url, {
      onNotification: options.onNotification,
    });
    await fn(node, connection);
  } finally {
    connection?.close();
    await connection?.closed;
    await node.stop();
    await Deno.remove(dir, { recursive: true });
  }
}

export async function rejectsWith(
  call: Promise<unknown>,
  code: number,
  message: string | RegExp,
  data?: unknown,
): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof RpcError, `${error} is an RpcError`);
    if (typeof message === "string") assert.equal(error.message, message);
    else assert.match(error.message, message);
    assert.equal(error.code, code);
    if (data !== undefined) assert.deepEqual(error.data, data);
    return true;
  });
}

export const BIND_SHAPE =
  "Invalid params: registry.bind takes { name, endpoint: { url, id?, attrs?, weight?, zone?, check? }, leaseId?, grant?: { ttlMs }, scope? }";
export const ENDPOINT_SHAPE =
  'Invalid params: "endpoint" must be { url, id?, attrs?, weight?, zone?, check? }';

export function ids(result: LookupResult): string[] {
  return result.endpoints.map((e) => e.id);
}

/** Three in-process registry nodes n1..n3 with a leader elected. */
export async function withThreeNodes(
  fn: (
    nodes: RegistryNode[],
    leader: RegistryNode,
    stop: (node: RegistryNode) => Promise<void>,
    /** Node `nX`'s data folder is `${dir}/nX`. */
    dir: string,
  ) => Promise<void>,
  options: { log?(line: string): void } = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "rafter_service_" });
  const ports = freePorts(6);
  const peers: Record<string, string> = {};
  for (let i = 0; i < 3; i++) {
    peers[`n${i + 1}`] = `tcp://127.0.0.1:${ports[3 + i]}`;
  }
  const nodes = await Promise.all([0, 1, 2].map((i) =>
    startRegistryNode({
      id: `n${i + 1}`,
      listen: { hostname: "127.0.0.1", port: ports[i] },
      peers,
      clusterSecret: TEST_SECRET,
      dataDir: `${dir}/n${i + 1}`,
      tickMs: 20,
      electionTicks: 10,
      log: options.log,
    })
  ));
  const running = new Set(nodes);
  const leaderOf = () => {
    const leaders = nodes.filter((n) => n.raft.status.role === "leader");
    return leaders.length === 1 &&
        nodes.every((n) => n.raft.status.leader === leaders[0].id)
      ? leaders[0]
      : undefined;
  };
  try {
    // The first leader records the bootstrap admin token (one entry):
    // wait for it, so a test's log indexes are not overtaken by it.
    await waitFor(
      () => leaderOf()?.state.bootstrapped === true,
      "a leader all follow, with the bootstrap admin token recorded",
    );
    await fn(nodes, leaderOf()!, async (node) => {
      running.delete(node);
      await node.stop();
    }, dir);
  } finally {
    for (const node of running) await node.stop();
    await Deno.remove(dir, { recursive: true });
  }
}

export async function callOn<T>(
  node: RegistryNode,
  method: string,
  params?: Record<string, unknown>,
): Promise<T> {
  const connection = await dial(node.url);
  try {
    return await connection.call<T>(method, params, { timeoutMs: 5_000 });
  } finally {
    connection.close();
    await connection.closed;
  }
}

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

/**
 * The `security` counters of `registry.status` of a node that refused and
 * dropped nothing and took in `delivered` Raft messages on its peer port.
 */
export function cleanSecurity(delivered: number): PeerSecurityStatus {
  return {
    peerServer: {
      delivered,
      forgedFrom: 0,
      wrongTo: 0,
      notMember: 0,
      invalid: 0,
      refusedConnections: 0,
      identityRefused: 0,
    },
    peerTransport: { identityRefused: 0, redials: 0 },
    raft: emptyCoreStats(),
  };
}
