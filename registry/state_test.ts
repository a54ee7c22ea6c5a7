import assert from "node:assert/strict";
import { type Command, encodeCommand, RegistryState } from "./state.ts";

const h1 = { id: "h1", url: "tcp://127.0.0.1:9001" };
const h2 = { id: "h2", url: "tcp://127.0.0.1:9002" };

function apply(state: RegistryState, command: Command) {
  return state.apply(encodeCommand(command));
}

Deno.test("a new state is empty at revision 0", () => {
  const state = new RegistryState();
  assert.equal(state.revision, 0);
  assert.deepEqual(state.names(), []);
  assert.deepEqual(state.lookup("hello"), {
    name: "hello",
    endpoints: [],
    revision: 0,
  });
});

Deno.test("bind adds endpoints in binding order and bumps the revision each time", () => {
  const state = new RegistryState();
  assert.deepEqual(apply(state, { op: "bind", name: "hello", endpoint: h1 }), {
    revision: 1,
  });
  assert.deepEqual(apply(state, { op: "bind", name: "hello", endpoint: h2 }), {
    revision: 2,
  });
  assert.deepEqual(apply(state, { op: "bind", name: "db", endpoint: h1 }), {
    revision: 3,
  });
  assert.deepEqual(state.lookup("hello"), {
    name: "hello",
    endpoints: [h1, h2],
    revision: 3,
  });
  assert.deepEqual(state.lookup("db").endpoints, [h1]);
  assert.deepEqual(state.names(), ["db", "hello"]);
});

Deno.test("binding an id again with another URL replaces it in place", () => {
  const state = new RegistryState();
  apply(state, { op: "bind", name: "hello", endpoint: h1 });
  apply(state, { op: "bind", name: "hello", endpoint: h2 });
  const moved = { id: "h1", url: "tcp://127.0.0.1:9100" };
  assert.deepEqual(
    apply(state, { op: "bind", name: "hello", endpoint: moved }),
    { revision: 3 },
  );
  assert.deepEqual(state.lookup("hello").endpoints, [moved, h2]);
});

Deno.test("re-binding the same id and URL changes nothing and keeps the revision", () => {
  const state = new RegistryState();
  apply(state, { op: "bind", name: "hello", endpoint: h1 });
  assert.deepEqual(apply(state, { op: "bind", name: "hello", endpoint: h1 }), {
    revision: 1,
  });
  assert.equal(state.revision, 1);
  assert.deepEqual(state.lookup("hello").endpoints, [h1]);
});

Deno.test("unbind removes one endpoint, and the name once it is empty", () => {
  const state = new RegistryState();
  apply(state, { op: "bind", name: "hello", endpoint: h1 });
  apply(state, { op: "bind", name: "hello", endpoint: h2 });
  assert.deepEqual(apply(state, { op: "unbind", name: "hello", id: "h1" }), {
    revision: 3,
    removed: 1,
  });
  assert.deepEqual(state.lookup("hello").endpoints, [h2]);
  assert.deepEqual(apply(state, { op: "unbind", name: "hello", id: "h2" }), {
    revision: 4,
    removed: 1,
  });
  assert.deepEqual(state.lookup("hello"), {
    name: "hello",
    endpoints: [],
    revision: 4,
  });
  assert.deepEqual(state.names(), []);
});

Deno.test("unbinding a missing id or name removes nothing and keeps the revision", () => {
  const state = new RegistryState();
  apply(state, { op: "bind", name: "hello", endpoint: h1 });
  assert.deepEqual(apply(state, { op: "unbind", name: "hello", id: "h9" }), {
    revision: 1,
    removed: 0,
  });
  assert.deepEqual(apply(state, { op: "unbind", name: "nope", id: "h1" }), {
    revision: 1,
    removed: 0,
  });
  assert.deepEqual(state.lookup("hello").endpoints, [h1]);
});

