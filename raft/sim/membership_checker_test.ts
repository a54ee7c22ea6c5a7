import assert from "node:assert/strict";
import type { RaftCore } from "../core.ts";
import {
  type Configuration,
  encodeConfiguration,
  makeConfiguration,
} from "../configuration.ts";
import type { Entry } from "../types.ts";
import {
  majoritiesIntersect,
  MembershipChecker,
  type MemberView,
} from "./membership_checker.ts";

const c = (voters: string[], learners: string[] = []) =>
  makeConfiguration(voters, learners);

function configEntry(
  index: number,
  term: number,
  config: Configuration,
): Entry {
  return { index, term, type: "config", data: encodeConfiguration(config) };
}

/** A checker whose failures throw their message. */
function checker(bootstrap: Configuration): MembershipChecker {
  return new MembershipChecker(bootstrap, (detail) => {
    throw new Error(detail);
  });
}

/** What the checker reads of a leader's core, and nothing else. */
function leaderView(
  id: string,
  log: Entry[],
  commit: number,
  configuration: Configuration,
): MemberView {
  const core = {
    role: "leader",
    term: log.at(-1)?.term ?? 1,
    configuration,
    commitIndex: commit,
    lastIndex: log.length,
    snapshotPoint: { index: 0, term: 0 },
    entryAt: (index: number) => log[index - 1],
  };
  return { id, core: core as unknown as RaftCore };
}

Deno.test("dissertation §4.1 majorities: single-server changes always intersect, two-server jumps may not", () => {
  const abc = c(["a", "b", "c"]);
  assert.equal(majoritiesIntersect(abc, c(["a", "b", "c", "d"])), true);
  assert.equal(majoritiesIntersect(abc, c(["a", "b"])), true);
  assert.equal(majoritiesIntersect(c(["a"]), c(["a", "b"])), true);
  // Adding two: {a, b} and {c, d, e} are majorities of each.
  assert.equal(majoritiesIntersect(abc, c(["a", "b", "c", "d", "e"])), false);
  // Replacing one voter by another in one step: {a, b} and {c, d}.
  assert.equal(majoritiesIntersect(abc, c(["a", "b", "d"])), false);
  // Removing two of four still intersects: a majority of 4 has 3 of them.
  assert.equal(
    majoritiesIntersect(c(["a", "b", "c", "d"]), c(["a", "b"])),
    true,
  );
  // Learners never count.
  assert.equal(majoritiesIntersect(abc, c(["a", "b", "c"], ["d", "e"])), true);
});

Deno.test("dissertation §4.1 committed history: a committed configuration two voters away from the one before is caught", () => {
  const ok = checker(c(["n1", "n2", "n3"]));
  const leaders = new Map([[1, "n1"], [2, "n4"]]);
  ok.checkCommitted([
    { index: 1, term: 1, data: "" },
    configEntry(2, 1, c(["n1", "n2", "n3"], ["n4"])),
    configEntry(3, 1, c(["n1", "n2", "n3", "n4"])),
    configEntry(4, 2, c(["n2", "n3", "n4"])),
  ], leaders);
  assert.equal(ok.committed.length, 4);
  assert.deepEqual(ok.changes, {
    committed: 3,
    added: 1,
    readded: 0,
    promotions: 1,
    removals: 1,
    leaderRemovals: 0,
  });

  const bad = checker(c(["n1", "n2", "n3"]));
  assert.throws(
    () =>
      bad.checkCommitted([
        configEntry(1, 1, c(["n1", "n2", "n3", "n4", "n5"])),
      ], leaders),
    /no two disjoint majorities: configuration \{voters \[n1,n2,n3,n4,n5\] learners \[\]\} committed at 1 has a majority disjoint from one of \{voters \[n1,n2,n3\] learners \[\]\} committed at 0/,
  );
});

Deno.test("dissertation §4.1 leaders: a leader whose configuration is two voters from the entry before it in its log is caught", () => {
  const bootstrap = c(["n1", "n2", "n3"]);
  const one = c(["n1", "n2", "n3", "n4"]);
  const log = [{ index: 1, term: 1, data: "" }, configEntry(2, 1, one)];
  checker(bootstrap).checkLeaders([leaderView("n1", log, 1, one)]);

  const two = c(["n1", "n2", "n3", "n4", "n5"]);
  // One step further is fine: compared with the entry before, not bootstrap.
  const next = [...log, configEntry(3, 1, two)];
  checker(bootstrap).checkLeaders([leaderView("n1", next, 2, two)]);
  assert.throws(
    () => checker(bootstrap).checkLeaders([leaderView("n1", [log[0]], 1, two)]),
    /no two disjoint majorities: n1, leader of term 1, uses .* \(bootstrap\)/,
  );
});

Deno.test("dissertation §4.2.2 leaders: a removed leader leads only until its removal commits", () => {
  const bootstrap = c(["n1", "n2", "n3"]);
  const without = c(["n2", "n3"]);
  const log = [{ index: 1, term: 1, data: "" }, configEntry(2, 1, without)];
  checker(bootstrap).checkLeaders([leaderView("n1", log, 1, without)]);
  assert.throws(
    () => checker(bootstrap).checkLeaders([leaderView("n1", log, 2, without)]),
    /§4.2.2: n1 leads term 1 but is not a voter of its configuration .*, whose entry 2 is committed \(commit index 2\): it should have stepped down/,
  );
});
