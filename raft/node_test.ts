import assert from "node:assert/strict";
import { withTempDir } from "../testing/temp.ts";
import { TEST_SECRET } from "../testing/cluster.ts";
import { freePorts } from "../testing/ports.ts";
import { waitFor, within } from "../testing/time.ts";
import { CommittedEntryConflictError, NotLeaderError } from "./core.ts";
import { RaftNode, type RaftTransport, RaftUnavailableError } from "./node.ts";
import { bootstrapClusterId } from "./data_dir.ts";
import { ClusterKey } from "./peer_auth.ts";
import { type PeerServer, servePeers } from "./deno.ts";
import { PeerTransport } from "./peer_transport.ts";
import type { AppendRequest, Entry, Message } from "./types.ts";

const key = await ClusterKey.fromSecret(TEST_SECRET);

/**
 * A RaftNode with its authenticated transport and peer port, recording
 * what it applies; or, given a `transport`, one that sends through it and
 * has no peer port (the test plays its peers).
 */
interface Member {
  id: string;
  node: RaftNode<string>;
  server: PeerServer | null;
  applied: Entry[];
}

/** A transport that records what the node sends. */
function recorder(sent: Message[]): RaftTransport {
  return { send: (messages) => void sent.push(...messages), close() {} };
}

async function startMember(
  id: string,
  peers: Record<string, string>,
  dataDir: string,
  options: {
    tickMs?: number;
    electionTicks?: number;
    transport?: RaftTransport;
    onFatal?: (error: unknown) => void;
  } = {},
): Promise<Member> {
  const applied: Entry[] = [];
  const clusterId = await bootstrapClusterId(peers);
  const transport = options.transport ??
    new PeerTransport({
      id,
      peers,
      key,
      clusterId,
      minBackoffMs: 10,
      maxBackoffMs: 50,
    });
  const node = await RaftNode.start<string>({
    id,
    peers,
    transport,
    dataDir,
    tickMs: options.tickMs ?? 10,
    electionTicks: options.electionTicks ?? 10,
    apply: (entry) => {
      applied.push(entry);
      return `${id} applied ${entry.index}: ${entry.data}`;
    },
    onFatal: options.onFatal ?? ((error) => {
      throw error;
    }),
  });
  if (!(transport instanceof PeerTransport)) {
    return { id, node, server: null, applied };
  }
  const port = Number(new URL(peers[id].replace("tcp:", "http:")).port);
  const server = servePeers({
    hostname: "127.0.0.1",
    port,
    id,
    key,
    clusterId,
    directory: transport.directory,
    onStep: (messages) => node.step(messages),
  });
  transport.start();
  return { id, node, server, applied };
}

/**
 * n1 of n1..n3 with slow ticks, whose peers n2 and n3 are played by the
 * test: what n1 sends them is recorded in `received`.
 */
async function startRecorded(
  dir: string,
): Promise<{ member: Member; received: Message[] }> {
  const received: Message[] = [];
  const member = await startMember("n1", peersOn(["n1", "n2", "n3"]), dir, {
    tickMs: 100,
    electionTicks: 100,
    transport: recorder(received),
  });
  return { member, received };
}

async function stopMember(member: Member): Promise<void> {
  await member.server?.close();
  await member.node.stop();
}

function peersOn(ids: string[]): Record<string, string> {
  const ports = freePorts(ids.length);
  return Object.fromEntries(
    ids.map((id, i) => [id, `tcp://127.0.0.1:${ports[i]}`]),
  );
}

function data(entries: Entry[]): string[] {
  return entries.map((e) => e.data);
}

const heartbeat = (from: string, term: number): AppendRequest => ({
  type: "append",
  from,
  to: "n1",
  term,
  prevLogIndex: 0,
  prevLogTerm: 0,
  entries: [],
  commit: 0,
});

