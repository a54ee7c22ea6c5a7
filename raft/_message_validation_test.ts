import assert from "node:assert/strict";
import { parseMessage } from "./_message_validation.ts";
import type { Message } from "./types.ts";
import { appendMessage } from "../testing/raft_harness.ts";

const valid: Message[] = [
  {
    type: "vote",
    from: "n1",
    to: "n2",
    term: 3,
    lastLogIndex: 7,
    lastLogTerm: 2,
  },
  { type: "voteResponse", from: "n2", to: "n1", term: 3, granted: false },
  {
    type: "append",
    from: "n1",
    to: "n2",
    term: 3,
    prevLogIndex: 4,
    prevLogTerm: 2,
    entries: [
      { index: 5, term: 2, data: "" },
      { index: 6, term: 3, data: "x" },
      { index: 7, term: 3, data: '{"op":"bind"}' },
      {
        index: 8,
        term: 3,
        data: '{"voters":["n1"],"learners":[]}',
        type: "config",
      },
    ],
    commit: 5,
  },
  appendMessage({ context: "n1:hb:1" }),
  {
    type: "appendResponse",
    from: "n2",
    to: "n1",
    term: 3,
    success: true,
    index: 7,
    conflictTerm: 0,
    conflictIndex: 0,
  },
  {
    type: "appendResponse",
    from: "n2",
    to: "n1",
    term: 3,
    success: false,
    index: 4,
    conflictTerm: 2,
    conflictIndex: 3,
    context: "n1:hb:1",
  },
  { type: "readIndex", from: "n2", to: "n1", term: 3, context: "n2:1" },
  {
    type: "readIndexResponse",
    from: "n1",
    to: "n2",
    term: 3,
    context: "n2:1",
    index: 7,
  },
  { type: "timeoutNow", from: "n1", to: "n2", term: 3 },
  {
    type: "vote",
    from: "n2",
    to: "n3",
    term: 4,
    lastLogIndex: 7,
    lastLogTerm: 3,
    transfer: true,
  },
  {
    type: "preVote",
    from: "n3",
    to: "n1",
    term: 4,
    lastLogIndex: 7,
    lastLogTerm: 3,
  },
  { type: "preVoteResponse", from: "n1", to: "n3", term: 4, granted: true },
  {
    type: "installSnapshot",
    from: "n1",
    to: "n2",
    term: 4,
    snapshot: { index: 7, term: 3 },
    configuration: { voters: ["n1", "n2"], learners: [] },
    offset: 262144,
    data: '{"k":1}',
    done: true,
  },
  {
    type: "installSnapshotResponse",
    from: "n2",
    to: "n1",
    term: 4,
    snapshotIndex: 7,
    offset: 262151,
    success: true,
  },
];

function refuses(value: unknown, message: string | RegExp): void {
  assert.throws(
    () => parseMessage(value),
    (error: unknown) => {
      assert.ok(error instanceof TypeError, `${error} is a TypeError`);
      if (typeof message === "string") assert.equal(error.message, message);
      else assert.match(error.message, message);
      return true;
    },
  );
}

function withField(
  message: Message,
  field: string,
  value: unknown,
): Record<string, unknown> {
  const copy = structuredClone(message) as unknown as Record<string, unknown>;
  if (value === undefined) delete copy[field];
  else copy[field] = value;
  return copy;
}

Deno.test("valid messages of every type pass unchanged", () => {
  const types = new Set<string>();
  for (const message of valid) {
    const copy = structuredClone(message);
    assert.deepEqual(parseMessage(copy), message);
    // It also survives the wire: JSON text parsed back.
    assert.deepEqual(
      parseMessage(JSON.parse(JSON.stringify(message))),
      message,
    );
    types.add(message.type);
  }
  assert.equal(types.size, 11);
});

Deno.test("an entry type other than config is refused", () => {
  const append = {
    type: "append",
    from: "n1",
    to: "n2",
    term: 3,
    prevLogIndex: 0,
    prevLogTerm: 0,
    entries: [{ index: 1, term: 3, data: "", type: "snapshot" }],
    commit: 0,
  };
  assert.throws(() => parseMessage(append), /type\?: "config"/);
});

