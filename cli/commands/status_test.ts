import assert from "node:assert/strict";
import type { MemberStatus, RegistryStatus } from "../../protocol/registry.ts";
import { answeredSummary, type NodeAnswer, whyNoLeader } from "./status.ts";

/** A node's status with just what whyNoLeader reads. */
function node(
  id: string,
  kind: RegistryStatus["kind"],
  peers: Record<string, string | null>,
): RegistryStatus {
  const members: MemberStatus[] = [
    {
      id,
      peerUrl: "",
      clientUrl: null,
      self: true,
      reachable: true,
      lastHeardMsAgo: null,
      lastError: null,
    },
    ...Object.entries(peers).map(([peer, error]) => ({
      id: peer,
      peerUrl: "",
      clientUrl: null,
      self: false,
      reachable: error === null,
      lastHeardMsAgo: error === null ? 10 : null,
      lastError: error,
    })),
  ];
  return {
    id,
    kind,
    role: "follower",
    leader: null,
    members,
  } as unknown as RegistryStatus;
}

Deno.test("rafter status: with no leader agreed on, it says why the statuses tell (a removed node, another secret, no majority), not only that an election may be under way", () => {
  assert.equal(
    whyNoLeader([node("n1", "voter", { n2: null, n3: null })]),
    "an election may be under way (retry in a moment)",
  );
  assert.match(
    whyNoLeader([node("n3", null, { n1: null, n2: null })]),
    /^n3 is no member of its configuration \(removed, or started with --join before `rafter member add`\): stop it, or add it again$/,
  );
  const secret = whyNoLeader([
    node("n1", "voter", {
      n2:
        "the peer refused our peer.hello: it closed the connection (does it list n1 among its --peers, and is it n2? or is the network between them cutting connections?)",
      n3:
        "peer.auth failed: the proof does not match (another cluster secret?)",
    }),
  ]);
  assert.match(
    secret,
    /^n1 cannot authenticate to its peers \(see ERRORS\): the members must share one cluster secret file/,
  );
  assert.doesNotMatch(
    secret,
    /majority/,
    "an authentication failure is not also called a lost majority",
  );
  assert.match(
    whyNoLeader([
      node("n1", "voter", {
        n2: "connect timed out",
        n3: "connection refused",
      }),
      node("n4", "voter", { n2: "connect timed out", n3: null }),
    ]),
    /^n1 reaches no majority of its members \(see ERRORS\): start the others, or check the network between them$/,
  );
});

Deno.test("rafter status counts only members: a removed node that answers is named apart, not counted as a member", () => {
  const row = (id: string, kind: RegistryStatus["kind"]): NodeAnswer => ({
    id,
    url: `tcp://127.0.0.1:700${id.slice(1)}`,
    status: node(id, kind, {}),
    error: null,
  });
  const silent: NodeAnswer = {
    id: "n3",
    url: "tcp://127.0.0.1:7003",
    status: null,
    error: "connection refused",
  };
  const members = ["n1", "n2", "n3", "n4"].map((id) => row(id, "voter"));
  assert.equal(
    answeredSummary([...members, row("n5", null)]),
    "4 of 4 members answered; n5 answered but is not a member",
  );
  assert.equal(answeredSummary(members), "4 of 4 members answered");
  assert.equal(
    answeredSummary([
      members[0],
      members[1],
      silent,
      row("n5", null),
      row("n6", null),
    ]),
    "2 of 3 members answered; n5, n6 answered but are not members",
  );
});