Deno.test("a single node elects itself, and propose resolves with the apply result", async () => {
  await withTempDir(async (dir) => {
    const member = await startMember("n1", peersOn(["n1"]), dir);
    try {
      await waitFor(() => member.node.status.role === "leader", "n1 to lead");
      assert.equal(await member.node.propose("hello"), "n1 applied 2: hello");
      assert.equal(await member.node.propose(""), "n1 applied 3: ");
      const results = await Promise.all(
        ["a", "b", "c"].map((d) => member.node.propose(d)),
      );
      assert.deepEqual(results, [
        "n1 applied 4: a",
        "n1 applied 5: b",
        "n1 applied 6: c",
      ]);
      assert.deepEqual(data(member.applied), ["", "hello", "", "a", "b", "c"]);
      assert.deepEqual(
        member.applied.map((e) => e.index),
        [1, 2, 3, 4, 5, 6],
      );
      const status = member.node.status;
      assert.deepEqual(status, {
        id: "n1",
        term: status.term,
        role: "leader",
        leader: "n1",
        commitIndex: 6,
        appliedIndex: 6,
        lastIndex: 6,
        member: true,
        learner: false,
        snapshotIndex: 0,
      });
      assert.equal(status.term, 1);
      // A linearizable read barrier on the leader resolves.
      await member.node.readBarrier();
    } finally {
      await stopMember(member);
    }
  }, "rafter_node_");
});

Deno.test("§5.4 an append contradicting a committed entry stops the node, which reports the index, terms and sender", async () => {
  await withTempDir(async (dir) => {
    const { promise: reported, resolve } = Promise.withResolvers<unknown>();
    const member = await startMember("n1", peersOn(["n1"]), dir, {
      onFatal: resolve,
    });
    try {
      await waitFor(() => member.node.status.role === "leader", "n1 to lead");
      assert.equal(await member.node.propose("a"), "n1 applied 2: a");
      // Someone claiming to lead a later term holds another entry 2.
      member.node.step([{
        ...heartbeat("n7", 9),
        prevLogIndex: 2,
        prevLogTerm: 5,
      }]);
      const error = await within(reported, 5_000, "onFatal");
      assert.ok(error instanceof CommittedEntryConflictError);
      assert.match(
        error.message,
        /n1 holds committed entry 2 of term 1, but n7 \(leader of term 9 as it claims\) sent term 5/,
      );
      assert.equal(member.node.failure, error);
      await assert.rejects(member.node.propose("b"), RaftUnavailableError);
    } finally {
      await stopMember(member);
    }
  }, "rafter_node_");
});

Deno.test("a restart from the same data folder re-applies the log in order", async () => {
  await withTempDir(async (dir) => {
    const peers = peersOn(["n1"]);
    const first = await startMember("n1", peers, dir);
    let before: Entry[];
    try {
      await waitFor(() => first.node.status.role === "leader", "n1 to lead");
      for (const d of ["one", "two", "three"]) await first.node.propose(d);
      before = [...first.applied];
    } finally {
      await stopMember(first);
    }
    assert.deepEqual(data(before), ["", "one", "two", "three"]);
    const second = await startMember("n1", peers, dir);
    try {
      // The committed log is applied again from index 1, before any new
      // election.
      await waitFor(
        () => second.applied.length >= 4,
        "the log to be re-applied",
      );
      assert.deepEqual(second.applied.slice(0, 4), before);
      await waitFor(
        () => second.node.status.role === "leader",
        "n1 to lead again",
      );
      assert.equal(second.node.status.term, 2);
      assert.equal(await second.node.propose("four"), "n1 applied 6: four");
      assert.deepEqual(data(second.applied), [
        "",
        "one",
        "two",
        "three",
        "",
        "four",
      ]);
      assert.deepEqual(
        second.applied.map((e) => [e.index, e.term]),
        [[1, 1], [2, 1], [3, 1], [4, 1], [5, 2], [6, 2]],
      );
    } finally {
      await stopMember(second);
    }
  }, "rafter_node_");
});