Deno.test("a message that is not an object is refused", () => {
  for (const value of [null, undefined, 3, "vote", true, [valid[0]]]) {
    refuses(value, "a Raft message must be an object");
  }
});

Deno.test("an unknown or missing type is refused, naming it", () => {
  refuses(
    { ...valid[1], type: "snapshot" },
    'unknown Raft message type "snapshot"',
  );
  refuses(
    withField(valid[1], "type", undefined),
    "unknown Raft message type undefined",
  );
  refuses({ ...valid[1], type: 1 }, "unknown Raft message type 1");
  refuses(
    { ...valid[1], type: "toString" },
    'unknown Raft message type "toString"',
  );
});

Deno.test("from and to must be strings", () => {
  for (const message of valid) {
    for (const field of ["from", "to"]) {
      for (const bad of [undefined, null, 1, {}, ["n1"]]) {
        refuses(
          withField(message, field, bad),
          `Raft message field "${field}" must be a string`,
        );
      }
    }
  }
});

Deno.test("counts must be non-negative safe integers", () => {
  const counts: Record<string, string[]> = {
    vote: ["term", "lastLogIndex", "lastLogTerm"],
    voteResponse: ["term"],
    append: ["term", "prevLogIndex", "prevLogTerm", "commit"],
    appendResponse: ["term", "index", "conflictTerm", "conflictIndex"],
    readIndex: ["term"],
    readIndexResponse: ["term", "index"],
    preVote: ["term", "lastLogIndex", "lastLogTerm"],
    preVoteResponse: ["term"],
    timeoutNow: ["term"],
    installSnapshot: ["term", "offset"],
    installSnapshotResponse: ["term", "snapshotIndex", "offset"],
  };
  const bads = [undefined, null, -1, 1.5, NaN, Infinity, 2 ** 53, "3", true];
  for (const message of valid) {
    for (const field of counts[message.type]) {
      for (const bad of bads) {
        refuses(
          withField(message, field, bad),
          `Raft message field "${field}" must be a non-negative integer`,
        );
      }
    }
  }
});

Deno.test("booleans must be booleans", () => {
  for (const bad of [undefined, null, 0, 1, "true"]) {
    refuses(
      withField(valid[1], "granted", bad),
      'Raft message field "granted" must be a boolean',
    );
    refuses(
      withField(valid[4], "success", bad),
      'Raft message field "success" must be a boolean',
    );
  }
});

Deno.test("context is required on read messages and a string where present", () => {
  for (const message of [valid[6], valid[7]]) {
    for (const bad of [undefined, null, 1]) {
      refuses(
        withField(message, "context", bad),
        'Raft message field "context" must be a string',
      );
    }
  }
  for (const message of [valid[2], valid[4]]) {
    assert.doesNotThrow(() =>
      parseMessage(withField(message, "context", undefined))
    );
    for (const bad of [null, 1, {}]) {
      refuses(
        withField(message, "context", bad),
        'Raft message field "context" must be a string',
      );
    }
  }
});

Deno.test("append entries must be an array of entries", () => {
  for (const bad of [undefined, null, "[]", {}, 1]) {
    refuses(
      withField(valid[2], "entries", bad),
      'Raft message field "entries" must be an array',
    );
  }
  const base = valid[2] as Extract<Message, { type: "append" }>;
  const entryMessage = (entries: unknown[]) => ({ ...base, entries });
  const first =
    'Raft message entry 0 must be { index: 5, term: 2..3, data: string, type?: "config" }';
  for (const bad of [null, 5, "x", [5, 2, ""]]) {
    refuses(entryMessage([bad]), first);
  }
  refuses(entryMessage([{ index: 5, term: 2 }]), first);
  refuses(entryMessage([{ index: 5, term: 2, data: 1 }]), first);
  refuses(entryMessage([{ index: 5, term: "2", data: "" }]), first);
  refuses(entryMessage([{ index: 5, term: 2.5, data: "" }]), first);
  refuses(entryMessage([{ index: "5", term: 2, data: "" }]), first);
});

