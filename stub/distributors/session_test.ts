import assert from "node:assert/strict";
import { RpcError } from "../../rpc/errors.ts";
import { session } from "./session.ts";
import { makeCandidate } from "./distributor.ts";

const [s1, s2, s3] = ["s1", "s2", "s3"].map((id, i) =>
  makeCandidate({ id, url: `tcp://127.0.0.1:${9001 + i}` })
);
const call = (method: string, params: unknown[]) => ({
  name: "notes",
  method,
  params,
  attempt: 0,
  idempotent: true,
  tried: [],
  remainingMs: 30_000,
});
const answer = (
  id: string,
  primary: string,
  backup: string | null,
  value: unknown = 1,
) => ({
  value,
  session: { id, primary, backup },
});

Deno.test("session(): a failure on the session's server makes its backup the place; later calls go there", () => {
  const distributor = session();
  const add = call("note", ["s1.a", 1]);
  distributor.onReturn!(answer("s1.a", "s1", "s2"), { ...add, endpoint: s1 });
  assert.equal(distributor.choose([s1, s2, s3], add), s1);
  distributor.onError!(new RpcError(-32004, "refused"), {
    ...add,
    endpoint: s1,
    kind: "notSent",
    safeToRetry: true,
  });
  assert.deepEqual(distributor.placementOf("s1.a"), {
    primary: "s2",
    backup: null,
  });
  // s1 back in the list: the session stays at s2.
  assert.equal(distributor.choose([s1, s2, s3], add), s2);
  // An error answer (the server is alive) changes nothing.
  distributor.onError!(new RpcError(-32602, "bad"), {
    ...add,
    endpoint: s2,
    kind: "server",
    safeToRetry: false,
  });
  assert.equal(distributor.placementOf("s1.a")?.primary, "s2");
  assert.equal(distributor.hedge, false);
});

Deno.test("session(): open spreads, close forgets, results without a session pass through unchanged, and placements are bounded", () => {
  const distributor = session({ maxSessions: 2 });
  const open = call("session.open", []);
  // In turn, from wherever the round-robin starts.
  assert.deepEqual(
    [1, 2, 3].map(() => distributor.choose([s1, s2, s3], open)!.id).sort(),
    ["s1", "s2", "s3"],
  );
  assert.equal(
    distributor.onReturn!({ plain: 1 }, { ...open, endpoint: s1 }),
    undefined,
  );
  assert.equal(
    distributor.onReturn!(answer("s3.b", "s3", "s1", null), {
      ...open,
      endpoint: s3,
    }),
    null,
  );
  for (const id of ["s1.x", "s1.y", "s1.z"]) {
    distributor.onReturn!(answer(id, "s1", "s2"), { ...open, endpoint: s1 });
  }
  assert.equal(distributor.placementOf("s3.b"), undefined);
  assert.equal(distributor.placementOf("s1.x"), undefined);
  assert.ok(distributor.placementOf("s1.z"));
  distributor.onReturn!(answer("s1.z", "s1", "s2", true), {
    ...call("session.close", ["s1.z"]),
    endpoint: s1,
  });
  assert.equal(distributor.placementOf("s1.z"), undefined);
  // Unknown session, opener gone: any server.
  assert.ok(distributor.choose([s2, s3], call("note", ["s1.q", 1])));
});

Deno.test("session(): SESSION_NOT_FOUND is retried elsewhere (the session moved; its opener came back), other error answers are not", () => {
  const distributor = session();
  const read = call("notes", ["s1.m"]);
  const failure = {
    ...read,
    endpoint: s1,
    kind: "server" as const,
    safeToRetry: false,
  };
  assert.equal(
    distributor.onError!(new RpcError(-32016, "not held here"), failure),
    "retry",
  );
  assert.equal(
    distributor.onError!(new RpcError(-32602, "bad params"), failure),
    undefined,
  );
});
