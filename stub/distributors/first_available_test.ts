import assert from "node:assert/strict";
import { firstAvailable } from "./first_available.ts";
import { callInfo, candidates, picks } from "./_test_util.ts";

Deno.test("firstAvailable sends every call to the first endpoint", () => {
  assert.deepEqual(
    picks(firstAvailable(), candidates("a", "b", "c"), 5),
    ["a", "a", "a", "a", "a"],
  );
});

Deno.test("firstAvailable falls back in list order, and returns to the first when it is back", () => {
  const distributor = firstAvailable();
  const [a, b, c] = candidates("a", "b", "c");
  assert.equal(distributor.choose([b, c], callInfo()), b);
  assert.equal(distributor.choose([c], callInfo()), c);
  assert.equal(distributor.choose([a, b, c], callInfo()), a);
});

Deno.test("firstAvailable sends a retry to the first endpoint the call has not tried", () => {
  const distributor = firstAvailable();
  const list = candidates("a", "b", "c");
  const retry = (...tried: string[]) =>
    distributor.choose(list, callInfo({ attempt: tried.length, tried }))?.id;
  assert.equal(retry("a"), "b");
  assert.equal(retry("a", "b"), "c");
  assert.equal(retry("b"), "a");
  assert.equal(retry("gone"), "a");
  // Every one tried: the first again.
  assert.equal(retry("a", "b", "c"), "a");
});

Deno.test("firstAvailable returns undefined for an empty list and has no hooks", () => {
  const distributor = firstAvailable();
  assert.equal(distributor.choose([], callInfo()), undefined);
  assert.equal(distributor.onError, undefined);
  assert.equal(distributor.onReturn, undefined);
});
