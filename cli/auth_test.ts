/**
 * Tests of the CLI's access control, in process (`runCli`): `--token` and
 * `RAFTER_TOKEN`, `rafter auth` and `rafter token` against a fake registry
 * with access control, and the errors (exit 5 and 6) that say what is
 * missing and how to fix it.
 */

import assert from "node:assert/strict";
import { AUTH_METHODS, newToken, tokenIdOf } from "../protocol/auth.ts";
import {
  fakeAuthRegistry,
  tokenServer,
} from "../testing/fake_auth_registry.ts";
import { REGISTRY_METHODS } from "../protocol/registry.ts";
import { waitFor } from "../testing/time.ts";
import { EXIT, runCli } from "./main.ts";

interface Ran {
  code: number;
  out: string[];
  err: string[];
}

async function run(
  argv: string[],
  env: Record<string, string> = {},
): Promise<Ran> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli([...argv, "--timeout-ms", "3000"], {
    out: (line) => out.push(line),
    err: (line) => err.push(line),
    env: (name) => env[name],
  });
  return { code, out, err };
}

function expect(ran: Ran, code: number): void {
  assert.equal(
    ran.code,
    code,
    `exit ${ran.code}, wanted ${code}\nout:\n${ran.out.join("\n")}\nerr:\n${
      ran.err.join("\n")
    }`,
  );
}

Deno.test("rafter token create prints the token alone on stdout, once, and the registry knows it", async () => {
  const fake = fakeAuthRegistry();
  try {
    const env = { RAFTER_REGISTRY: fake.url, RAFTER_TOKEN: fake.admin };
    const ran = await run(
      [
        "token",
        "create",
        "billing-servers",
        "--perm",
        "read:billing",
        "--perm",
        "bind:billing*",
      ],
      env,
    );
    expect(ran, EXIT.ok);
    assert.equal(ran.out.length, 1);
    const token = ran.out[0];
    const tokenId = tokenIdOf(token);
    assert.ok(tokenId !== null, `not a token: ${token}`);
    assert.match(ran.err.join("\n"), /not shown again/);
    assert.match(ran.err.join("\n"), /read:billing, bind:billing/);
    assert.deepEqual(fake.tokens.get(tokenId)?.permissions, [
      "read:billing",
      "bind:billing",
    ]);
    assert.equal(fake.tokens.get(tokenId)?.token, token);
    // Each command authenticated first.
    for (const calls of fake.calls) {
      assert.equal(calls[0], AUTH_METHODS.authenticate);
    }

    const json = await run(
      ["token", "create", "reader", "--perm", "read:*", "--json"],
      env,
    );
    expect(json, EXIT.ok);
    const made = JSON.parse(json.out.join("\n"));
    assert.equal(tokenIdOf(made.token), made.tokenId);
    assert.deepEqual(made.permissions, ["read:*"]);

    const listed = await run(["token", "list"], env);
    expect(listed, EXIT.ok);
    const text = listed.out.join("\n");
    assert.match(text, /^TOKEN_ID +NAME +PERMISSIONS +CREATED/);
    assert.match(
      text,
      new RegExp(`${tokenId} +billing-servers +read:billing,bind:billing`),
    );
    assert.ok(!text.includes(token), "no secret in token list");
    assert.ok(!text.includes(fake.admin), "no secret in token list");

    const revoked = await run(["token", "revoke", tokenId], env);
    expect(revoked, EXIT.ok);
    assert.match(revoked.out[0], new RegExp(`revoked token ${tokenId}`));
    assert.equal(fake.tokens.has(tokenId), false);
    expect(await run(["token", "revoke", tokenId], env), EXIT.notFound);
  } finally {
    await fake.close();
  }
});

Deno.test("rafter token create refuses a bad name, no --perm, a bad permission, and revoke a token in place of its id", async () => {
  const env = { RAFTER_REGISTRY: "tcp://127.0.0.1:1" };
  const cases: [string[], RegExp][] = [
    [["token", "create", "a b", "--perm", "admin"], /NAME must be/],
    [["token", "create", "x"], /at least one --perm/],
    [["token", "create", "x", "--perm", "write:x"], /read:<prefix>/],
    [["token", "revoke", newToken().token], /not a token/],
  ];
  for (const [argv, message] of cases) {
    const ran = await run(argv, env);
    expect(ran, EXIT.usage);
    assert.match(ran.err.join("\n"), message);
  }
});

