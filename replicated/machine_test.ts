import assert from "node:assert/strict";
import { RpcError } from "../rpc/errors.ts";
import {
  requestIdOf,
  type ServiceDefinition,
  snapshotProblem,
  StateMachine,
} from "./machine.ts";

type Tally = { n: number; log: string[] };

const tally: ServiceDefinition<Tally> = {
  initial: () => ({ n: 0, log: [] }),
  writes: {
    add(state, { by }: { by: number }) {
      if (by < 0) throw new RpcError(-32099, "no negative adds", { by });
      state.n += by;
      state.log.push(`+${by}`);
      return state.n;
    },
    crash() {
      throw new Error("a bug");
    },
  },
  reads: { n: (state) => state.n },
  localReads: { log: (state) => state.log },
};

const add = (by: number, requestId?: string) =>
  StateMachine.encode("add", [{ by, requestId }], requestId);

Deno.test("a write with a request id is applied once however often it is applied; its first outcome answers the repeats", () => {
  const machine = new StateMachine(tally);
  assert.deepEqual(machine.apply(add(2, "r1")), { ok: true, value: 2 });
  assert.deepEqual(machine.apply(add(2, "r1")), { ok: true, value: 2 });
  assert.deepEqual(machine.apply(add(3)), { ok: true, value: 5 });
  assert.deepEqual(machine.apply(add(3)), { ok: true, value: 8 });
  assert.equal(machine.read("n", []), 8);
  assert.deepEqual(machine.outcomeOf("r1"), { ok: true, value: 2 });
  assert.equal(machine.outcomeOf("r2"), undefined);
  // A leader's empty entry changes nothing.
  assert.equal(machine.apply(""), null);
  assert.equal(machine.read("n", []), 8);
});

Deno.test("the request-id table is bounded: the oldest id is forgotten first, the same on every replica", () => {
  const machine = new StateMachine(tally, { maxRequestIds: 3 });
  for (const id of ["a", "b", "c", "d"]) machine.apply(add(1, id));
  assert.equal(machine.rememberedRequests, 3);
  assert.equal(machine.outcomeOf("a"), undefined);
  assert.deepEqual(machine.outcomeOf("d"), { ok: true, value: 4 });
  // "a" is applied again (forgotten), "b" is not.
  machine.apply(add(1, "a"));
  machine.apply(add(1, "c"));
  assert.equal(machine.read("n", []), 5);
});

Deno.test("a refused write is an outcome (code, message, data), the state unchanged; a bug is INTERNAL_ERROR and reported", () => {
  const bugs: string[] = [];
  const machine = new StateMachine(tally, {
    onInternalError: (error, method) => bugs.push(`${method}: ${error}`),
  });
  assert.deepEqual(machine.apply(add(-1, "neg")), {
    ok: false,
    error: { code: -32099, message: "no negative adds", data: { by: -1 } },
  });
  assert.equal(machine.read("n", []), 0);
  // The refusal is remembered for its id too.
  assert.equal(machine.outcomeOf("neg")?.ok, false);
  const crashed = machine.apply(StateMachine.encode("crash", []));
  assert.equal(crashed?.ok, false);
  assert.equal(!crashed!.ok && crashed!.error.code, -32603);
  assert.deepEqual(bugs, ["crash: Error: a bug"]);
  const unknown = machine.apply(StateMachine.encode("gone", []));
  assert.match(
    !unknown!.ok ? unknown!.error.message : "",
    /does not define: run the same service definition on every replica/,
  );
  assert.match(
    (machine.apply("{not json") as { error: { message: string } }).error
      .message,
    /not a write command/,
  );
});

Deno.test("a snapshot carries the state and the remembered request ids; a restored machine answers repeats the same", () => {
  const machine = new StateMachine(tally);
  machine.apply(add(4, "x"));
  machine.apply(add(1));
  const data = machine.snapshotJson();
  assert.equal(snapshotProblem(data), null);
  const other = new StateMachine(tally);
  other.restoreJson(data);
  assert.equal(other.read("n", []), 5);
  assert.deepEqual(other.read("log", []), ["+4", "+1"]);
  assert.deepEqual(other.apply(add(4, "x")), { ok: true, value: 4 });
  assert.equal(other.read("n", []), 5);
  assert.match(
    snapshotProblem('{"v":2,"state":1,"requests":[]}')!,
    /version is 2/,
  );
  assert.match(snapshotProblem('{"v":1,"state":1,"requests":[1]}')!, /pairs/);
  assert.throws(() => other.restoreJson("[]"), TypeError);
  // Custom snapshot and restore functions are used.
  const custom = new StateMachine<Tally>({
    ...tally,
    snapshot: (state) => state.n,
    restore: (value) => ({ n: value as number, log: [] }),
  });
  custom.apply(add(7));
  const restored = new StateMachine<Tally>({
    ...tally,
    snapshot: (state) => state.n,
    restore: (value) => ({ n: value as number, log: ["restored"] }),
  });
  restored.restoreJson(custom.snapshotJson());
  assert.deepEqual(restored.state, { n: 7, log: ["restored"] });
});

Deno.test("a definition with a reserved, doubled or missing method is refused with what to change; request ids are checked", () => {
  assert.throws(
    () => new StateMachine({ ...tally, writes: { "rpc.x": () => 1 } }),
    /reserved; rename it/,
  );
  assert.throws(
    () => new StateMachine({ ...tally, reads: { add: () => 1 } }),
    /add is defined twice/,
  );
  assert.throws(
    () =>
      new StateMachine(
        { initial: undefined } as unknown as ServiceDefinition<0>,
      ),
    /needs initial\(\)/,
  );
  assert.throws(
    () => new StateMachine({ ...tally, writes: { add: 1 as never } }),
    /writes.add is not a function/,
  );
  assert.equal(requestIdOf([{ requestId: "a" }]), "a");
  assert.equal(requestIdOf([{ by: 1 }]), undefined);
  assert.equal(requestIdOf(["a"]), undefined);
  assert.equal(requestIdOf([{ requestId: "a" }, 2]), undefined);
  assert.throws(() => requestIdOf([{ requestId: 5 }]), /got number/);
  assert.throws(() => requestIdOf([{ requestId: "" }]), RangeError);
  assert.throws(
    () => requestIdOf([{ requestId: "x".repeat(129) }]),
    /at most 128 characters \(got 129 characters\)/,
  );
});