Deno.test("entries with gaps or out of place are refused", () => {
  const base = valid[2] as Extract<Message, { type: "append" }>;
  const entryMessage = (entries: unknown[]) => ({ ...base, entries });
  // The first entry must follow prevLogIndex (4).
  refuses(
    entryMessage([{ index: 4, term: 2, data: "" }]),
    'Raft message entry 0 must be { index: 5, term: 2..3, data: string, type?: "config" }',
  );
  refuses(
    entryMessage([{ index: 6, term: 2, data: "" }]),
    'Raft message entry 0 must be { index: 5, term: 2..3, data: string, type?: "config" }',
  );
  // A gap after the first.
  refuses(
    entryMessage([
      { index: 5, term: 2, data: "" },
      { index: 7, term: 2, data: "" },
    ]),
    'Raft message entry 1 must be { index: 6, term: 2..3, data: string, type?: "config" }',
  );
  // A repeated index.
  refuses(
    entryMessage([
      { index: 5, term: 2, data: "" },
      { index: 5, term: 2, data: "" },
    ]),
    'Raft message entry 1 must be { index: 6, term: 2..3, data: string, type?: "config" }',
  );
});

Deno.test("entries with decreasing terms are refused", () => {
  const base = valid[2] as Extract<Message, { type: "append" }>;
  refuses(
    {
      ...base,
      entries: [
        { index: 5, term: 3, data: "" },
        { index: 6, term: 2, data: "" },
      ],
    },
    'Raft message entry 1 must be { index: 6, term: 3..3, data: string, type?: "config" }',
  );
  // Term 0 is never an entry's term.
  refuses(
    {
      ...base,
      prevLogIndex: 0,
      prevLogTerm: 0,
      entries: [{ index: 1, term: 0, data: "" }],
    },
    'Raft message entry 0 must be { index: 1, term: 1..3, data: string, type?: "config" }',
  );
});

Deno.test("entries older than the entry they follow are refused", () => {
  // prevLogTerm 2: the leader's log holds term 2 at index 4, so index 5
  // cannot be of term 1.
  const base = valid[2] as Extract<Message, { type: "append" }>;
  refuses(
    { ...base, entries: [{ index: 5, term: 1, data: "" }] },
    'Raft message entry 0 must be { index: 5, term: 2..3, data: string, type?: "config" }',
  );
});

Deno.test("entries with a term above the message's term are refused", () => {
  const base = valid[2] as Extract<Message, { type: "append" }>;
  refuses(
    { ...base, entries: [{ index: 5, term: 4, data: "" }] },
    'Raft message entry 0 must be { index: 5, term: 2..3, data: string, type?: "config" }',
  );
  refuses(
    {
      ...base,
      entries: [
        { index: 5, term: 3, data: "" },
        { index: 6, term: 4, data: "" },
      ],
    },
    'Raft message entry 1 must be { index: 6, term: 3..3, data: string, type?: "config" }',
  );
});

Deno.test("log terms above the message's term are refused", () => {
  refuses(
    withField(valid[2], "prevLogTerm", 4),
    'Raft message field "prevLogTerm" must not exceed "term" (3)',
  );
  refuses(
    withField(valid[0], "lastLogTerm", 4),
    'Raft message field "lastLogTerm" must not exceed "term" (3)',
  );
});

Deno.test("pre-vote messages are checked like vote messages", () => {
  const preVote = valid.find((m) => m.type === "preVote")!;
  const preVoteResponse = valid.find((m) => m.type === "preVoteResponse")!;
  assert.equal(preVote.type, "preVote");
  for (const bad of [undefined, null, 0, "yes"]) {
    refuses(
      withField(preVoteResponse, "granted", bad),
      'Raft message field "granted" must be a boolean',
    );
  }
  refuses(
    withField(preVote, "lastLogTerm", 5),
    'Raft message field "lastLogTerm" must not exceed "term" (4)',
  );
  refuses(
    withField(preVote, "from", 3),
    'Raft message field "from" must be a string',
  );
  refuses(
    { ...preVote, type: "prevote" },
    /unknown Raft message type "prevote"/,
  );
});

