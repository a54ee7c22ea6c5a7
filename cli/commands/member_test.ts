import assert from "node:assert/strict";
import { memberRole, startHint } from "./member.ts";

Deno.test("rafter member add says how to start the node it added: --join naming the registry, its ports, the secret and an empty folder, and that --join promotes it (promote is by hand)", () => {
  assert.equal(
    startHint(
      "n4",
      "tcp://10.0.0.4:7101",
      "tcp://10.0.0.4:7001",
      ["tcp://10.0.0.1:7001", "tcp://10.0.0.2:7001"],
      true,
    ),
    [
      "next: start n4 on its host with",
      "  rafter registry --id n4 --join tcp://10.0.0.1:7001,tcp://10.0.0.2:7001 --listen 10.0.0.4:7001 --peer-listen 10.0.0.4:7101 --cluster-secret-file FILE --data DIR",
      "  (FILE: a copy of the members' cluster secret file; DIR: an empty folder)",
      "  it is promoted to voter automatically once caught up (it asks the leader itself); rafter member promote n4 does it by hand",
    ].join("\n"),
  );
  const voter = startHint(
    "n5",
    "tls://h5:7101",
    undefined,
    ["tls://h1:7001"],
    false,
  );
  assert.match(
    voter,
    /--listen HOST:PORT --peer-listen h5:7101 --cluster-secret-file FILE --data DIR \(and the TLS flags the other members use\)/,
  );
  assert.match(voter, /; HOST:PORT: its client port\)$/);
  assert.doesNotMatch(voter, /promote/);
});

Deno.test("rafter member list: ROLE says learner for a learner and unreachable for a member the leader cannot reach, not follower", () => {
  const role = (
    kind: "voter" | "learner",
    reachable: boolean,
    leader = false,
  ) => memberRole({ role: leader ? "leader" : "follower", kind, reachable });
  assert.equal(role("voter", true, true), "leader");
  assert.equal(role("voter", true), "follower");
  assert.equal(role("learner", true), "learner");
  // Added but never started, or stopped.
  assert.equal(role("learner", false), "unreachable");
  assert.equal(role("voter", false), "unreachable");
});
