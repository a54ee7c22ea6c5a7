import assert from "node:assert/strict";
import {
  type Command,
  encodeCommand,
  type RegistrySnapshot,
  RegistryState,
  type TokenRecord,
} from "./state.ts";

const fixture = JSON.parse(
  await Deno.readTextFile(
    new URL("./testdata/pre_auth_state.json", import.meta.url),
  ),
) as { log: string[]; snapshot: RegistrySnapshot };

function applyAll(state: RegistryState, commands: Command[]) {
  return commands.map((command) => state.apply(encodeCommand(command)).result);
}

const HASH = "ab".repeat(32);

function token(tokenId: string, permissions: string[]): TokenRecord {
  return {
    tokenId,
    name: `t-${tokenId}`,
    hash: HASH,
    permissions,
    createdAt: 1,
  };
}

Deno.test("state: the log and snapshot of the version before auth still load, with auth off and no owners", () => {
  const replayed = new RegistryState();
  for (const entry of fixture.log) {
    assert.equal(replayed.apply(entry).result.ok, true, entry);
  }
  // The same state as that version built, snapshot for snapshot.
  assert.deepEqual(replayed.snapshot(), fixture.snapshot);
  const restored = RegistryState.restore(fixture.snapshot);
  assert.deepEqual(restored.snapshot(), fixture.snapshot);
  for (const state of [replayed, restored]) {
    assert.equal(state.authEnabled, false);
    assert.equal(state.bootstrapped, false);
    assert.equal(state.tokenCount, 0);
    assert.equal(state.lease("lease-a")?.owner, undefined);
    assert.equal(state.binding("billing", "b1")?.owner, undefined);
    // Anyone's command still changes them (no guard, as before).
    const result = state.apply(encodeCommand({
      op: "unbind",
      name: "billing",
      id: "b1",
    })).result;
    assert.deepEqual(result.ok && result.value.removed, 1);
  }
});

Deno.test("state: a snapshot with tokens, the switch and owners round-trips, through JSON", () => {
  const state = new RegistryState();
  applyAll(state, [
    {
      op: "authBootstrap",
      tokenId: "00000000000000aa",
      hash: HASH,
      enable: true,
      createdAt: 5,
    },
    { op: "tokenCreate", token: token("00000000000000bb", ["bind:billing"]) },
    { op: "leaseGrant", id: "l1", ttlMs: 10_000, owner: "00000000000000bb" },
    {
      op: "bind",
      name: "billing",
      endpoint: { id: "b1", url: "tcp://127.0.0.1:9001" },
      leaseId: "l1",
      owner: "00000000000000bb",
      guard: "00000000000000bb",
    },
  ]);
  const json = JSON.stringify(state.snapshot());
  assert.equal(state.snapshotJson(), json);
  const restored = RegistryState.restore(JSON.parse(json));
  assert.equal(JSON.stringify(restored.snapshot()), json);
  assert.equal(restored.authEnabled, true);
  assert.equal(restored.bootstrapped, true);
  assert.deepEqual(restored.tokens().map((t) => [t.name, t.permissions]), [
    ["bootstrap", ["admin"]],
    ["t-00000000000000bb", ["bind:billing"]],
  ]);
  assert.equal(restored.lease("l1")?.owner, "00000000000000bb");
  assert.equal(restored.binding("billing", "b1")?.owner, "00000000000000bb");
  // Ownership holds after the restore: another token's command is refused.
  const refused = restored.apply(encodeCommand({
    op: "leaseRevoke",
    id: "l1",
    guard: "00000000000000cc",
  })).result;
  assert.equal(refused.ok, false);
  assert.equal(!refused.ok && refused.error.code, -32013);
  assert.ok(restored.lease("l1") !== undefined);
});

Deno.test("state: authBootstrap applies once: two leaders in a row make one bootstrap token", () => {
  const state = new RegistryState();
  const [first, second] = applyAll(state, [
    {
      op: "authBootstrap",
      tokenId: "00000000000000aa",
      hash: HASH,
      enable: false,
      createdAt: 5,
    },
    {
      op: "authBootstrap",
      tokenId: "00000000000000ee",
      hash: "cd".repeat(32),
      enable: true,
      createdAt: 9,
    },
  ]);
  assert.equal(first.ok && first.value.token?.tokenId, "00000000000000aa");
  assert.equal(second.ok && second.value.token, undefined);
  assert.deepEqual(state.tokens().map((t) => t.tokenId), ["00000000000000aa"]);
  assert.equal(state.authEnabled, false);
  // The proposer's clock, not the replica's.
  assert.equal(state.token("00000000000000aa")?.createdAt, 5);
});

Deno.test("state: guards refuse other tokens' bindings and leases on every replica alike, changing nothing", () => {
  const replicas = [new RegistryState(), new RegistryState()];
  const commands: Command[] = [
    { op: "leaseGrant", id: "l1", ttlMs: 10_000, owner: "a" },
    {
      op: "bind",
      name: "x",
      endpoint: { id: "e", url: "tcp://127.0.0.1:9001" },
      leaseId: "l1",
      owner: "a",
      guard: "a",
    },
    { op: "unbind", name: "x", id: "e", guard: "b" },
    { op: "setState", name: "x", id: "e", state: "draining", guard: "b" },
    {
      op: "bind",
      name: "x",
      endpoint: { id: "e", url: "tcp://127.0.0.1:9002" },
      owner: "b",
      guard: "b",
    },
    {
      op: "bind",
      name: "x",
      endpoint: { id: "f", url: "tcp://127.0.0.1:9002" },
      leaseId: "l1",
      owner: "b",
      guard: "b",
    },
    { op: "leaseRevoke", id: "l1", guard: "b" },
  ];
  const results = replicas.map((state) => applyAll(state, commands));
  assert.deepEqual(results[0], results[1]);
  assert.deepEqual(
    results[0].slice(2).map((r) => !r.ok && r.error.code),
    [-32013, -32013, -32013, -32013, -32013],
  );
  assert.deepEqual(replicas[0].snapshot(), replicas[1].snapshot());
  assert.equal(replicas[0].revision, 1);
  assert.equal(replicas[0].binding("x", "e")?.url, "tcp://127.0.0.1:9001");
});

Deno.test("state: malformed auth commands and snapshots are refused whole", () => {
  const state = new RegistryState();
  for (
    const bad of [
      { op: "tokenCreate", token: { ...token("01", ["write:x"]) } },
      { op: "tokenCreate", token: { ...token("01", []) } },
      { op: "authSet", enabled: "yes" },
      { op: "authBootstrap", tokenId: "x", hash: HASH, enable: true },
      { op: "bind", name: "x", endpoint: { id: "e", url: "u" }, guard: 1 },
    ]
  ) {
    const result = state.apply(JSON.stringify(bad)).result;
    assert.equal(!result.ok && result.error.code, -32602, JSON.stringify(bad));
  }
  assert.equal(state.tokenCount, 0);
  assert.throws(
    () =>
      RegistryState.restore({
        ...new RegistryState().snapshot(),
        auth: { enabled: true, bootstrapped: true, tokens: [{ tokenId: 1 }] },
      } as unknown as RegistrySnapshot),
    /auth must be \{ enabled, bootstrapped, tokens \}/,
  );
});
