import assert from "node:assert/strict";
import { hashToken, newToken } from "../../protocol/auth.ts";
import type { RegistryStatus } from "../../protocol/registry.ts";
import { encodeCommand, RegistryState } from "../state.ts";
import {
  Dashboard,
  DASHBOARD_COOKIE,
  type DashboardSources,
  dashboardWarning,
  viewOf,
} from "./dashboard.ts";

/** A dashboard over a real RegistryState with names `billing` and `search`. */
async function fixture(authOn: boolean) {
  const state = new RegistryState();
  const apply = (command: Parameters<typeof encodeCommand>[0]) => {
    const { result } = state.apply(encodeCommand(command));
    assert.ok(result.ok, `${command.op}: ${JSON.stringify(result)}`);
  };
  for (const name of ["billing", "search"]) {
    apply({
      op: "bind",
      name,
      endpoint: { id: `${name}-1`, url: "tcp://127.0.0.1:9001" },
    });
  }
  const reader = newToken(), binder = newToken();
  for (
    const [t, permissions] of [[reader, ["read:billing"]], [
      binder,
      ["bind:zzz"],
    ]] as const
  ) {
    apply({
      op: "tokenCreate",
      token: {
        tokenId: t.tokenId,
        name: `t-${t.tokenId}`,
        hash: await hashToken(t.token),
        permissions: [...permissions],
        createdAt: 1,
      },
    });
  }
  const status = {
    id: "n1",
    role: "leader",
    term: 3,
    leader: "n1",
    revision: state.revision,
    commitIndex: 7,
    appliedIndex: 7,
    members: [{ id: "n1", self: true, reachable: true }],
  } as unknown as RegistryStatus;
  const sources: DashboardSources = {
    status: () => status,
    progress: () => new Map(),
    lastIndex: () => 7,
    state,
    leases: { load: () => null, remainingTimes: () => [] },
    authEnforced: () => authOn,
  };
  return { dashboard: new Dashboard(sources), reader, noRead: binder };
}

const get = (path: string, headers: Record<string, string> = {}) =>
  new Request(`http://127.0.0.1:9101${path}`, { headers });

/** The first `data:` event of an event stream, parsed. */
async function firstEvent(response: Response) {
  const reader = response.body!.getReader();
  let text = "";
  try {
    for (let i = 0; i < 50 && !text.includes("\n\n"); i++) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
  } finally {
    await reader.cancel();
  }
  const data = /^data: (.*)$/m.exec(text)?.[1];
  assert.ok(data !== undefined, `no data line in ${JSON.stringify(text)}`);
  return JSON.parse(data) as { names: { name: string }[]; leader: string };
}

Deno.test("dashboard: with auth off the page and the event stream answer anyone, with every name", async () => {
  const { dashboard } = await fixture(false);
  try {
    const page = await dashboard.handle(get("/"));
    assert.equal(page?.status, 200);
    assert.match(page!.headers.get("content-type")!, /text\/html/);
    await page!.body?.cancel();
    const events = await dashboard.handle(get("/events"));
    assert.equal(events?.status, 200);
    const view = await firstEvent(events!);
    assert.deepEqual(view.names.map((n) => n.name), ["billing", "search"]);
    assert.equal(view.leader, "n1");
    assert.equal(await dashboard.handle(get("/metrics")), null);
    assert.equal(
      (await dashboard.handle(new Request("http://x/", { method: "POST" })))
        ?.status,
      405,
    );
  } finally {
    dashboard.close();
  }
});

Deno.test("dashboard: with auth on, no token and an unknown token are 401 with what to do; a token for other names sees none", async () => {
  const { dashboard, noRead } = await fixture(true);
  try {
    const none = await dashboard.handle(get("/events"));
    assert.equal(none?.status, 401);
    assert.match(await none!.text(), /enforces client auth.*\?token=/);
    const unknown = await dashboard.handle(
      get("/", { authorization: `Bearer ${newToken().token}` }),
    );
    assert.equal(unknown?.status, 401);
    assert.match(await unknown!.text(), /not known to this registry/);
    // A token for other names sees the members and none of the names.
    const other = await dashboard.handle(
      get("/events", { authorization: `Bearer ${noRead.token}` }),
    );
    assert.equal(other?.status, 200);
    assert.deepEqual((await firstEvent(other!)).names, []);
  } finally {
    dashboard.close();
  }
});

Deno.test("dashboard: ?token= redirects without the token and sets an HttpOnly cookie; the cookie then shows only the names the token may read", async () => {
  const { dashboard, reader } = await fixture(true);
  try {
    const redirect = await dashboard.handle(
      get(`/dashboard?token=${encodeURIComponent(reader.token)}&x=1`),
    );
    assert.equal(redirect?.status, 303);
    assert.equal(redirect!.headers.get("location"), "/dashboard?x=1");
    const cookie = redirect!.headers.get("set-cookie")!;
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    const pair = cookie.split(";")[0];
    assert.ok(pair.startsWith(`${DASHBOARD_COOKIE}=`));
    const events = await dashboard.handle(get("/events", { cookie: pair }));
    assert.equal(events?.status, 200);
    const view = await firstEvent(events!);
    assert.deepEqual(view.names.map((n) => n.name), ["billing"]);
    const bearer = await dashboard.handle(
      get("/", { authorization: `Bearer ${reader.token}` }),
    );
    assert.equal(bearer?.status, 200);
    await bearer!.body?.cancel();
  } finally {
    dashboard.close();
  }
});

Deno.test("dashboard: on the leader, another member's commit is what the leader knows it holds (min of commit and match); applied stays unknown", () => {
  const status = {
    id: "n1",
    role: "leader",
    term: 3,
    leader: "n1",
    revision: 0,
    commitIndex: 9,
    appliedIndex: 9,
    members: [
      { id: "n1", self: true, reachable: true },
      { id: "n2", self: false, reachable: true },
      { id: "n3", self: false, reachable: true },
      { id: "n4", self: false, reachable: false },
    ],
  } as unknown as RegistryStatus;
  const view = viewOf({
    status: () => status,
    progress: () => new Map([["n2", { match: 12 }], ["n3", { match: 4 }]]),
    lastIndex: () => 12,
    state: new RegistryState(),
    leases: { load: () => null, remainingTimes: () => [] },
    authEnforced: () => false,
  });
  const byId = new Map(view.members.map((m) => [m.id, m]));
  assert.equal(byId.get("n1")!.commitIndex, 9);
  assert.equal(byId.get("n2")!.commitIndex, 9);
  assert.equal(byId.get("n2")!.matchIndex, 12);
  assert.equal(byId.get("n3")!.commitIndex, 4);
  assert.equal(byId.get("n3")!.lag, 8);
  // No progress for it (or a follower's view): unknown, not a guess.
  assert.equal(byId.get("n4")!.commitIndex, null);
  for (const id of ["n2", "n3", "n4"]) {
    assert.equal(byId.get(id)!.appliedIndex, null);
  }
});

Deno.test("dashboardWarning: a non-loopback --dashboard-listen is warned about, loopback is not", () => {
  assert.equal(dashboardWarning({ hostname: "127.0.0.1", port: 9465 }), null);
  assert.equal(dashboardWarning({ hostname: "::1", port: 9465 }), null);
  const warning = dashboardWarning({ hostname: "10.0.0.5", port: 9465 })!;
  assert.match(
    warning,
    /^WARNING: --dashboard-listen 10\.0\.0\.5:9465 is not a loopback address: .*plain HTTP; keep it behind a firewall or listen on 127\.0\.0\.1$/,
  );
});
