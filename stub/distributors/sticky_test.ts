import assert from "node:assert/strict";
import type { Candidate, FailureInfo, FailureKind } from "./distributor.ts";
import { sticky } from "./sticky.ts";
import { callInfo, candidates, picks } from "./_test_util.ts";

const [a, b, c, d] = candidates("a", "b", "c", "d");

function failure(endpoint: Candidate, kind: FailureKind): FailureInfo {
  return { ...callInfo(), endpoint, kind, safeToRetry: kind === "notSent" };
}

Deno.test("sticky keeps to its first pick while it is listed, whatever else changes", () => {
  const distributor = sticky({ start: 1 });
  assert.deepEqual(picks(distributor, [a, b, c], 3), ["b", "b", "b"]);
  assert.equal(distributor.choose([c, b, a], callInfo()), b);
  assert.equal(distributor.choose([b], callInfo()), b);
  assert.equal(distributor.choose([d, a, b], callInfo()), b);
});

Deno.test("sticky without start begins anywhere, then keeps to it", () => {
  const distributor = sticky();
  const first = distributor.choose([a, b, c], callInfo());
  assert.ok(first !== undefined && [a, b, c].includes(first));
  assert.deepEqual(picks(distributor, [a, b, c], 5), Array(5).fill(first.id));
});

Deno.test("sticky moves once to the next endpoint when its own leaves, and stays there when it returns", () => {
  const distributor = sticky({ start: 1 });
  assert.equal(distributor.choose([a, b, c], callInfo()), b);
  assert.deepEqual(picks(distributor, [a, c], 3), ["c", "c", "c"]);
  assert.deepEqual(picks(distributor, [a, b, c], 3), ["c", "c", "c"]);
});

Deno.test("sticky moves to the next endpoint still listed, wrapping round the old list", () => {
  const skip = sticky({ start: 1 });
  assert.equal(skip.choose([a, b, c, d], callInfo()), b);
  // b and c left: d came after b.
  assert.equal(skip.choose([a, d], callInfo()), d);
  const wrap = sticky({ start: 3 });
  assert.equal(wrap.choose([a, b, c, d], callInfo()), d);
  // d was last: a comes after it.
  assert.equal(wrap.choose([b, c, a], callInfo()), a);
});

Deno.test("sticky takes the same position when none of the endpoints it knew is left", () => {
  const distributor = sticky({ start: 2 });
  assert.equal(distributor.choose([a, b, c], callInfo()), c);
  const [x, y] = candidates("x", "y");
  // Position 2 of [x, y] is 2 % 2 = 0.
  assert.equal(distributor.choose([x, y], callInfo()), x);
  assert.equal(distributor.choose([y, x], callInfo()), x);
});

Deno.test("sticky onError moves on after a connection failure on its endpoint, not after an error answer", () => {
  const distributor = sticky({ start: 0 });
  assert.equal(distributor.choose([a, b, c], callInfo()), a);
  // An error answer: the server is up, stay.
  assert.equal(
    distributor.onError!(new Error("boom"), failure(a, "server")),
    undefined,
  );
  assert.equal(distributor.choose([a, b, c], callInfo()), a);
  // Not sent: move on, even though a is still listed.
  assert.equal(
    distributor.onError!(new Error("refused"), failure(a, "notSent")),
    undefined,
  );
  assert.deepEqual(picks(distributor, [a, b, c], 3), ["b", "b", "b"]);
  // A failure on another endpoint (an older call) does not move it.
  distributor.onError!(new Error("late"), failure(a, "ambiguous"));
  assert.equal(distributor.choose([a, b, c], callInfo()), b);
  // Ambiguous (sent, then the connection broke): move on; c is the last,
  // then it wraps.
  distributor.onError!(new Error("reset"), failure(b, "ambiguous"));
  assert.equal(distributor.choose([a, b, c], callInfo()), c);
  distributor.onError!(new Error("reset"), failure(c, "notSent"));
  assert.equal(distributor.choose([a, b, c], callInfo()), a);
});

Deno.test("sticky onError on the only endpoint keeps it", () => {
  const distributor = sticky({ start: 0 });
  assert.equal(distributor.choose([a], callInfo()), a);
  distributor.onError!(new Error("refused"), failure(a, "notSent"));
  assert.equal(distributor.choose([a], callInfo()), a);
});

Deno.test("sticky moves once when the stub evicts its endpoint, however many calls failed there", () => {
  const distributor = sticky({ start: 0 });
  assert.equal(distributor.choose([a, b, c], callInfo()), a);
  distributor.onError!(new Error("refused"), failure(a, "notSent"));
  // The stub evicted a.
  assert.equal(distributor.choose([b, c], callInfo()), b);
  // Another call that was under way on a fails late: it has left a already.
  distributor.onError!(new Error("reset"), failure(a, "ambiguous"));
  assert.equal(distributor.choose([a, b, c], callInfo()), b);
  assert.equal(distributor.choose([b, c], callInfo()), b);
});

Deno.test("sticky returns undefined for an empty list and still keeps to its endpoint", () => {
  const distributor = sticky({ start: 1 });
  assert.equal(distributor.choose([], callInfo()), undefined);
  assert.equal(distributor.choose([a, b], callInfo()), b);
  assert.equal(distributor.choose([], callInfo()), undefined);
  assert.equal(distributor.choose([a, b], callInfo()), b);
  assert.equal(distributor.onReturn, undefined);
});

Deno.test("sticky moves on by the order of the last list it was given, a new list of the same length included", () => {
  const distributor = sticky({ start: 1 });
  const [a, b, c, d, e] = candidates("a", "b", "c", "d", "e");
  assert.equal(distributor.choose([a, b, c], callInfo())?.id, "b");
  // b left: the one after it in [a, b, c] that is listed.
  assert.equal(distributor.choose([a, c, d], callInfo())?.id, "c");
  // c left: the one after it in [a, c, d], the last list, not [a, b, c].
  assert.equal(distributor.choose([a, d, e], callInfo())?.id, "d");
  const list = [a, d, e];
  assert.equal(distributor.choose(list, callInfo())?.id, "d");
  assert.equal(distributor.choose(list, callInfo())?.id, "d");
  assert.equal(distributor.choose([a, e], callInfo())?.id, "e");
});