Deno.test("the empty string (a new leader's entry) changes nothing", () => {
  const state = new RegistryState();
  assert.deepEqual(state.apply(""), { revision: 0 });
  apply(state, { op: "bind", name: "hello", endpoint: h1 });
  assert.deepEqual(state.apply(""), { revision: 1 });
  assert.equal(state.revision, 1);
  assert.deepEqual(state.lookup("hello").endpoints, [h1]);
});

Deno.test("lookup returns copies: changing them does not change the state", () => {
  const state = new RegistryState();
  apply(state, { op: "bind", name: "hello", endpoint: h1 });
  const result = state.lookup("hello");
  result.endpoints[0].url = "tcp://10.0.0.1:1";
  result.endpoints.push(h2);
  assert.deepEqual(state.lookup("hello").endpoints, [h1]);
});

Deno.test("bind stores only id and url, not extra fields of the command", () => {
  const state = new RegistryState();
  state.apply(JSON.stringify({
    op: "bind",
    name: "hello",
    endpoint: { ...h1, extra: "x" },
  }));
  assert.deepEqual(state.lookup("hello").endpoints, [h1]);
});

Deno.test("a garbage entry yields { error } without throwing or changing the state", () => {
  const state = new RegistryState();
  apply(state, { op: "bind", name: "hello", endpoint: h1 });
  const before = JSON.stringify([state.lookup("hello"), state.names()]);
  const garbage = [
    "not json",
    "{",
    "null",
    "42",
    '"bind"',
    "[]",
    "{}",
    '{"op":"drop","name":"hello"}',
    '{"op":"bind"}',
    '{"op":"bind","name":"hello"}',
    '{"op":"bind","name":"hello","endpoint":null}',
    '{"op":"bind","name":"hello","endpoint":{"id":"h3"}}',
    '{"op":"bind","name":"hello","endpoint":{"url":"tcp://127.0.0.1:1"}}',
    '{"op":"bind","name":"hello","endpoint":{"id":3,"url":"tcp://127.0.0.1:1"}}',
    '{"op":"bind","name":7,"endpoint":{"id":"h3","url":"tcp://127.0.0.1:1"}}',
    '{"op":"bind","name":"","endpoint":{"id":"h3","url":"tcp://127.0.0.1:1"}}',
    '{"op":"unbind"}',
    '{"op":"unbind","name":"hello"}',
    '{"op":"unbind","name":"hello","id":1}',
    '{"op":"unbind","name":["hello"],"id":"h1"}',
  ];
  for (const data of garbage) {
    let result;
    try {
      result = state.apply(data);
    } catch (error) {
      assert.fail(`apply(${data}) threw ${error}`);
    }
    assert.equal(typeof (result as { error?: unknown }).error, "string", data);
    assert.equal(Object.keys(result).length, 1, data);
    assert.equal(state.revision, 1, data);
    assert.equal(
      JSON.stringify([state.lookup("hello"), state.names()]),
      before,
      data,
    );
  }
  assert.deepEqual(state.apply("not json"), { error: "log entry is not JSON" });
});

Deno.test("replicas that apply the same entries hold the same state", () => {
  const entries = [
    encodeCommand({ op: "bind", name: "hello", endpoint: h1 }),
    "",
    "garbage",
    encodeCommand({ op: "bind", name: "hello", endpoint: h2 }),
    encodeCommand({ op: "bind", name: "hello", endpoint: h2 }),
    encodeCommand({ op: "unbind", name: "hello", id: "h1" }),
    encodeCommand({ op: "bind", name: "db", endpoint: h1 }),
  ];
  const one = new RegistryState();
  const two = new RegistryState();
  const results = entries.map((data) => one.apply(data));
  assert.deepEqual(entries.map((data) => two.apply(data)), results);
  assert.deepEqual(results.map((r) => "revision" in r ? r.revision : null), [
    1,
    1,
    null,
    2,
    2,
    3,
    4,
  ]);
  for (const name of ["hello", "db"]) {
    assert.deepEqual(one.lookup(name), two.lookup(name));
  }
  assert.deepEqual(one.lookup("hello").endpoints, [h2]);
});
