/**
 * `--join` against a fake cluster member (a `serve()` whose methods answer
 * like the registry, and a real peer port with the cluster secret): the
 * join client presents `RAFTER_TOKEN` on every connection it opens, a
 * refused token or a failed probe ends the join before `memberAdd`, and a
 * start that added the node and then fails removes it again
 * (`memberRemove`) and exits 1.
 *
 * @module
 */

import assert from "node:assert/strict";
import { serve } from "../adapter/deno/serve.ts";
import { PERMISSION_DENIED, RpcError, UNAUTHENTICATED } from "../rpc/errors.ts";
import type { RpcServer } from "../rpc/server/server.ts";
import type { Methods } from "../rpc/server/method.ts";
import {
  type MemberAddParams,
  type MemberInfo,
  type MemberListResult,
  NOT_LEADER,
} from "../protocol/registry.ts";
import { ClusterKey } from "../raft/peer_auth.ts";
import { PeerDirectory } from "../raft/peer_directory.ts";
import { type PeerServer, servePeers } from "../raft/deno.ts";
import { parseRegistryArgs } from "../registry/node/args.ts";
import {
  joinedCluster,
  JoinRefusedError,
  TOKEN_ENV,
} from "../registry/node/join.ts";
import { TEST_SECRET } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";

const CLUSTER = "0123456789abcdef";
const ADMIN = "rft_00000000000000aa_" + "a".repeat(43);
const READER = "rft_00000000000000bb_" + "b".repeat(43);

/** One call a fake node took: on which connection, and what. */
interface Call {
  server: "leader" | "follower";
  session: number;
  method: string;
  params: unknown;
}

/**
 * A one-member cluster n1 with access control on: a leader's client port,
 * a follower's client port that points to the leader (NOT_LEADER), and n1's
 * real peer port.
 */
class FakeCluster {
  readonly calls: Call[] = [];
  readonly members: MemberInfo[] = [];
  /** Called on memberAdd before it is answered. */
  onMemberAdd: (params: MemberAddParams) => void = () => {};
  leader!: RpcServer;
  follower!: RpcServer;
  peer!: PeerServer;