Deno.test("a command with no token against a registry with auth on exits 5 and says to set RAFTER_TOKEN", async () => {
  const fake = fakeAuthRegistry();
  try {
    const ran = await run(["ls"], { RAFTER_REGISTRY: fake.url });
    expect(ran, EXIT.unauthenticated);
    const text = ran.err.join("\n");
    assert.match(text, /gave no token: set RAFTER_TOKEN \(or --token\)/);
    assert.match(text, /ask an admin: rafter token create NAME --perm/);
    assert.deepEqual(fake.calls, [["registry.list"]]);
  } finally {
    await fake.close();
  }
});

Deno.test("rafter status against a registry with auth on and no token exits 5 and says so, not 'start a registry'", async () => {
  const fake = fakeAuthRegistry();
  try {
    const ran = await run(["status"], { RAFTER_REGISTRY: fake.url });
    expect(ran, EXIT.unauthenticated);
    const text = ran.err.join("\n");
    assert.match(text, /gave no token: set RAFTER_TOKEN \(or --token\)/);
    assert.doesNotMatch(text, /Start a registry/);
  } finally {
    await fake.close();
  }
});

Deno.test("a refused token exits 5, naming where it came from and its id, never the secret", async () => {
  const fake = fakeAuthRegistry();
  try {
    const wrong = newToken();
    const ran = await run(["ls"], {
      RAFTER_REGISTRY: fake.url,
      RAFTER_TOKEN: wrong.token,
    });
    expect(ran, EXIT.unauthenticated);
    const text = ran.err.join("\n");
    assert.match(
      text,
      new RegExp(
        `refused the token from RAFTER_TOKEN \\(id ${wrong.tokenId}\\)`,
      ),
    );
    assert.match(text, /unknown or revoked token/);
    assert.match(text, /set RAFTER_TOKEN to a valid one/);
    assert.ok(!text.includes(wrong.token));
    // --token wins over RAFTER_TOKEN.
    const good = await run(["auth", "status", "--token", fake.admin], {
      RAFTER_REGISTRY: fake.url,
      RAFTER_TOKEN: wrong.token,
    });
    expect(good, EXIT.ok);
    assert.match(
      good.out.join("\n"),
      /you: token [0-9a-f]{16} "bootstrap" \(admin\)/,
    );
  } finally {
    await fake.close();
  }
});

Deno.test("a token without the permission exits 6 and says which permission to get", async () => {
  const fake = fakeAuthRegistry({ deny: [AUTH_METHODS.tokenList] });
  try {
    const ran = await run(["token", "list"], {
      RAFTER_REGISTRY: fake.url,
      RAFTER_TOKEN: fake.admin,
    });
    expect(ran, EXIT.permissionDenied);
    const text = ran.err.join("\n");
    assert.match(text, /needs admin/);
    assert.match(text, /set RAFTER_TOKEN to a token with admin/);
    assert.match(text, /ask an admin: rafter token create NAME --perm admin/);
    const json = await run(["token", "list", "--json"], {
      RAFTER_REGISTRY: fake.url,
      RAFTER_TOKEN: fake.admin,
    });
    expect(json, EXIT.permissionDenied);
    assert.equal(JSON.parse(json.err[0]).error.data.permission, "admin");
  } finally {
    await fake.close();
  }
});

Deno.test("a malformed RAFTER_TOKEN or --token is a usage error that does not print it", async () => {
  for (
    const [argv, env, source] of [
      [["ls"], { RAFTER_TOKEN: "hunter2" }, "RAFTER_TOKEN"],
      [["ls", "--token", "hunter2"], {}, "--token"],
    ] as const
  ) {
    const ran = await run([...argv], { ...env });
    expect(ran, EXIT.usage);
    const text = ran.err.join("\n");
    assert.match(text, new RegExp(`${source} is not a Rafter token`));
    assert.ok(!text.includes("hunter2"));
  }
});

Deno.test("rafter auth enable, disable and status print the state", async () => {
  const fake = fakeAuthRegistry();
  try {
    const env = { RAFTER_REGISTRY: fake.url, RAFTER_TOKEN: fake.admin };
    const off = await run(["auth", "disable"], env);
    expect(off, EXIT.ok);
    assert.match(off.out[0], /^access control: off/);
    const status = await run(["auth", "status", "--json"], env);
    expect(status, EXIT.ok);
    assert.equal(JSON.parse(status.out.join("\n")).enabled, false);
    const on = await run(["auth", "enable"], env);
    expect(on, EXIT.ok);
    assert.match(
      on.out[0],
      /^access control: on \(turned on for the cluster\)/,
    );
    assert.match(on.out.join("\n"), /tokens: 1/);
  } finally {
    await fake.close();
  }
});