Deno.test("extra fields are kept and do not make a message invalid", () => {
  const message = { ...valid[1], note: "hi" };
  assert.equal(parseMessage(message), message);
});

Deno.test("§3.10 timeoutNow and a transfer vote are checked", () => {
  const timeoutNow = valid.find((m) => m.type === "timeoutNow")!;
  const transferVote = valid.find((m) => m.type === "vote" && m.transfer)!;
  assert.deepEqual(parseMessage(timeoutNow), timeoutNow);
  assert.deepEqual(parseMessage(transferVote), transferVote);
  for (const field of ["from", "to"]) {
    for (const bad of [undefined, null, 3, {}]) {
      refuses(
        withField(timeoutNow, field, bad),
        `Raft message field "${field}" must be a string`,
      );
    }
  }
  for (const bad of [false, "true", 1, null, {}]) {
    refuses(
      withField(transferVote, "transfer", bad),
      'Raft message field "transfer" must be true when present',
    );
  }
  refuses(
    { ...timeoutNow, type: "timeoutnow" },
    /unknown Raft message type "timeoutnow"/,
  );
  // An absent (or undefined) flag is an ordinary vote request.
  assert.equal(
    parseMessage(withField(transferVote, "transfer", undefined)).type,
    "vote",
  );
});

Deno.test("§5.3 fast backtracking: a rejection's conflictTerm cannot exceed the sender's term", () => {
  refuses(
    { ...valid[5], conflictTerm: 4 },
    'Raft message field "conflictTerm" must not exceed "term" (3)',
  );
});

Deno.test("§7 InstallSnapshot: the snapshot point, data and done are checked", () => {
  const chunk = valid[12];
  assert.equal(chunk.type, "installSnapshot");
  for (const bad of [undefined, null, 7, [7, 3]]) {
    refuses(
      withField(chunk, "snapshot", bad),
      'Raft message field "snapshot" must be an object { index, term }',
    );
  }
  for (const bad of [-1, 1.5, "7", undefined]) {
    refuses(
      { ...chunk, snapshot: { index: bad, term: 3 } },
      'Raft message field "snapshot.index" must be a non-negative integer',
    );
    refuses(
      { ...chunk, snapshot: { index: 7, term: bad } },
      'Raft message field "snapshot.term" must be a non-negative integer',
    );
  }
  refuses(
    { ...chunk, snapshot: { index: 7, term: 5 } },
    'Raft message field "snapshot.term" must not exceed "term" (4)',
  );
  refuses(
    { ...chunk, snapshot: { index: 7, term: 0 } },
    /must both be 0 or both be > 0/,
  );
  for (const bad of [undefined, null, 1, ["x"]]) {
    refuses(
      withField(chunk, "data", bad),
      'Raft message field "data" must be a string',
    );
  }
  for (const bad of [undefined, 0, "true"]) {
    refuses(
      withField(chunk, "done", bad),
      'Raft message field "done" must be a boolean',
    );
    refuses(
      withField(valid[13], "success", bad),
      'Raft message field "success" must be a boolean',
    );
  }
});

Deno.test("§7 InstallSnapshot: the configuration it carries is checked and kept as it is", () => {
  const chunk = valid[12];
  assert.equal(chunk.type, "installSnapshot");
  const message =
    /Raft message field "configuration" must be an object { voters: \[ids, at least one\], learners: \[ids\] }/;
  for (
    const bad of [
      undefined,
      null,
      [],
      { voters: ["n1"] },
      { voters: [], learners: [] },
      { voters: ["n1", ""], learners: [] },
      { voters: ["n1", 2], learners: [] },
      { voters: ["n1", "n2"], learners: ["n2"] },
    ]
  ) refuses(withField(chunk, "configuration", bad), message);
  // Fields it does not know (e.g. peer addresses) pass through.
  const extended = {
    voters: ["n1"],
    learners: [],
    peerUrls: { n1: "tcp://127.0.0.1:1" },
  };
  const parsed = parseMessage(withField(chunk, "configuration", extended));
  assert.deepEqual(
    (parsed as typeof chunk & { configuration: unknown }).configuration,
    extended,
  );
});
