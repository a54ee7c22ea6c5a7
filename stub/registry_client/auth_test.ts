/**
 * Tests of the registry client's `token`: against a fake registry with
 * access control (`testing/fake_auth_registry.ts`), `registry.authenticate` is the first
 * call on every connection (calls, the watch connection, reconnects),
 * calls wait for it, a refused token fails at once without trying other
 * nodes, and no token means no authenticate.
 */

import assert from "node:assert/strict";
import { PERMISSION_DENIED, UNAUTHENTICATED } from "../../rpc/errors.ts";
import { AUTH_METHODS, newToken } from "../../protocol/auth.ts";
import { REGISTRY_METHODS } from "../../protocol/registry.ts";
import { waitFor, within } from "../../testing/time.ts";
import { connect } from "../client.ts";
import { AuthenticationError } from "../authenticate.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { RegistryClient } from "./registry_client.ts";
import { fakeAuthRegistry } from "../../testing/fake_auth_registry.ts";

const AUTH = AUTH_METHODS.authenticate;
const LOOKUP = REGISTRY_METHODS.lookup;

Deno.test("with a token, registry.authenticate is the first call on a connection and calls issued meanwhile wait for it", async () => {
  const fake = fakeAuthRegistry({ authDelayMs: 150 });
  const client = connect(fake.url, { token: fake.admin, watch: false });
  try {
    const found = await within(
      Promise.all([
        client.lookup("a"),
        client.lookup("b"),
        client.registry.authStatus(),
      ]),
      10_000,
      "three calls",
    );
    assert.deepEqual(found.map((r) => "name" in r ? r.name : r.you?.name), [
      "a",
      "b",
      "bootstrap",
    ]);
    assert.equal(fake.calls.length, 1);
    assert.equal(fake.calls[0][0], AUTH);
    assert.deepEqual(fake.calls[0].slice(1).sort(), [
      AUTH_METHODS.authStatus,
      LOOKUP,
      LOOKUP,
    ]);
    // Authenticated once per connection, not per call.
    await client.lookup("c");
    assert.deepEqual(fake.calls[0].filter((m) => m === AUTH), [AUTH]);
  } finally {
    client.close();
    await fake.close();
  }
});

Deno.test("after the registry closes the connection, the new one authenticates first again", async () => {
  const fake = fakeAuthRegistry();
  const client = connect(fake.url, { token: fake.admin, watch: false });
  try {
    await client.lookup("a");
    fake.closeConnections();
    await waitFor(async () => {
      try {
        await client.lookup("b");
        return fake.calls.length >= 2;
      } catch {
        return false; // the call raced the close: try again
      }
    }, "a lookup on a new connection");
    for (const calls of fake.calls) assert.equal(calls[0], AUTH, `${calls}`);
    assert.deepEqual(fake.calls.at(-1), [AUTH, LOOKUP]);
  } finally {
    client.close();
    await fake.close();
  }
});

Deno.test("the watch connection authenticates before its first watch, after reconnects too", async () => {
  const fake = fakeAuthRegistry();
  const client = connect(fake.url, {
    token: fake.admin,
    minBackoffMs: 10,
    maxBackoffMs: 50,
  });
  try {
    const watch = client.watch("svc");
    const watchCalls = () =>
      fake.calls.filter((calls) => calls.includes(REGISTRY_METHODS.watch));
    await waitFor(() => watchCalls().length === 1, "the first watch");
    assert.deepEqual(watchCalls()[0], [AUTH, REGISTRY_METHODS.watch]);
    fake.closeConnections();
    await waitFor(() => watchCalls().length === 2, "the watch resumed");
    assert.deepEqual(watchCalls()[1], [AUTH, REGISTRY_METHODS.watch]);
    assert.equal(watch.closed, false);
    watch.close();
  } finally {
    client.close();
    await fake.close();
  }
});

Deno.test("a watch opened while the watch connection authenticates waits for it", async () => {
  const fake = fakeAuthRegistry({ authDelayMs: 300 });
  const client = connect(fake.url, { token: fake.admin });
  try {
    const first = client.watch("a");
    // The watch connection is open and authenticating now.
    await waitFor(() => fake.calls.length === 1, "the watch connection");
    const second = client.watch("b");
    const watchCalls = () =>
      fake.calls.find((calls) => calls.includes(REGISTRY_METHODS.watch));
    await waitFor(
      () =>
        watchCalls()?.filter((m) => m === REGISTRY_METHODS.watch).length === 2,
      "both watches",
    );
    assert.deepEqual(watchCalls(), [
      AUTH,
      REGISTRY_METHODS.watch,
      REGISTRY_METHODS.watch,
    ]);
    assert.equal(first.error, null);
    assert.equal(second.error, null);
    assert.equal(client.watches.size, 2);
  } finally {
    client.close();
    await fake.close();
  }
});