Deno.test("rafter --help lists the auth, token and cert commands, and the exit codes 5 and 6", async () => {
  const ran = await run(["--help"]);
  const text = ran.out.join("\n");
  for (
    const line of [
      "auth status",
      "auth enable",
      "token create NAME",
      "token revoke TOKEN_ID",
      "cert ca",
      "cert member ID",
      "cert server NAME",
      "cert client NAME",
      "--token TOKEN",
      "5 no valid token",
    ]
  ) {
    assert.ok(text.includes(line), `no "${line}" in:\n${text}`);
  }
  const group = await run(["token", "--help"]);
  assert.match(
    group.out.join("\n"),
    /usage: rafter token <create\|list\|revoke>/,
  );
  const one = await run(["cert", "member", "--help"]);
  assert.match(one.out.join("\n"), /rafter:\/\/member\/ID/);
});

Deno.test("rafter watch authenticates its watch connection with the token", async () => {
  const fake = fakeAuthRegistry();
  const stop = new AbortController();
  try {
    const out: string[] = [];
    const err: string[] = [];
    const env: Record<string, string> = {
      RAFTER_REGISTRY: fake.url,
      RAFTER_TOKEN: fake.admin,
    };
    const running = runCli(["watch", "svc"], {
      out: (line) => out.push(line),
      err: (line) => err.push(line),
      env: (name) => env[name],
      signal: stop.signal,
    });
    const watchCalls = () =>
      fake.calls.find((calls) => calls.includes(REGISTRY_METHODS.watch));
    await waitFor(() => watchCalls(), "the watch call");
    stop.abort();
    assert.equal(await running, EXIT.interrupted, err.join("\n"));
    assert.deepEqual(watchCalls()?.slice(0, 2), [
      AUTH_METHODS.authenticate,
      REGISTRY_METHODS.watch,
    ]);
    for (const calls of fake.calls) {
      assert.equal(calls[0], AUTH_METHODS.authenticate);
    }
  } finally {
    stop.abort();
    await fake.close();
  }
});

Deno.test("rafter watch with a refused token exits 5", async () => {
  const fake = fakeAuthRegistry();
  try {
    const ran = await run(["watch", "svc"], {
      RAFTER_REGISTRY: fake.url,
      RAFTER_TOKEN: newToken().token,
    });
    expect(ran, EXIT.unauthenticated);
    assert.match(ran.err.join("\n"), /refused the token from RAFTER_TOKEN/);
  } finally {
    await fake.close();
  }
});

Deno.test("rafter call presents RAFTER_SERVER_TOKEN (or --server-token) to the server; a refused one exits 5 naming it", async () => {
  const { server, calls: seen } = tokenServer("s3cret");
  const fake = fakeAuthRegistry({ endpoints: { svc: [server.url] } });
  try {
    const env = { RAFTER_REGISTRY: fake.url, RAFTER_TOKEN: fake.admin };
    const good = await run(["call", "svc", "echo", '["hi"]'], {
      ...env,
      RAFTER_SERVER_TOKEN: "s3cret",
    });
    expect(good, EXIT.ok);
    assert.equal(JSON.parse(good.out.join("\n")), "hi");
    assert.deepEqual(seen.at(-1), ["rpc.authenticate", "echo"]);
    const option = await run([
      "call",
      "svc",
      "echo",
      '["there"]',
      "--server-token",
      "s3cret",
    ], env);
    expect(option, EXIT.ok);
    assert.equal(JSON.parse(option.out.join("\n")), "there");

    const bad = await run(["call", "svc", "echo", '["hi"]'], {
      ...env,
      RAFTER_SERVER_TOKEN: "wrong",
    });
    expect(bad, EXIT.unauthenticated);
    const text = bad.err.join("\n");
    assert.match(text, /bad token/);
    assert.match(text, /set RAFTER_SERVER_TOKEN \(or --server-token\)/);
    assert.deepEqual(seen.at(-1), ["rpc.authenticate"]);
    // The server token never reached the registry.
    assert.ok(!fake.calls.flat().includes("rpc.authenticate"));
  } finally {
    await server.close();
    await fake.close();
  }
});
