import assert from "node:assert/strict";
import { INVALID_PARAMS } from "../../rpc/errors.ts";
import { waitFor } from "../../testing/time.ts";
import {
  type MemberListResult,
  MEMBERSHIP_CHANGE_FAILED,
  NOT_LEADER,
} from "../../protocol/registry.ts";
import {
  callOn,
  rejectsWith,
  withSingleNode,
  withThreeNodes,
} from "./_test_util.ts";

Deno.test("§5.3 registry.memberList: the leader reports every member's role, kind, match index and lag; a follower redirects", async () => {
  await withThreeNodes(async (nodes, leader, stop) => {
    await callOn(leader, "registry.bind", {
      name: "m",
      endpoint: { url: "tcp://127.0.0.1:9802" },
    });
    const lastIndex = leader.raft.status.lastIndex;
    // Every follower acknowledges the bind within a heartbeat or two.
    let list: MemberListResult | undefined;
    await waitFor(async () => {
      list = await callOn<MemberListResult>(leader, "registry.memberList");
      return list.members.every((m) => m.matchIndex === lastIndex);
    }, "every member to match the leader's log");
    assert.equal(list!.leader, leader.id);
    assert.equal(list!.term, leader.raft.status.term);
    assert.equal(list!.lastIndex, lastIndex);
    assert.deepEqual(
      list!.members.map((m) => [m.id, m.role, m.kind, m.lag, m.reachable]),
      nodes.map((n) => [
        n.id,
        n === leader ? "leader" : "follower",
        "voter",
        0,
        true,
      ]),
    );
    for (const member of list!.members) {
      const node = nodes.find((n) => n.id === member.id)!;
      assert.equal(member.clientUrl, node.url);
      assert.equal(member.peerUrl, node.peerUrl);
    }
    // A stopped follower falls behind: its lag grows with each write.
    const follower = nodes.find((n) => n !== leader)!;
    await stop(follower);
    for (let i = 0; i < 3; i++) {
      await callOn(leader, "registry.bind", {
        name: "m",
        endpoint: { id: `x${i}`, url: "tcp://127.0.0.1:9803" },
      });
    }
    const behind = await callOn<MemberListResult>(
      leader,
      "registry.memberList",
    );
    const stopped = behind.members.find((m) => m.id === follower.id)!;
    assert.equal(stopped.matchIndex, lastIndex);
    assert.equal(stopped.lag, behind.lastIndex - lastIndex);
    assert.ok(stopped.lag! >= 3, String(stopped.lag));
    const other = nodes.find((n) => n !== leader && n !== follower)!;
    await rejectsWith(
      callOn(other, "registry.memberList"),
      NOT_LEADER,
      /^Not leader: /,
      { leaderId: leader.id, leaderUrl: leader.url },
    );
  });
});

Deno.test("dissertation §4.1 registry.memberAdd/memberPromote/memberRemove: the new member list, clear refusals, an idempotent re-add", async () => {
  await withSingleNode(async (node, connection) => {
    const call = (method: string, params: Record<string, unknown>) =>
      connection.call<MemberListResult>(method, params, { timeoutMs: 5_000 });
    const added = await call("registry.memberAdd", {
      id: "n2",
      peerUrl: "tcp://127.0.0.1:1",
      clientUrl: "tcp://127.0.0.1:2",
    });
    assert.equal(added.clusterId, node.clusterId);
    assert.deepEqual(
      added.members.map((m) => [m.id, m.kind, m.peerUrl, m.matchIndex]),
      [
        ["n1", "voter", node.peerUrl, node.raft.status.lastIndex],
        ["n2", "learner", "tcp://127.0.0.1:1", null],
      ],
    );
    // Replicated state: the configuration carries the URLs.
    const config = node.raft.configuration;
    assert.deepEqual([config.voters, config.learners], [["n1"], ["n2"]]);
    assert.equal(config.peerUrls?.n2, "tcp://127.0.0.1:1");
    assert.deepEqual(config.clientUrls, { n2: "tcp://127.0.0.1:2" });
    // The transport follows: n2 is a member of the peer directory.
    assert.equal(node.transport.directory.peerUrl("n2"), "tcp://127.0.0.1:1");
    const index = node.raft.status.lastIndex;
    // The same learner again (a --join that retries) is answered as done.
    const again = await call("registry.memberAdd", {
      id: "n2",
      peerUrl: "tcp://127.0.0.1:1",
    });
    assert.equal(node.raft.status.lastIndex, index);
    assert.deepEqual(again.members.map((m) => m.id), ["n1", "n2"]);
    await rejectsWith(
      call("registry.memberAdd", { id: "n3", peerUrl: "n3" }),
      INVALID_PARAMS,
      /^Invalid params: "peerUrl" must be a tcp:\/\/host:port or tls:\/\/host:port URL, not "n3"/,
    );
    await rejectsWith(
      call("registry.memberPromote", { id: "n9" }),
      MEMBERSHIP_CHANGE_FAILED,
      "Membership change failed: n9 is not a member of this registry (members: n1, n2); rafter member list shows them",
      { reason: "unknownMember", member: "n9" },
    );
    await rejectsWith(
      call("registry.memberPromote", { id: "n1" }),
      MEMBERSHIP_CHANGE_FAILED,
      /^Membership change failed: n1 is not a learner/,
      { reason: "notApplicable", member: "n1" },
    );
    // Dissertation §4.2.1: n2 never ran, so it has not caught up; promoting
    // it would make a quorum of 2 out of n1 and a member that is not there.
    await rejectsWith(
      call("registry.memberPromote", { id: "n2" }),
      MEMBERSHIP_CHANGE_FAILED,
      /^Membership change failed: learner n2 has not caught up \(match index 0, commit index \d+\); start it/,
      { reason: "notApplicable", member: "n2" },
    );
    assert.deepEqual(node.raft.configuration.voters, ["n1"]);
    const removed = await call("registry.memberRemove", { id: "n2" });
    assert.deepEqual(removed.members.map((m) => m.id), ["n1"]);
    assert.equal(node.transport.directory.has("n2"), false);
    await rejectsWith(
      call("registry.memberRemove", { id: "n1" }),
      MEMBERSHIP_CHANGE_FAILED,
      /would leave no voter; add another voter first$/,
      { reason: "notApplicable", member: "n1" },
    );
    assert.equal(node.raft.status.role, "leader");
  });
});

Deno.test("the membership calls refuse an unknown param, naming it and the accepted ones", async () => {
  await withSingleNode(async (_node, connection) => {
    await rejectsWith(
      connection.call("registry.memberAdd", {
        id: "n2",
        peerUrl: "tcp://127.0.0.1:7102",
        voter: true,
      }),
      INVALID_PARAMS,
      'Invalid params: "voter" is not a param of registry.memberAdd, which takes { id, peerUrl, clientUrl?, learner?, promoteWhenCaughtUp? }',
    );
    for (const method of ["registry.memberPromote", "registry.memberRemove"]) {
      await rejectsWith(
        connection.call(method, { id: "n2", force: true }),
        INVALID_PARAMS,
        `Invalid params: "force" is not a param of ${method}, which takes { id }`,
      );
    }
    await rejectsWith(
      connection.call("registry.memberList", { verbose: true }),
      INVALID_PARAMS,
      'Invalid params: "verbose" is not a param: registry.memberList takes no params',
    );
  });
});
