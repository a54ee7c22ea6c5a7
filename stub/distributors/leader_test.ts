import assert from "node:assert/strict";
import { RpcError } from "../../rpc/errors.ts";
import { leader } from "./leader.ts";
import {
  type CallInfo,
  type FailureInfo,
  makeCandidate,
} from "./distributor.ts";

const [r1, r2, r3] = ["r1", "r2", "r3"].map((id, i) =>
  makeCandidate({ id, url: `tcp://127.0.0.1:${9001 + i}` })
);
const write: CallInfo = {
  name: "counter",
  method: "add",
  params: [],
  attempt: 0,
  idempotent: false,
  tried: [],
  remainingMs: 30_000,
};
const failure = (
  call: CallInfo,
  endpoint = r1,
  kind: FailureInfo["kind"] = "server",
): FailureInfo => ({
  ...call,
  endpoint,
  kind,
  safeToRetry: kind === "notSent",
});

Deno.test("leader(): until it knows, writes go to the replicas in turn; a success makes its replica the leader", () => {
  const distributor = leader();
  assert.equal(distributor.leaderId, null);
  assert.deepEqual(
    [1, 2, 3, 4].map(() => distributor.choose([r1, r2, r3], write)!.id),
    ["r1", "r2", "r3", "r1"],
  );
  assert.equal(distributor.onReturn!(5, { ...write, endpoint: r2 }), undefined);
  assert.equal(distributor.leaderId, "r2");
  assert.equal(distributor.choose([r1, r2, r3], write), r2);
  // The leader not listed (not in play, or tried): the others in turn.
  assert.ok([r1, r3].includes(distributor.choose([r1, r3], write)!));
  assert.equal(distributor.hedge, false);
});

Deno.test("leader(): NOT_LEADER is retried on the replica it names; a hint naming the replica itself or none forgets the leader", () => {
  const distributor = leader();
  const hint = (leaderId: string | null) =>
    new RpcError(-32001, "not the leader", { leaderId, leaderUrl: null });
  assert.equal(distributor.onError!(hint("r3"), failure(write, r1)), "retry");
  assert.equal(distributor.leaderId, "r3");
  assert.equal(distributor.onError!(hint("r2"), failure(write, r2)), "retry");
  assert.equal(distributor.leaderId, null);
  assert.equal(distributor.onError!(hint(null), failure(write, r1)), "retry");
  assert.equal(distributor.leaderId, null);
  // Another server error is the default decision's (thrown).
  assert.equal(
    distributor.onError!(new RpcError(-32602, "bad"), failure(write, r1)),
    undefined,
  );
});

Deno.test("leader(): a failed attempt on the leader (not an error answer) forgets it; one elsewhere does not", () => {
  const distributor = leader();
  distributor.onReturn!(1, { ...write, endpoint: r1 });
  distributor.onError!(
    new RpcError(-32004, "refused"),
    failure(write, r2, "notSent"),
  );
  assert.equal(distributor.leaderId, "r1");
  distributor.onError!(
    new RpcError(-32003, "timed out"),
    failure(write, r1, "ambiguous"),
  );
  assert.equal(distributor.leaderId, null);
});

Deno.test("leader({ reads }): reads spread over every replica, are retried after any failure, and teach nothing about the leader", () => {
  const reads = leader({ reads: ["get"] });
  const get = { ...write, method: "get" };
  assert.deepEqual(
    [1, 2, 3].map(() => reads.choose([r1, r2, r3], get)!.id).sort(),
    ["r1", "r2", "r3"],
  );
  reads.onReturn!(1, { ...get, endpoint: r3 });
  assert.equal(reads.leaderId, null);
  assert.equal(
    reads.onError!(new RpcError(-32006, "no leader"), failure(get, r1)),
    "retry",
  );
  const byTest = leader({ reads: (method) => method.startsWith("get") });
  byTest.onReturn!(1, { ...write, method: "getAll", endpoint: r2 });
  assert.equal(byTest.leaderId, null);
  byTest.onReturn!(1, { ...write, endpoint: r2 });
  assert.equal(byTest.leaderId, "r2");
});