Deno.test("a refused token fails at once with AuthenticationError, without trying the other registry URLs", async () => {
  const fake = fakeAuthRegistry();
  const other = fakeAuthRegistry();
  const wrong = newToken();
  const client = connect([fake.url, other.url], {
    token: wrong.token,
    watch: false,
  });
  let connections = 0;
  try {
    for (
      const call of [
        () => client.lookup("a"),
        () => client.bind("a", { id: "x", url: "tcp://127.0.0.1:9" }),
      ]
    ) {
      const started = Date.now();
      const error = await call().then(
        () => assert.fail("the call succeeded"),
        (e) => e,
      );
      assert.ok(error instanceof AuthenticationError, String(error));
      assert.equal(error.code, UNAUTHENTICATED);
      assert.equal(error.tokenId, wrong.tokenId);
      assert.match(error.message, new RegExp(`refused token ${wrong.tokenId}`));
      assert.match(error.message, /unknown or revoked token/);
      assert.match(error.message, /rafter token create/);
      assert.ok(!error.message.includes(wrong.token), "no secret in messages");
      assert.ok(Date.now() - started < 2_000, "fails fast");
      // The node the call went to refused; the other was not tried.
      connections++;
      const all = [...fake.calls, ...other.calls];
      assert.equal(all.length, connections, JSON.stringify(all));
    }
    for (const calls of [...fake.calls, ...other.calls]) {
      assert.deepEqual(calls, [AUTH]);
    }
  } finally {
    client.close();
    await fake.close();
    await other.close();
  }
});

Deno.test("a watch whose token is refused ends with the error", async () => {
  const fake = fakeAuthRegistry();
  const client = connect(fake.url, { token: newToken().token });
  try {
    const watch = client.watch("svc");
    const error = await within(
      (async () => {
        try {
          for await (const _ of watch) assert.fail("an update came");
        } catch (error) {
          return error;
        }
        assert.fail("the watch ended without an error");
      })(),
      10_000,
      "the watch to end",
    );
    assert.ok(error instanceof AuthenticationError, String(error));
    assert.equal(watch.error, error);
    assert.equal(client.watches.size, 0);
  } finally {
    client.close();
    await fake.close();
  }
});

Deno.test("without a token no authenticate is sent, and UNAUTHENTICATED surfaces at once, not retried elsewhere", async () => {
  const fake = fakeAuthRegistry();
  const other = fakeAuthRegistry();
  const client = connect([fake.url, other.url], { watch: false });
  try {
    const started = Date.now();
    await assert.rejects(
      client.lookup("a"),
      (error: Error & { code: number }) => {
        assert.equal(error.code, UNAUTHENTICATED);
        assert.match(error.message, /call registry.authenticate first/);
        return true;
      },
    );
    assert.ok(Date.now() - started < 2_000);
    const all = [...fake.calls, ...other.calls];
    assert.deepEqual(all, [[LOOKUP]]);
  } finally {
    client.close();
    await fake.close();
    await other.close();
  }
});

Deno.test("PERMISSION_DENIED surfaces at once with its message and data, not retried on another node", async () => {
  const fake = fakeAuthRegistry({ deny: [AUTH_METHODS.tokenList] });
  const other = fakeAuthRegistry({ deny: [AUTH_METHODS.tokenList] });
  const token = fake.admin;
  // The other node knows the same token.
  other.tokens.set(...[...fake.tokens.entries()][0]);
  const pool = new ConnectionPool();
  const registry = new RegistryClient([fake.url, other.url], pool, { token });
  try {
    await assert.rejects(registry.tokenList(), (
      error: Error & {
        code: number;
        data: unknown;
      },
    ) => {
      assert.equal(error.code, PERMISSION_DENIED);
      assert.match(error.message, /needs admin/);
      assert.deepEqual(error.data, {
        method: AUTH_METHODS.tokenList,
        permission: "admin",
      });
      return true;
    });
    const all = [...fake.calls, ...other.calls];
    assert.deepEqual(all, [[AUTH, AUTH_METHODS.tokenList]]);
  } finally {
    registry.close();
    pool.close();
    await fake.close();
    await other.close();
  }
});

Deno.test("a malformed token is refused by connect(), without echoing it", () => {
  assert.throws(
    () => connect("tcp://127.0.0.1:1", { token: "hunter2-secret" }),
    (error: Error) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /rft_<16 hex digits>/);
      assert.ok(!error.message.includes("hunter2"));
      return true;
    },
  );
});

Deno.test("bindServer with a refused token fails its first bind at once", async () => {
  const fake = fakeAuthRegistry();
  const client = connect(fake.url, { token: newToken().token, watch: false });
  try {
    const started = Date.now();
    await assert.rejects(
      client.bindServer("svc", "tcp://127.0.0.1:9"),
      (error: Error) => {
        assert.ok(error instanceof AuthenticationError, String(error));
        return true;
      },
    );
    assert.ok(Date.now() - started < 2_000, "fails fast");
    assert.deepEqual(fake.calls, [[AUTH]]);
  } finally {
    client.close();
    await fake.close();
  }
});