Deno.test("a data folder of another node id is refused", async () => {
  await withTempDir(async (dir) => {
    const first = await startMember("n1", peersOn(["n1"]), dir);
    await stopMember(first);
    let closed = 0;
    const transport = { send() {}, close: () => void closed++ };
    await assert.rejects(
      RaftNode.start({
        id: "n2",
        peers: { n2: "tcp://127.0.0.1:7002" },
        transport,
        dataDir: dir,
        apply: () => null,
      }),
      {
        message:
          `data folder ${dir} belongs to member "n1", not "n2": start this node with --id n1, or give it its own --data folder`,
      },
    );
    await assert.rejects(
      RaftNode.start({
        id: "n9",
        peers: { n1: "tcp://127.0.0.1:7001", n2: "tcp://127.0.0.1:7002" },
        transport,
        dataDir: dir,
        apply: () => null,
      }),
      {
        message:
          'node id "n9" is not among the peers (n1, n2); list every voter, this node included',
      },
    );
    // A failed start closes the transport it was given.
    assert.equal(closed, 2);
  }, "rafter_node_");
});

Deno.test("a data folder made for other members is refused: a single node's folder reused by a 3-node cluster, or the reverse", async () => {
  await withTempDir(async (dir) => {
    const single = await startMember("n1", peersOn(["n1"]), dir);
    await stopMember(single);
    const transport = { send() {}, close() {} };
    await assert.rejects(
      RaftNode.start({
        id: "n1",
        peers: peersOn(["n1", "n2", "n3"]),
        transport,
        dataDir: dir,
        apply: () => null,
      }),
      (error: Error) => {
        assert.equal(error.name, "DataDirMismatchError");
        assert.match(
          error.message,
          /^data folder .* belongs to another cluster \(id [0-9a-f]{16}\): it holds the log of a cluster bootstrapped with a single node \(n1=tcp:.*\), but this node is started as a member of a cluster of n1=tcp:.*, n2=tcp:.*, n3=tcp:.* \(cluster id [0-9a-f]{16}\)/,
        );
        return true;
      },
    );
    // The same members (whatever their addresses) start fine.
    const again = await startMember("n1", peersOn(["n1"]), dir);
    await stopMember(again);
    const meta = JSON.parse(await Deno.readTextFile(`${dir}/meta.json`));
    assert.deepEqual(Object.keys(meta), [
      "format",
      "clusterId",
      "memberId",
      "bootstrapMembers",
    ]);
    assert.equal(meta.memberId, "n1");
  }, "rafter_node_");
});