  static async start(
    options: { peerClusterId?: string; peerUrl?: string } = {},
  ): Promise<FakeCluster> {
    const fake = new FakeCluster();
    const key = await ClusterKey.fromSecret(TEST_SECRET);
    fake.peer = servePeers({
      id: "n1",
      clusterId: options.peerClusterId ?? CLUSTER,
      key,
      directory: new PeerDirectory("n1", { n1: "tcp://127.0.0.1:1" }),
      onStep: () => {},
    });
    fake.leader = serve({ methods: (s) => fake.#methods("leader", s.id) });
    fake.follower = serve({ methods: (s) => fake.#methods("follower", s.id) });
    fake.members.push({
      id: "n1",
      peerUrl: options.peerUrl ?? fake.peer.url,
      clientUrl: fake.leader.url,
      role: "leader",
      kind: "voter",
      matchIndex: 1,
      lag: 0,
      reachable: true,
      lastHeardMsAgo: 0,
    });
    return fake;
  }

  /** The calls of `method`, in order. */
  called(method: string): Call[] {
    return this.calls.filter((c) => c.method === method);
  }

  async close(): Promise<void> {
    await Promise.all([
      this.leader.close(),
      this.follower.close(),
      this.peer.close(),
    ]);
  }

  #list(): MemberListResult {
    return {
      clusterId: CLUSTER,
      leader: "n1",
      term: 1,
      lastIndex: 1,
      commitIndex: 1,
      members: [...this.members],
    };
  }

  #methods(server: "leader" | "follower", session: number): Methods {
    let token: string | null = null;
    const record = (method: string, params: unknown) =>
      this.calls.push({ server, session, method, params });
    const guard = (admin: boolean) => {
      if (token === null) {
        throw new RpcError(
          UNAUTHENTICATED,
          "Unauthenticated: call registry.authenticate with a token first",
        );
      }
      if (admin && token !== ADMIN) {
        throw new RpcError(
          PERMISSION_DENIED,
          "Permission denied: needs admin",
          { permission: "admin", name: null },
        );
      }
      if (server === "follower") {
        throw new RpcError(NOT_LEADER, "Not leader", {
          leaderId: "n1",
          leaderUrl: this.leader.url,
        });
      }
    };
    return {
      "registry.authenticate": (params: { token?: string }) => {
        record("registry.authenticate", params);
        if (params?.token !== ADMIN && params?.token !== READER) {
          throw new RpcError(UNAUTHENTICATED, "Unauthenticated: unknown token");
        }
        token = params.token;
        return { tokenId: token.slice(4, 20), admin: token === ADMIN };
      },
      "registry.memberList": (params: unknown) => {
        record("registry.memberList", params);
        guard(false);
        return this.#list();
      },
      "registry.memberAdd": (params: MemberAddParams) => {
        record("registry.memberAdd", params);
        guard(true);
        this.onMemberAdd(params);
        this.members.push({
          id: params.id,
          peerUrl: params.peerUrl,
          clientUrl: params.clientUrl ?? null,
          role: "follower",
          kind: "learner",
          matchIndex: null,
          lag: null,
          reachable: false,
          lastHeardMsAgo: null,
        });
        return this.#list();
      },
      "registry.memberRemove": (params: { id: string }) => {
        record("registry.memberRemove", params);
        guard(true);
        const at = this.members.findIndex((m) => m.id === params.id);
        if (at !== -1) this.members.splice(at, 1);
        return this.#list();
      },
    };
  }
}

/** The command line of a joiner n4 through `joinUrl`, on free ports, with its data in `root`. */
function joinerArgv(joinUrl: string, root: string) {
  const [client, peer] = freePorts(2);
  const argv = [
    "--id",
    "n4",
    "--join",
    joinUrl,
    "--listen",
    `127.0.0.1:${client}`,
    "--peer-listen",
    `127.0.0.1:${peer}`,
    "--cluster-secret-file",
    `${root}/cluster_secret`,
    "--data",
    `${root}/n4`,
  ];
  return { client, argv };
}

/**
 * Runs joinedCluster in this process with `token` as if in RAFTER_TOKEN (or
 * none), without touching the environment every test file of a run shares.
 */
async function joinWith(
  fake: FakeCluster,
  token: string | undefined,
  through: RpcServer = fake.leader,
  meta?: Record<string, unknown>,
  prepare?: (args: ReturnType<typeof parseRegistryArgs>) => void,
) {
  const dataDir = await Deno.makeTempDir();
  if (meta !== undefined) {
    await Deno.mkdir(`${dataDir}/n4`);
    await Deno.writeTextFile(`${dataDir}/n4/meta.json`, JSON.stringify(meta));
  }
  const lines: string[] = [];
  try {
    const args = parseRegistryArgs(joinerArgv(through.url, dataDir).argv);
    prepare?.(args);
    return {
      result: await joinedCluster(
        args,
        (line) => lines.push(line),
        TEST_SECRET,
        { token: () => token },
      ),
      lines,
    };
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
}

Deno.test("--join to a cluster with access control and no RAFTER_TOKEN is refused before memberAdd, saying an admin token is needed", async () => {
  const fake = await FakeCluster.start();
  try {
    await assert.rejects(
      joinWith(fake, undefined),
      (error: Error) => {
        assert.ok(error instanceof JoinRefusedError, String(error));
        assert.match(
          error.message,
          /Unauthenticated: .*the cluster has access control on; an admin token is needed in RAFTER_TOKEN/,
        );
        return true;
      },
    );
    assert.deepEqual(fake.called("registry.memberAdd"), []);
    assert.deepEqual(fake.called("registry.authenticate"), []);
  } finally {
    await fake.close();
  }
});

Deno.test("--join with an unknown token in RAFTER_TOKEN is refused at authenticate", async () => {
  const fake = await FakeCluster.start();
  try {
    const unknown = "rft_00000000000000cc_" + "c".repeat(43);
    await assert.rejects(
      joinWith(fake, unknown),
      /did not accept the token in RAFTER_TOKEN \(unknown or revoked\); an admin token is needed in RAFTER_TOKEN/,
    );
    assert.deepEqual(
      fake.calls.map((c) => [c.method, c.params]),
      [["registry.authenticate", { token: unknown }]],
    );
  } finally {
    await fake.close();
  }
});

Deno.test("--join with a token lacking admin is refused at memberAdd, and no member is added", async () => {
  const fake = await FakeCluster.start();
  try {
    await assert.rejects(
      joinWith(fake, READER),
      /Permission denied: needs admin: the token in RAFTER_TOKEN lacks the admin permission; an admin token is needed in RAFTER_TOKEN/,
    );
    assert.equal(fake.called("registry.memberAdd").length, 1);
    assert.deepEqual(fake.members.map((m) => m.id), ["n1"]);
  } finally {
    await fake.close();
  }
});

Deno.test("--join with an admin token authenticates first on every connection, the leader's it was pointed to included", async () => {
  const fake = await FakeCluster.start();
  try {
    const { result } = await joinWith(fake, ADMIN, fake.follower);
    assert.equal(result?.clusterId, CLUSTER);
    assert.equal(result?.added, true);
    assert.deepEqual(Object.keys(result!.peers).sort(), ["n1", "n4"]);
    assert.deepEqual(fake.members.map((m) => [m.id, m.kind]), [
      ["n1", "voter"],
      ["n4", "learner"],
    ]);
    // Both servers were called, each connection first with the token.
    const sessions = new Map<string, string[]>();
    for (const call of fake.calls) {
      const key = `${call.server}#${call.session}`;
      sessions.set(key, [...(sessions.get(key) ?? []), call.method]);
    }
    assert.deepEqual(
      new Set([...sessions.keys()].map((k) => k.split("#")[0])),
      new Set(["leader", "follower"]),
    );
    for (const [key, methods] of sessions) {
      assert.equal(methods[0], "registry.authenticate", key);
    }
    assert.equal(fake.called("registry.memberAdd")[0].server, "leader");
  } finally {
    await fake.close();
  }
});

Deno.test("--join to a member whose peer port is of another cluster id is refused before memberAdd", async () => {
  const fake = await FakeCluster.start({ peerClusterId: "fedcba9876543210" });
  try {
    await assert.rejects(
      joinWith(fake, ADMIN),
      /member n1 at tcp:\/\/127\.0\.0\.1:\d+ belongs to another cluster than tcp:\/\/\S+ serves \(0123456789abcdef\)/,
    );
    assert.deepEqual(fake.called("registry.memberAdd"), []);
  } finally {
    await fake.close();
  }
});

Deno.test("--join when the leader's peer port cannot be reached is refused before memberAdd", async () => {
  const [closed] = freePorts(1);
  const fake = await FakeCluster.start({
    peerUrl: `tcp://127.0.0.1:${closed}`,
  });
  try {
    await assert.rejects(
      joinWith(fake, ADMIN),
      /cannot reach the peer port of the leader n1: member n1 at tcp:\/\/127\.0\.0\.1:\d+: unreachable \(connection refused\); this node could never replicate/,
    );
    assert.deepEqual(fake.called("registry.memberAdd"), []);
  } finally {
    await fake.close();
  }
});

Deno.test("--join on a data folder of another member of the cluster is refused before memberAdd (it failed after it)", async () => {
  const fake = await FakeCluster.start();
  try {
    await assert.rejects(
      joinWith(fake, ADMIN, fake.leader, {
        format: 2,
        clusterId: CLUSTER,
        memberId: "n9",
      }),
      /the data folder \S+\/n4 belongs to member n9, not n4: give this node a new --data folder, or start it with --id n9/,
    );
    assert.deepEqual(fake.called("registry.memberAdd"), []);
  } finally {
    await fake.close();
  }
});

/** Runs registry/main.ts as joiner n4 with RAFTER_TOKEN set; its exit code and output. */
async function runJoiner(
  args: string[],
): Promise<{ code: number; output: string; ms: number }> {
  const started = Date.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../registry/main.ts", import.meta.url).pathname,
      ...args,
    ],
    env: { [TOKEN_ENV]: ADMIN },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // A joiner that never ends fails the test instead of hanging it.
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  try {
    const { code, stdout, stderr } = await child.output();
    const decode = (b: Uint8Array) => new TextDecoder().decode(b);
    return {
      code,
      output: decode(stdout) + decode(stderr),
      ms: Date.now() - started,
    };
  } finally {
    clearTimeout(timer);
  }
}

/** The command line of joiner n4 through `fake`, in a fresh folder. */
async function joinerCommand(fake: FakeCluster) {
  const root = await Deno.makeTempDir();
  await Deno.writeTextFile(`${root}/cluster_secret`, TEST_SECRET);
  const { client, argv } = joinerArgv(fake.leader.url, root);
  return {
    root,
    client,
    args: [...argv, "--tick-ms", "20", "--election-ticks", "5"],
  };
}

Deno.test("a joiner added as a learner that never hears from the leader removes itself and exits 1", async () => {
  const fake = await FakeCluster.start();
  const { root, args } = await joinerCommand(fake);
  try {
    const run = await runJoiner(args);
    assert.equal(run.code, 1, run.output);
    assert.match(
      run.output,
      /registry n4: cannot join: no message from the cluster's leader after \d+ s \(cannot reach n1 at tcp:\/\/127\.0\.0\.1:\d+: the peer refused our peer\.hello: it closed the connection .*\): check that the members reach this node's peer URL tcp:\/\/127\.0\.0\.1:\d+/,
    );
    assert.match(
      run.output,
      /removed itself from cluster 0123456789abcdef again/,
    );
    assert.deepEqual(
      fake.called("registry.memberRemove").map((c) => c.params),
      [{ id: "n4" }],
    );
    assert.deepEqual(fake.members.map((m) => m.id), ["n1"]);
    // 5 s at least (30 election timeouts of 100 ms are less), plus start-up.
    assert.ok(run.ms >= 5_000 && run.ms < 45_000, `took ${run.ms} ms`);
  } finally {
    await fake.close();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("a joiner that cannot start after memberAdd (its client port taken meanwhile) removes itself and exits 1", async () => {
  const fake = await FakeCluster.start();
  const { root, client, args } = await joinerCommand(fake);
  let squatter: Deno.Listener | null = null;
  fake.onMemberAdd = () => {
    squatter = Deno.listen({ hostname: "127.0.0.1", port: client });
  };
  try {
    const run = await runJoiner(args);
    assert.equal(run.code, 1, run.output);
    assert.match(run.output, /registry n4: cannot start \(.*\): .*in use/i);
    assert.deepEqual(
      fake.called("registry.memberRemove").map((c) => c.params),
      [{ id: "n4" }],
    );
    assert.deepEqual(fake.members.map((m) => m.id), ["n1"]);
  } finally {
    (squatter as Deno.Listener | null)?.close();
    await fake.close();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("--join of a node rafter member add already added says so (not 'rejoins'), and is promoted once caught up", async () => {
  const fake = await FakeCluster.start();
  try {
    // n4 added (as `rafter member add` does) at the peer URL it starts on.
    const { result, lines } = await joinWith(
      fake,
      ADMIN,
      fake.leader,
      undefined,
      (args) =>
        fake.members.push({
          id: "n4",
          peerUrl: `tcp://${args.peerListen.hostname}:${args.peerListen.port}`,
          clientUrl: null,
          role: "follower",
          kind: "learner",
          matchIndex: null,
          lag: null,
          reachable: false,
          lastHeardMsAgo: null,
        }),
    );
    assert.equal(result?.clusterId, CLUSTER);
    const line = lines.find((l) => l.includes(`cluster ${CLUSTER}`));
    assert.match(
      line ?? lines.join("\n"),
      /^registry n4: already added as a learner \(rafter member add\) to cluster .*; promoted to voter once caught up$/,
    );
    assert.ok(!lines.some((l) => /rejoins/.test(l)), lines.join("\n"));
  } finally {
    await fake.close();
  }
});
