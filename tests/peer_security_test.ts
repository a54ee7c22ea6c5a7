/**
 * End-to-end tests of the peer port on a 3-node registry run as real
 * `deno run` processes: forged Raft traffic from a plain client is refused
 * on both ports and changes nothing, a node with another cluster secret
 * cannot join, nor can a node of another cluster id that shares the
 * secret, and `registry.status` and the log say which peers a node
 * cannot reach.
 */

import assert from "node:assert/strict";
import { type LocalCluster, withLocalCluster } from "../testing/cluster.ts";
import { dial } from "../rpc/transport/dial.ts";
import { METHOD_NOT_FOUND, RpcError } from "../rpc/errors.ts";
import { parseTcpUrl } from "../rpc/transport/transport.ts";
import type {
  LookupResult,
  MemberStatus,
  RegistryStatus,
} from "../protocol/registry.ts";
import { connect } from "../stub/client.ts";
import { logPrefix } from "./_log_prefix.ts";

/** Polls `condition` every 50 ms until it holds; @throws after `timeoutMs`. */
async function eventually<T>(
  condition: () =>
    | T
    | null
    | undefined
    | false
    | Promise<T | null | undefined | false>,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let round = 0; round < 10_000; round++) {
    const value = await condition();
    if (value) return value;
    if (Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

async function lookup(
  url: string,
  consistency: "linearizable" | "serializable",
): Promise<string[]> {
  const connection = await dial(url, { connectTimeoutMs: 1000 });
  try {
    const result = await connection.call<LookupResult>("registry.lookup", {
      name: "svc",
      consistency,
    }, { timeoutMs: 3000 });
    return result.endpoints.map((e) => e.id).sort();
  } finally {
    connection.close();
  }
}

async function statusOf(
  cluster: LocalCluster,
  id: string,
): Promise<RegistryStatus> {
  const status = await cluster.status(id, 2000);
  assert.ok(status !== null, `${id} did not answer registry.status`);
  return status;
}

/**
 * Sends `text` on a raw TCP connection and reads until the server closes
 * it (or `timeoutMs` passes); returns what came back and whether it closed.
 */
async function sendRaw(
  url: string,
  text: string,
  timeoutMs: number,
): Promise<{ received: string; closed: boolean }> {
  const conn = await Deno.connect(parseTcpUrl(url));
  try {
    const bytes = new TextEncoder().encode(text);
    for (let sent = 0; sent < bytes.length;) {
      sent += await conn.write(bytes.subarray(sent));
    }
    const buffer = new Uint8Array(64 * 1024);
    let received = "";
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const read = await Promise.race([
        conn.read(buffer).catch(() => null),
        new Promise<"timeout">((r) =>
          timer = setTimeout(() => r("timeout"), 200)
        ),
      ]);
      clearTimeout(timer);
      if (read === "timeout") continue;
      if (read === null) return { received, closed: true };
      received += new TextDecoder().decode(buffer.subarray(0, read));
    }
    return { received, closed: false };
  } finally {
    try {
      conn.close();
    } catch {
      // The server closed it already.
    }
  }
}

/**
 * Election timeout 1.5..3 s (tick 50 ms × 30): long enough that a loaded
 * machine's late heartbeat does not start an election while a test checks
 * that the term stays put.
 */
const STEADY = { electionTicks: 30 };

Deno.test("a forged raft.step from a plain client gets -32601 on a follower's client port and a closed connection on its peer port; nothing changes", async () => {
  await withLocalCluster(STEADY, async (cluster) => {
    const leader = await cluster.startRegistryWithLeader(3);
    const ids = [...cluster.registry.keys()];
    const [follower, other] = ids.filter((id) => id !== leader);
    const rafter = connect(cluster.registryUrls, { deadlineMs: 15_000 });
    try {
      await rafter.bind("svc", { id: "real", url: "tcp://127.0.0.1:9001" });
    } finally {
      rafter.close();
    }
    for (const url of cluster.registryUrls) {
      assert.deepEqual(await lookup(url, "linearizable"), ["real"]);
    }
    const before = await statusOf(cluster, follower);
    assert.equal(before.commitIndex, before.appliedIndex);
    // The attack: `other` claims to lead term + 100, with an entry that
    // unbinds the real binding and one that binds a forged one, appended at
    // the follower's commit index and committed at once.
    const term = before.term + 100;
    const at = before.commitIndex;
    const forged = {
      type: "append",
      from: other,
      to: follower,
      term,
      prevLogIndex: at,
      prevLogTerm: before.term,
      entries: [
        {
          index: at + 1,
          term,
          data: JSON.stringify({ op: "unbind", name: "svc", id: "real" }),
        },
        {
          index: at + 2,
          term,
          data: JSON.stringify({
            op: "bind",
            name: "svc",
            endpoint: { id: "forged", url: "tcp://127.0.0.1:6666" },
          }),
        },
      ],
      commit: at + 2,
    };

    // 1. On the client port: there is no raft.step.
    const connection = await dial(cluster.registry.get(follower)!);
    try {
      const error = await connection.call("raft.step", [[forged]]).then(
        () => null,
        (e) => e,
      );
      assert.ok(error instanceof RpcError, String(error));
      assert.equal(error.code, METHOD_NOT_FOUND);
    } finally {
      connection.close();
    }

    // 2. On the peer port, without the handshake: closed, unanswered, as a
    // request and as a notification.
    for (const id of [1, undefined]) {
      const frame = JSON.stringify({
        jsonrpc: "2.0",
        method: "raft.step",
        params: [[forged]],
        ...(id === undefined ? {} : { id }),
      });
      const { received, closed } = await sendRaw(
        cluster.peers.get(follower)!,
        frame + "\n",
        3000,
      );
      assert.equal(closed, true, "the peer port kept the connection open");
      assert.equal(received, "", "the peer port answered");
    }
    await eventually(
      () =>
        cluster.child(follower).output.some((line) =>
          /refused a peer connection from 127\.0\.0\.1:\d+: called raft\.step before authenticating/
            .test(line)
        ),
      "the follower to log the refused connection",
    );

    // Had the forged term reached the follower, it would have taken it at
    // once (and the others would follow when it campaigned); give it time.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const after = await Promise.all(ids.map((id) => statusOf(cluster, id)));
    for (const status of after) {
      assert.equal(status.leader, leader, `${status.id}'s leader`);
      assert.equal(status.term, before.term, `${status.id}'s term`);
    }
    for (const url of cluster.registryUrls) {
      assert.deepEqual(await lookup(url, "linearizable"), ["real"]);
      assert.deepEqual(await lookup(url, "serializable"), ["real"]);
    }
  });
});

Deno.test("a node started with another cluster secret cannot join: its peers refuse it, and status shows it unreachable with the reason", async () => {
  await withLocalCluster(STEADY, async (cluster) => {
    cluster.planRegistry(3);
    await Promise.all([cluster.startNode("n1"), cluster.startNode("n2")]);
    const leader = await cluster.waitForLeader();
    const rafter = connect(
      [cluster.registry.get("n1")!, cluster.registry.get("n2")!],
      { deadlineMs: 15_000 },
    );
    try {
      await rafter.bind("svc", { id: "real", url: "tcp://127.0.0.1:9001" });
    } finally {
      rafter.close();
    }
    const intruderSecret = `${await cluster.dataDirOf("elsewhere")}.secret`;
    await Deno.writeTextFile(intruderSecret, "b".repeat(40) + "\n", {
      mode: 0o600,
    });
    await cluster.startNode("n3", { secretFile: intruderSecret });
    const term = (await statusOf(cluster, leader)).term;

    const n3Of = (status: RegistryStatus) =>
      status.members.find((m) => m.id === "n3")!;
    for (const id of ["n1", "n2"]) {
      // (Before n3 started, the reason was "connection refused".)
      const seen: MemberStatus = await eventually(async () => {
        const member = n3Of(await statusOf(cluster, id));
        return /cluster secret/.test(member.lastError ?? "") ? member : null;
      }, `${id} to report why it cannot reach n3`);
      assert.equal(seen.reachable, false);
      assert.equal(
        seen.lastError,
        "the peer's cluster secret differs from ours: compare the --cluster-secret-file of both nodes",
      );
      // n3's client URL was never learnt: no handshake completed.
      assert.equal(seen.clientUrl, null);
    }
    const n3 = await eventually(async () => {
      const status = await statusOf(cluster, "n3");
      return status.members.every((m) =>
          m.self || /cluster secret/.test(m.lastError ?? "")
        )
        ? status
        : null;
    }, "n3 to report why it cannot reach n1 and n2");
    for (const member of n3.members.filter((m) => !m.self)) {
      assert.equal(member.reachable, false, member.id);
      assert.match(member.lastError!, /cluster secret/, member.id);
    }
    // n3 asks for pre-votes alone (PreVote: its term stays) and disturbs
    // nobody.
    await new Promise((resolve) => setTimeout(resolve, 3500));
    const after = await statusOf(cluster, "n3");
    assert.equal(after.leader, null);
    assert.notEqual(after.role, "leader");
    assert.equal(
      after.term,
      0,
      "PreVote: a node that reaches nobody stays in term 0",
    );
    assert.deepEqual(
      await lookup(cluster.registry.get("n3")!, "serializable"),
      [],
    );
    for (const id of ["n1", "n2"]) {
      const status = await statusOf(cluster, id);
      assert.equal(status.leader, leader);
      assert.equal(status.term, term);
      assert.equal(n3Of(status).reachable, false);
    }
    assert.ok(
      cluster.child("n3").output.some((line) =>
        new RegExp(
          `^${
            logPrefix("warn", "n3")
          }n3: pre-candidate in term \\d+; cannot reach n1 \\(tcp://127\\.0\\.0\\.1:\\d+: the peer's cluster secret differs from ours`,
        ).test(line)
      ),
      cluster.child("n3").output.join("\n"),
    );
  });
});

Deno.test("two clusters sharing a secret: a node of another cluster id (another --cluster-token) is refused in the handshake, with the reason in both logs and in status", async () => {
  await withLocalCluster(STEADY, async (cluster) => {
    cluster.planRegistry(3);
    await Promise.all([cluster.startNode("n1"), cluster.startNode("n2")]);
    const leader = await cluster.waitForLeader();
    const term = (await statusOf(cluster, leader)).term;
    // The same secret and --peers, but the member of another cluster.
    await cluster.startNode("n3", { args: ["--cluster-token", "other"] });
    const idOf = (id: string) =>
      /\(cluster ([0-9a-f]{16}) of /.exec(
        cluster.child(id).output.join("\n"),
      )![1];
    const [ours, theirs] = [idOf("n1"), idOf("n3")];
    assert.equal(idOf("n2"), ours);
    assert.notEqual(theirs, ours);
    const n3Of = (status: RegistryStatus) =>
      status.members.find((m) => m.id === "n3")!;
    for (const id of ["n1", "n2"]) {
      // n3 refuses n1 and n2's hellos, saying why.
      const seen: MemberStatus = await eventually(async () => {
        const member = n3Of(await statusOf(cluster, id));
        return /is for cluster/.test(member.lastError ?? "") ? member : null;
      }, `${id} to report why n3 refuses it`);
      assert.equal(seen.reachable, false);
      assert.equal(
        seen.lastError,
        `peer.hello failed: peer.hello from "${id}" is for cluster "${ours}", but n3 belongs to cluster "${theirs}": the two nodes were bootstrapped with different --peers or --cluster-token, or one of them runs on another cluster's data folder; they share the cluster secret but must not exchange Raft messages`,
      );
      assert.equal(seen.clientUrl, null);
      // And it refuses n3's, logging why.
      await cluster.waitForLine(
        id,
        new RegExp(
          `^${
            logPrefix("warn", id)
          }${id}: refused a peer connection from 127\\.0\\.0\\.1:\\d+: peer\\.hello from "n3" is for cluster "${theirs}", but ${id} belongs to cluster "${ours}"`,
        ),
        10_000,
      );
    }
    await cluster.waitForLine(
      "n3",
      new RegExp(
        `^${
          logPrefix("warn", "n3")
        }n3: refused a peer connection from 127\\.0\\.0\\.1:\\d+: peer\\.hello from "n[12]" is for cluster "${ours}", but n3 belongs to cluster "${theirs}"`,
      ),
      10_000,
    );
    // n3 disturbs nobody; the cluster leads on in its term.
    for (const id of ["n1", "n2"]) {
      const status = await statusOf(cluster, id);
      assert.equal(status.leader, leader);
      assert.equal(status.term, term);
    }
    assert.equal((await statusOf(cluster, "n3")).term, 0);
  });
});

Deno.test("registry.status lists every member with reachability; with two of three stopped the survivor shows them unreachable and its log names them", async () => {
  await withLocalCluster({}, async (cluster) => {
    const leader = await cluster.startRegistryWithLeader(3);
    const ids = [...cluster.registry.keys()];
    // Every node reaches every other and has learnt their client URLs.
    for (const id of ids) {
      const status = await eventually(async () => {
        const status = await statusOf(cluster, id);
        return status.members.every((m) => m.reachable && m.clientUrl !== null)
          ? status
          : null;
      }, `${id} to reach every member`);
      assert.equal(status.url, cluster.registry.get(id));
      assert.equal(status.peerUrl, cluster.peers.get(id));
      assert.equal(status.leaderUrl, cluster.registry.get(leader));
      assert.deepEqual(
        status.members.map((m) => [m.id, m.peerUrl, m.clientUrl, m.self]),
        ids.map((member) => [
          member,
          cluster.peers.get(member),
          cluster.registry.get(member),
          member === id,
        ]),
      );
      for (const member of status.members) {
        assert.equal(member.lastError, null);
      }
    }

    const [survivor, ...stopped] = [
      ids.find((id) => id !== leader)!,
      leader,
      ...ids.filter((id) => id !== leader).slice(1),
    ];
    for (const id of stopped) await cluster.kill(id, "SIGTERM");
    const status = await eventually(async () => {
      const status = await statusOf(cluster, survivor);
      const down = status.members.filter((m) => stopped.includes(m.id));
      return down.every((m) =>
          !m.reachable && m.lastError === "connection refused"
        )
        ? status
        : null;
    }, `${survivor} to see ${stopped.join(" and ")} down`);
    assert.equal(status.members.find((m) => m.self)!.reachable, true);

    // Its log names both, with their peer URLs and why.
    const names = ids.filter((id) => stopped.includes(id))
      .map((id) =>
        `${id} \\(${
          cluster.peers.get(id)!.replace(/\./g, "\\.")
        }: connection refused\\)`
      )
      .join(", ");
    const pattern = new RegExp(
      `^${
        logPrefix("warn", survivor)
      }${survivor}: pre-candidate in term (\\d+); cannot reach ${names}$`,
    );
    const output = cluster.child(survivor).output;
    const first = await eventually(
      () => output.find((line) => pattern.test(line)),
      `${survivor} to log the peers it cannot reach`,
    );
    // No flood: while nothing changes, at most one line per 5 s; and with
    // PreVote its term does not climb.
    const firstTerm = Number(pattern.exec(first)![1]);
    const lines = output.length;
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const later = output.slice(lines).filter((l) =>
      /candidate in term/.test(l)
    );
    assert.ok(later.length <= 1, later.join("\n"));
    const term = (await statusOf(cluster, survivor)).term;
    assert.equal(term, firstTerm, `term ${firstTerm} → ${term}`);
    // A write there says why no leader comes, not "retry shortly".
    const connection = await dial(cluster.registry.get(survivor)!);
    try {
      await assert.rejects(
        connection.call("registry.bind", {
          name: "svc",
          endpoint: { url: "tcp://127.0.0.1:9001" },
        }),
        (error: unknown) => {
          assert.ok(error instanceof RpcError);
          assert.match(
            error.message,
            /^Unavailable: no quorum: this node reaches 1 of 3 members \(.*connection refused.*\); a 3-member registry needs 2 to elect a leader: start the others, or check the network between them$/,
          );
          return true;
        },
      );
    } finally {
      connection.close();
    }
  });
});

Deno.test("a member stopped with SIGSTOP shows as unreachable (no answer to a ping) on the others, and reachable again after SIGCONT", async () => {
  await withLocalCluster({}, async (cluster) => {
    await cluster.startRegistryWithLeader(3);
    const [frozen, ...others] = [...cluster.registry.keys()];
    for (const id of others) {
      await eventually(
        async () =>
          (await statusOf(cluster, id)).members.every((m) => m.reachable),
        `${id} to reach every member`,
      );
    }
    cluster.pause(frozen);
    for (const id of others) {
      const member = await eventually(async () => {
        const m = (await statusOf(cluster, id)).members.find((m) =>
          m.id === frozen
        )!;
        return m.reachable ? null : m;
      }, `${id} to see ${frozen} unreachable`);
      assert.match(member.lastError!, /^no answer to a ping within 2000 ms/);
    }
    cluster.resume(frozen);
    for (const id of others) {
      await eventually(async () => {
        const m = (await statusOf(cluster, id)).members.find((m) =>
          m.id === frozen
        )!;
        return m.reachable && m.lastError === null &&
          m.lastHeardMsAgo !== null && m.lastHeardMsAgo < 2_000;
      }, `${id} to see ${frozen} reachable again`);
    }
  });
});