Deno.test("a data folder written before folders recorded their members takes the members it is started with", async () => {
  await withTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/meta.json`, '{"id":"n2"}\n');
    const member = await startMember("n2", peersOn(["n2", "n1", "n3"]), dir, {
      tickMs: 100,
      electionTicks: 100,
    });
    await stopMember(member);
    const meta = JSON.parse(await Deno.readTextFile(`${dir}/meta.json`));
    assert.equal(meta.memberId, "n2");
    assert.deepEqual(Object.keys(meta.bootstrapMembers), ["n1", "n2", "n3"]);
  }, "rafter_node_");
});

Deno.test("propose on a follower rejects with NotLeaderError; a read with no leader times out", async () => {
  await withTempDir(async (dir) => {
    // n2 and n3 never run; a long election timeout keeps n1 a follower.
    const peers = peersOn(["n1", "n2", "n3"]);
    const member = await startMember("n1", peers, dir, {
      tickMs: 100,
      electionTicks: 100,
    });
    try {
      await assert.rejects(member.node.propose("x"), (error: unknown) => {
        assert.ok(error instanceof NotLeaderError);
        assert.equal(error.leader, null);
        return true;
      });
      // With no leader to confirm it, a read waits for one, then gives up.
      await assert.rejects(member.node.readBarrier({ timeoutMs: 200 }), {
        name: "RaftUnavailableError",
        message:
          "no leader was elected within 200 ms to confirm the read; retry",
      });
      member.node.step([heartbeat("n2", 2)]);
      await waitFor(
        () => member.node.status.leader === "n2",
        "n1 to follow n2",
      );
      await assert.rejects(member.node.propose("x"), (error: unknown) => {
        assert.ok(error instanceof NotLeaderError);
        assert.equal(error.leader, "n2");
        assert.equal(error.message, "not the leader; the leader is n2");
        return true;
      });
      assert.deepEqual(member.node.status, {
        id: "n1",
        term: 2,
        role: "follower",
        leader: "n2",
        commitIndex: 0,
        appliedIndex: 0,
        lastIndex: 0,
        member: true,
        learner: false,
        snapshotIndex: 0,
      });
    } finally {
      await stopMember(member);
    }
  }, "rafter_node_");
});

Deno.test("a read waits for a leader, and a read whose leader is replaced is asked of the new one", async () => {
  await withTempDir(async (dir) => {
    // n2 and n3 are played by the test, which records what n1 sends.
    const { member, received } = await startRecorded(dir);
    try {
      // No leader yet: the read waits instead of failing.
      const read = member.node.readBarrier({ timeoutMs: 5_000 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(received.some((m) => m.type === "readIndex"), false);
      member.node.step([heartbeat("n2", 2)]);
      const first = await waitFor(
        () => received.find((m) => m.type === "readIndex" && m.to === "n2"),
        "n1 to ask n2",
      );
      // n2 never answers; n3 takes over in term 3 and gets the same read.
      member.node.step([heartbeat("n3", 3)]);
      const second = await waitFor(
        () => received.find((m) => m.type === "readIndex" && m.to === "n3"),
        "n1 to ask n3",
      );
      assert.equal(second.term, 3);
      const context =
        (first as Extract<Message, { type: "readIndex" }>).context;
      assert.equal(
        (second as Extract<Message, { type: "readIndex" }>).context,
        context,
      );
      member.node.step([{
        type: "readIndexResponse",
        from: "n3",
        to: "n1",
        term: 3,
        context,
        index: 0,
      }]);
      await within(read, 2_000, "the read to be confirmed by n3");
    } finally {
      await stopMember(member);
    }
  }, "rafter_node_");
});

Deno.test("stop rejects pending proposals and reads, and later calls", async () => {
  await withTempDir(async (dir) => {
    const member = await startMember("n1", peersOn(["n1", "n2", "n3"]), dir, {
      tickMs: 100,
      electionTicks: 100,
    });
    member.node.step([heartbeat("n2", 2)]);
    await waitFor(() => member.node.status.leader === "n2", "n1 to follow n2");
    const readFailed = assert.rejects(member.node.readBarrier(), {
      name: "RaftUnavailableError",
      message: "the Raft node stopped",
    });
    await stopMember(member);
    await stopMember(member); // twice is fine
    await readFailed;
    // Refused before anything was appended: definitely not applied.
    await assert.rejects(member.node.propose("x"), {
      name: "RaftUnavailableError",
      message: "the Raft node stopped",
      applied: false,
    });
    await assert.rejects(member.node.readBarrier(), RaftUnavailableError);
  }, "rafter_node_");
});

Deno.test("three nodes elect one leader, replicate, and a restarted follower catches up", async () => {
  await withTempDir(async (root) => {
    const ids = ["n1", "n2", "n3"];
    const peers = peersOn(ids);
    const members = new Map<string, Member>();
    for (const id of ids) {
      members.set(id, await startMember(id, peers, `${root}/${id}`));
    }
    const running = () => [...members.values()];
    const leaderOf = () => {
      const leaders = running().filter((m) => m.node.status.role === "leader");
      return leaders.length === 1 ? leaders[0] : null;
    };
    try {
      const leader = await waitFor(leaderOf, "one leader", 5_000);
      // Every node agrees on it.
      await waitFor(
        () => running().every((m) => m.node.status.leader === leader.id),
        "every node to know the leader",
      );
      for (const d of ["a", "b", "c"]) {
        assert.equal(
          await leader.node.propose(d),
          `${leader.id} applied ${leader.node.status.lastIndex}: ${d}`,
        );
      }
      await waitFor(
        () => running().every((m) => m.applied.length === 4),
        "every node to apply 4 entries",
      );
      for (const m of running()) {
        assert.deepEqual(data(m.applied), ["", "a", "b", "c"]);
        assert.deepEqual(m.applied, leader.applied);
      }
      // Stop a follower; the other two still commit.
      const follower = running().find((m) => m.id !== leader.id)!;
      await stopMember(follower);
      members.delete(follower.id);
      for (const d of ["d", "e"]) await leader.node.propose(d);
      assert.equal(follower.applied.length, 4);
      // Restart it from its folder: it reloads its log and catches up.
      const restarted = await startMember(
        follower.id,
        peers,
        `${root}/${follower.id}`,
      );
      members.set(follower.id, restarted);
      await waitFor(
        () => restarted.applied.length === 6,
        "the restarted follower to catch up",
        5_000,
      );
      assert.deepEqual(restarted.applied, leader.applied);
      assert.deepEqual(data(restarted.applied), ["", "a", "b", "c", "d", "e"]);
      assert.equal(restarted.node.status.leader, leader.id);
      // And it takes part in the next commit.
      await leader.node.propose("f");
      await waitFor(
        () => running().every((m) => m.applied.length === 7),
        "every node to apply f",
      );
    } finally {
      for (const m of running()) await stopMember(m);
    }
  }, "rafter_node_");
});

Deno.test("a follower's read is confirmed by the leader's read index and waits for that index to apply", async () => {
  await withTempDir(async (dir) => {
    // n2 is played by the test, which records what n1 sends it.
    const { member, received } = await startRecorded(dir);
    try {
      member.node.step([heartbeat("n2", 2)]);
      // Asked at once, before the node has reported its new leader.
      let confirmed = false;
      const read = member.node.readBarrier().then(() => {
        confirmed = true;
      });
      const request = await waitFor(
        () => received.find((m) => m.type === "readIndex"),
        "n1 to ask n2 for a read index",
      );
      assert.equal(request.type, "readIndex");
      assert.deepEqual({ ...request, context: "" }, {
        type: "readIndex",
        from: "n1",
        to: "n2",
        term: 2,
        context: "",
      });
      const context = (request as Extract<Message, { type: "readIndex" }>)
        .context;
      // The leader says: serve it once index 1 is applied. n1 has nothing yet.
      member.node.step([{
        type: "readIndexResponse",
        from: "n2",
        to: "n1",
        term: 2,
        context,
        index: 1,
      }]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(confirmed, false);
      member.node.step([{
        ...heartbeat("n2", 2),
        entries: [{ index: 1, term: 2, data: "x" }],
        commit: 1,
      }]);
      await within(read, 2_000, "the read to be confirmed");
      assert.equal(confirmed, true);
      assert.deepEqual(member.applied, [{ index: 1, term: 2, data: "x" }]);
    } finally {
      await stopMember(member);
    }
  }, "rafter_node_");
});

Deno.test("§3.10 transferLeadership hands over to another node well within an election timeout, and proposals are refused meanwhile", async () => {
  await withTempDir(async (root) => {
    const ids = ["n1", "n2", "n3"];
    const peers = peersOn(ids);
    const members: Member[] = [];
    // Election timeouts of 50 ticks × 10 ms = 500..1000 ms.
    for (const id of ids) {
      members.push(
        await startMember(id, peers, `${root}/${id}`, { electionTicks: 50 }),
      );
    }
    try {
      const leader = await waitFor(
        () => members.find((m) => m.node.status.role === "leader"),
        "a leader",
        10_000,
      );
      await leader.node.propose("a");
      const target = members.find((m) => m.id !== leader.id)!;
      const started = performance.now();
      const handover = leader.node.transferLeadership({ target: target.id });
      await assert.rejects(leader.node.propose("refused"), NotLeaderError);
      assert.equal(await handover, target.id);
      const ms = performance.now() - started;
      assert.ok(ms < 400, `handover took ${ms.toFixed(0)} ms`);
      await waitFor(
        () => target.node.status.role === "leader",
        "the target to lead",
      );
      assert.equal(
        await target.node.propose("b"),
        `${target.id} applied ${target.node.status.lastIndex}: b`,
      );
      // Not the leader any more: it cannot transfer.
      await assert.rejects(leader.node.transferLeadership(), NotLeaderError);
    } finally {
      for (const m of members) await stopMember(m);
    }
  }, "rafter_node_");
});
