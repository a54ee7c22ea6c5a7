import assert from "node:assert/strict";
import type { Message } from "../raft/types.ts";
import { MatchIndex } from "./_match_index.ts";

function response(
  fields: Partial<Extract<Message, { type: "appendResponse" }>>,
): Message {
  return {
    type: "appendResponse",
    from: "n2",
    to: "n1",
    term: 2,
    success: true,
    index: 0,
    conflictTerm: 0,
    conflictIndex: 0,
    ...fields,
  };
}

Deno.test("§5.3 matchIndex: the highest index a follower acknowledged in the term, never lowered by a late response", () => {
  const match = new MatchIndex("n1");
  assert.equal(match.of("n2", 2), null);
  match.observe([response({ index: 5 }), response({ index: 9 })]);
  match.observe([response({ index: 7 })]); // an older append answered late
  assert.equal(match.of("n2", 2), 9);
});

Deno.test("§5.3 matchIndex: a new term starts from nothing known; rejections and responses to other nodes do not count", () => {
  const match = new MatchIndex("n1");
  match.observe([response({ index: 9 })]);
  assert.equal(match.of("n2", 3), null, "known only for term 2");
  match.observe([
    response({
      term: 3,
      success: false,
      index: 4,
      conflictTerm: 2,
      conflictIndex: 3,
    }),
    response({ term: 3, to: "n3", index: 12 }),
    response({ term: 3, from: "n3", index: 4 }),
  ]);
  assert.equal(match.of("n2", 3), null);
  assert.equal(match.of("n3", 3), 4);
  match.observe([response({ term: 3, index: 2 })]);
  assert.equal(match.of("n2", 3), 2, "lower than in term 2, but this term's");
  assert.equal(match.of("n2", 2), null, "the term-2 figure is gone");
});
