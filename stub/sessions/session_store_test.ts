import assert from "node:assert/strict";
import { RpcError } from "../../rpc/errors.ts";
import {
  type SessionAnswer,
  type SessionPeers,
  SessionStore,
} from "./session_store.ts";
import { makeCandidate } from "../distributors/distributor.ts";
import type { Distributor } from "../distributors/distributor.ts";

type Notes = { notes: number[] };

/** Stores s1..sN that send each other copies in-process; `down` ones refuse. */
function stores(count: number, now = () => Date.now()) {
  const all = new Map<string, SessionStore<Notes>>();
  const down = new Set<string>();
  const copies: string[] = [];
  const peers = (self: string): SessionPeers => ({
    stub(_name, { distributor }: { distributor: Distributor }) {
      return {
        async $call(method: string, params: Record<string, unknown>) {
          const endpoints = [...all.keys()].filter((id) => !down.has(id)).map(
            (id, i) =>
              makeCandidate({ id, url: `tcp://127.0.0.1:${9000 + i}` }),
          );
          const call = {
            name: "notes",
            method,
            params,
            attempt: 0,
            idempotent: true,
            tried: [],
            remainingMs: 1_000,
          };
          const target = distributor.choose(endpoints, call);
          if (target === undefined) throw new TypeError("no endpoint");
          const result = await all.get(target.id)!.methods[method](params);
          copies.push(`${self}->${target.id}`);
          distributor.onReturn?.(result, { ...call, endpoint: target });
          return result;
        },
      } as never;
    },
  });
  for (let i = 1; i <= count; i++) {
    const id = `s${i}`;
    const store = new SessionStore<Notes>({
      initial: () => ({ notes: [] }),
      methods: {
        note: (state, n: number) => state.notes.push(n),
        notes: (state) => state.notes,
      },
      readOnly: ["notes"],
      ttlMs: 1_000,
      now,
    });
    store.bound(peers(id), "notes", id);
    all.set(id, store);
  }
  const call = (id: string, method: string, ...args: unknown[]) =>
    all.get(id)!.methods[method](...args) as Promise<SessionAnswer>;
  return { all, down, copies, call };
}

Deno.test("a change reaches the backup before it is answered; the backup takes the session over with every acknowledged change and picks a backup of its own", async () => {
  const { all, down, copies, call } = stores(3);
  const opened = await call("s1", "session.open");
  const id = opened.value as string;
  assert.match(id, /^s1\./);
  const backup = opened.session.backup!;
  assert.ok(["s2", "s3"].includes(backup));
  for (let n = 1; n <= 3; n++) await call("s1", "note", id, n);
  // Reads are not copied.
  const before = copies.length;
  assert.deepEqual((await call("s1", "notes", id)).value, [1, 2, 3]);
  assert.equal(copies.length, before);
  assert.ok(copies.every((c) => c === `s1->${backup}`), `${copies}`);
  assert.deepEqual(all.get(backup)!.counts, { primary: 0, backup: 1 });
  // s1 dies: the client moves to the backup.
  down.add("s1");
  const moved = await call(backup, "note", id, 4);
  assert.equal(moved.value, 4);
  assert.equal(moved.session.primary, backup);
  const third = ["s2", "s3"].find((s) => s !== backup)!;
  assert.equal(moved.session.backup, third);
  assert.deepEqual((await call(third, "notes", id)).value, [1, 2, 3, 4]);
});

Deno.test("with no other server to take the copy, a change fails UNAVAILABLE and the session keeps its state; concurrent changes of a session run one at a time", async () => {
  const { down, call } = stores(2);
  const id = (await call("s1", "session.open")).value as string;
  down.add("s2");
  await assert.rejects(
    call("s1", "note", id, 1),
    (e) =>
      e instanceof RpcError && e.code === -32006 &&
      /no backup server took session .*no other server is bound under "notes" to hold a copy.*the change was not made/
        .test(e.message),
  );
  assert.deepEqual((await call("s1", "notes", id)).value, []);
  down.delete("s2");
  const results = await Promise.all(
    [1, 2, 3, 4, 5].map((n) => call("s1", "note", id, n)),
  );
  assert.deepEqual(results.map((r) => r.value), [1, 2, 3, 4, 5]);
  assert.deepEqual((await call("s2", "notes", id)).value, [1, 2, 3, 4, 5]);
});

Deno.test("a session expires ttlMs after its last call on its server and its backup; a closed one is gone from both", async () => {
  let now = 1_000_000;
  const { call } = stores(2, () => now);
  const id = (await call("s1", "session.open")).value as string;
  await call("s1", "note", id, 1);
  now += 900;
  await call("s1", "note", id, 2); // kept alive
  now += 900;
  assert.deepEqual((await call("s1", "notes", id)).value, [1, 2]);
  now += 1_100;
  await assert.rejects(
    call("s1", "notes", id),
    (e) =>
      e instanceof RpcError && e.code === -32016 && /expired/.test(e.message),
  );
  await assert.rejects(call("s2", "notes", id), /not held here/);
  const other = (await call("s1", "session.open")).value as string;
  await call("s1", "session.close", other);
  await assert.rejects(call("s1", "notes", other), /not held here/);
  await assert.rejects(call("s2", "notes", other), /not held here/);
});

Deno.test("an older copy never replaces a newer one; bad params and reserved names are refused", async () => {
  const { all } = stores(1);
  const replicate = all.get("s1")!.methods["session.replicate"];
  const copy = (version: number, notes: number[]) =>
    replicate({
      sessionId: "x.1",
      version,
      state: { notes },
      ttlMs: 1_000,
      primary: "s9",
    });
  assert.deepEqual(copy(5, [1, 2]), { version: 5 });
  assert.deepEqual(copy(4, [1]), { version: 5 });
  assert.throws(() => replicate({}), /Invalid params/);
  await assert.rejects(
    (async () => await all.get("s1")!.methods.note(42))(),
    /takes the session id first/,
  );
  assert.throws(
    () =>
      new SessionStore({ initial: () => 0, methods: { "session.x": () => 1 } }),
    /reserved/,
  );
  const unbound = new SessionStore({ initial: () => 0, methods: {} });
  await assert.rejects(
    (async () => await unbound.methods["session.open"]())(),
    /not bound: call bound/,
  );
});
