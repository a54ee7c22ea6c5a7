/**
 * A registry node's live dashboard: one HTML page (inline CSS and
 * script, no external assets) served at `/` and `/dashboard` on the
 * metrics port (`--metrics-listen`) or its own (`--dashboard-listen`),
 * and `GET /events`, a server-sent event stream of the node's view
 * (members, leader, every name with its endpoints). The node pushes a new
 * view when an applied entry changes the registry, when its Raft role or
 * leader changes, and (at most once a second) when reachability, lag or
 * lease times move; the browser never polls.
 *
 * When the node enforces client auth, the page and the stream want a
 * registry token (`Authorization: Bearer`, or `?token=` once, after which
 * an HttpOnly cookie carries it); the names shown are those the token may
 * read.
 *
 * @module
 */

import type { RegistryStatus } from "../../protocol/registry.ts";
import { permits } from "../../protocol/auth.ts";
import type { TcpAddress } from "../../rpc/transport/transport.ts";
import type { RegistryState } from "../state.ts";
import { listenHttp, type MetricsServer, plainPortWarning } from "./metrics.ts";

/** The cookie that carries the token after `?token=`. */
export const DASHBOARD_COOKIE = "rafter_dashboard";

/** Least time between two pushes of an unchanged-but-ticking view, ms. */
const TICK_MS = 1_000;
/** How long a burst of changes is gathered into one push, ms. */
const COALESCE_MS = 25;

/** One member as the dashboard shows it. */
export interface DashboardMember {
  id: string;
  self: boolean;
  /** Its role as this node knows it (exact for this node; inferred for others). */
  role: string;
  /** Its term: this node's own, or the term of the leader this node follows. */
  term: number | null;
  /**
   * This node's commit index; for another member, on the leader, the
   * entries known both committed and stored on it (the smaller of the
   * leader's commit index and its match index); else null.
   */
  commitIndex: number | null;
  /** This node's applied index; null for the others (not reported to it). */
  appliedIndex: number | null;
  /** The leader's match index for it (on the leader), or null. */
  matchIndex: number | null;
  /** Entries it is behind (leader's last index − match; own commit − applied), or null. */
  lag: number | null;
  reachable: boolean;
  lastHeardMsAgo: number | null;
  lastError: string | null;
  clientUrl: string | null;
}

/** One endpoint of a name. */
export interface DashboardEndpoint {
  id: string;
  url: string;
  attrs: Record<string, string>;
  state: string;
  load: number | null;
  weight: number;
  zone: string | null;
  leaseId: string | null;
  /** Time the lease has left on this node's clock, ms, or null. */
  leaseRemainingMs: number | null;
}

/** What the page shows, as one event carries it. */
export interface DashboardView {
  node: string;
  role: string;
  term: number;
  leader: string | null;
  revision: number;
  auth: boolean;
  members: DashboardMember[];
  names: { name: string; endpoints: DashboardEndpoint[] }[];
}

/**
 * The part of the registry's state the dashboard reads (a node's
 * {@link RegistryState}; an etcd front's copy of the bindings): the
 * names with their bindings, and the tokens when auth is enforced.
 */
export type DashboardState = Pick<
  RegistryState,
  "names" | "bindings" | "verifyToken" | "token"
>;

/** What the dashboard reads from its node. */
export interface DashboardSources {
  status(): RegistryStatus;
  /** On the leader, each other member's match index; empty elsewhere. */
  progress(): ReadonlyMap<string, { match: number }>;
  /** Index of the last entry of this node's log. */
  lastIndex(): number;
  state: DashboardState;
  leases: {
    load(id: string): number | null;
    remainingTimes(): [string, number][];
  };
  /** Whether the node enforces client auth now. */
  authEnforced(): boolean;
}

/** The view of `sources`, with the names `mayRead` allows. */
export function viewOf(
  sources: DashboardSources,
  mayRead: (name: string) => boolean = () => true,
): DashboardView {
  const status = sources.status();
  const progress = sources.progress();
  const lastIndex = sources.lastIndex();
  const members = status.members.map((member): DashboardMember => {
    const match = progress.get(member.id)?.match ?? null;
    const own = member.self;
    return {
      id: member.id,
      self: own,
      role: own
        ? status.role
        : member.id === status.leader
        ? "leader"
        : status.leader === null
        ? "unknown"
        : "follower",
      term: own || status.leader !== null ? status.term : null,
      commitIndex: own
        ? status.commitIndex
        : match === null
        ? null
        : Math.min(status.commitIndex, match),
      appliedIndex: own ? status.appliedIndex : null,
      matchIndex: own ? null : match,
      lag: own
        ? status.commitIndex - status.appliedIndex
        : match === null
        ? null
        : Math.max(0, lastIndex - match),
      reachable: own || member.reachable,
      lastHeardMsAgo: member.lastHeardMsAgo,
      lastError: member.lastError,
      clientUrl: member.clientUrl,
    };
  });
  const remaining = new Map(sources.leases.remainingTimes());
  const { state } = sources;
  const names = state.names().filter(({ name }) => mayRead(name)).map((
    { name },
  ) => ({
    name,
    endpoints: state.bindings(name).map((b): DashboardEndpoint => ({
      id: b.id,
      url: b.url,
      attrs: { ...b.attrs },
      state: b.state,
      load: b.leaseId === null ? null : sources.leases.load(b.leaseId),
      weight: b.weight,
      zone: b.zone,
      leaseId: b.leaseId,
      leaseRemainingMs: b.leaseId === null
        ? null
        : Math.round(remaining.get(b.leaseId) ?? 0),
    })),
  }));
  return {
    node: status.id,
    role: status.role,
    term: status.term,
    leader: status.leader,
    revision: status.revision,
    auth: sources.authEnforced(),
    members,
    names,
  };
}

/** A viewer's identity: null when auth is off, else its token id. */
type Viewer = { tokenId: string | null };

interface Client {
  viewer: Viewer;
  controller: ReadableStreamDefaultController<Uint8Array>;
  last: string;
}

const encoder = new TextEncoder();

/**
 * The dashboard of one node: {@link handle} answers its paths, {@link
 * changed} pushes a new view to every open stream, {@link close} ends
 * them (before the HTTP server shuts down, which waits for open streams).
 */
export class Dashboard {
  readonly #sources: DashboardSources;
  readonly #clients = new Set<Client>();
  #pending: ReturnType<typeof setTimeout> | undefined;
  #ticker: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  constructor(sources: DashboardSources) {
    this.#sources = sources;
  }

  /** How many event streams are open. */
  get streams(): number {
    return this.#clients.size;
  }

  /** Pushes the view soon (changes within 25 ms go out as one). */
  changed(): void {
    if (this.#closed || this.#clients.size === 0) return;
    this.#pending ??= setTimeout(() => {
      this.#pending = undefined;
      this.#push();
    }, COALESCE_MS);
  }

  /** Ends every stream and the timers. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#pending);
    clearInterval(this.#ticker);
    for (const client of this.#clients) {
      try {
        client.controller.close();
      } catch { /* already closed */ }
    }
    this.#clients.clear();
  }

  /**
   * The answer for `request` when its path is the dashboard's (`/`,
   * `/dashboard`, `/events`), or null for another path.
   */
  async handle(request: Request): Promise<Response | null> {
    const url = new URL(request.url);
    const path = url.pathname;
    if (path !== "/" && path !== "/dashboard" && path !== "/events") {
      return null;
    }
    if (request.method !== "GET" && request.method !== "HEAD") {
      return new Response("method not allowed: use GET\n", {
        status: 405,
        headers: { allow: "GET, HEAD" },
      });
    }
    const auth = await this.#authorize(request, url);
    if (auth instanceof Response) return auth;
    const headers = new Headers({ "cache-control": "no-store" });
    if (auth.cookie !== null) headers.set("set-cookie", auth.cookie);
    if (auth.fromQuery && path !== "/events") {
      // Keep the token out of the address bar and history.
      url.searchParams.delete("token");
      headers.set("location", url.pathname + url.search);
      return new Response(null, { status: 303, headers });
    }
    if (path === "/events") return this.#stream(auth.viewer, headers);
    headers.set("content-type", "text/html; charset=utf-8");
    headers.set(
      "content-security-policy",
      "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'",
    );
    return new Response(PAGE, { headers });
  }

  async #authorize(
    request: Request,
    url: URL,
  ): Promise<
    | Response
    | { viewer: Viewer; cookie: string | null; fromQuery: boolean }
  > {
    if (!this.#sources.authEnforced()) {
      return { viewer: { tokenId: null }, cookie: null, fromQuery: false };
    }
    const bearer = /^Bearer\s+(\S+)$/i.exec(
      request.headers.get("authorization") ?? "",
    )?.[1];
    const query = url.searchParams.get("token") ?? undefined;
    const cookie = cookieOf(request.headers.get("cookie"), DASHBOARD_COOKIE);
    const token = bearer ?? query ?? cookie;
    if (token === undefined) {
      return unauthorized(
        "unauthorized: this node enforces client auth; open /dashboard?token=<token> once (a registry token with read permission) or send Authorization: Bearer <token>",
      );
    }
    const record = await this.#sources.state.verifyToken(token);
    if (record === undefined) {
      return unauthorized(
        "unauthorized: that token is not known to this registry (revoked, mistyped, or of another cluster); ask an admin for one with read permission (rafter token create)",
      );
    }
    if (!record.permissions.some((p) => p === "admin" || /^\w+:/.test(p))) {
      return unauthorized(
        `unauthorized: token ${record.tokenId} has no read permission; ask an admin for one with read:<prefix> or read:*`,
      );
    }
    return {
      viewer: { tokenId: record.tokenId },
      cookie: token === cookie
        ? null
        : `${DASHBOARD_COOKIE}=${
          encodeURIComponent(token)
        }; HttpOnly; SameSite=Strict; Path=/`,
      fromQuery: token === query && token !== bearer,
    };
  }

  /** The view `viewer` may see, or null when its token was revoked. */
  #viewFor(viewer: Viewer): string | null {
    if (viewer.tokenId === null || !this.#sources.authEnforced()) {
      return JSON.stringify(viewOf(this.#sources));
    }
    const token = this.#sources.state.token(viewer.tokenId);
    if (token === undefined) return null;
    return JSON.stringify(
      viewOf(this.#sources, (name) => permits(token.permissions, "read", name)),
    );
  }

  #stream(viewer: Viewer, headers: Headers): Response {
    let client: Client | undefined;
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        client = { viewer, controller, last: "" };
        this.#clients.add(client);
        this.#send(client, true);
        this.#ticker ??= setInterval(() => this.#push(), TICK_MS);
      },
      cancel: () => {
        if (client !== undefined) this.#drop(client);
      },
    });
    headers.set("content-type", "text/event-stream; charset=utf-8");
    return new Response(body, { headers });
  }

  #push(): void {
    for (const client of this.#clients) this.#send(client, false);
  }

  /** Sends `client` the view if it changed (or a keep-alive comment). */
  #send(client: Client, first: boolean): void {
    const view = this.#viewFor(client.viewer);
    try {
      if (view === null) {
        client.controller.enqueue(
          encoder.encode("event: revoked\ndata: {}\n\n"),
        );
        client.controller.close();
        this.#drop(client);
        return;
      }
      if (view === client.last) {
        client.controller.enqueue(encoder.encode(": tick\n\n"));
        return;
      }
      client.last = view;
      client.controller.enqueue(
        encoder.encode(`${first ? "retry: 1000\n" : ""}data: ${view}\n\n`),
      );
    } catch {
      this.#drop(client);
    }
  }

  #drop(client: Client): void {
    this.#clients.delete(client);
    if (this.#clients.size === 0) {
      clearInterval(this.#ticker);
      this.#ticker = undefined;
    }
  }
}

function unauthorized(message: string): Response {
  return new Response(message + "\n", {
    status: 401,
    headers: {
      "content-type": "text/plain; charset=utf-8",
      "www-authenticate": 'Bearer realm="rafter dashboard"',
    },
  });
}

/** The value of cookie `name` in a `Cookie` header, or undefined. */
export function cookieOf(
  header: string | null,
  name: string,
): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * A running dashboard listener of its own (`--dashboard-listen`): its `url`
 * is `http://host:port/`, with the actual port.
 */
export type DashboardServer = MetricsServer;

/** Serves `dashboard` alone on `address` (404 for other paths). */
export function serveDashboard(
  address: TcpAddress,
  dashboard: Dashboard,
): DashboardServer {
  const server = listenHttp(
    address,
    async (request) =>
      await dashboard.handle(request) ??
        new Response(
          "not found: the dashboard is at / and its events at /events\n",
          { status: 404 },
        ),
  );
  return { url: `${server.origin}/`, close: server.close };
}

/**
 * The warning a node logs when its dashboard listens on a non-loopback
 * address, or null.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { dashboardWarning } from "./dashboard.ts";
 * assert.equal(dashboardWarning({ hostname: "127.0.0.1", port: 9465 }), null);
 * assert.match(dashboardWarning({ hostname: "0.0.0.0", port: 9465 })!, /WARNING: --dashboard-listen 0\.0\.0\.0:9465/);
 * ```
 */
export function dashboardWarning(address: TcpAddress): string | null {
  return plainPortWarning(
    "--dashboard-listen",
    address,
    "anyone who reaches it sees the members and, without --auth, every name and endpoint, and a token sent to it travels unencrypted",
  );
}

/** The page: inline CSS and script; it renders each view with textContent. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rafter registry</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2330; background: #f6f7f9; }
  h1 { font-size: 1.3em; margin: 0 0 .3em; }
  h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }
  table { border-collapse: collapse; background: #fff; min-width: 40em; }
  th, td { text-align: left; padding: .3em .7em; border-bottom: 1px solid #e3e6eb; }
  th { background: #eef0f4; font-weight: 600; }
  code { font: 12px ui-monospace, monospace; }
  .badge { display: inline-block; padding: 0 .5em; border-radius: .8em; font-size: .85em; }
  .leader { background: #dff3e4; color: #17692e; }
  .serving { background: #dff3e4; color: #17692e; }
  .draining { background: #fff1d6; color: #8a5a00; }
  .unhealthy, .down { background: #fbe0e0; color: #9b1c1c; }
  #conn.live { color: #17692e; } #conn.lost { color: #9b1c1c; }
  .muted { color: #6b7280; }
</style>
</head>
<body>
<h1>rafter registry — node <span id="node">…</span></h1>
<div>leader: <strong id="leader">…</strong> · term <span id="term">…</span> ·
revision <span id="revision">…</span> · <span id="conn">connecting…</span></div>
<h2>Members</h2>
<table><thead><tr><th>id</th><th>role</th><th>term</th><th>commit</th><th>applied</th>
<th>match</th><th>lag</th><th>reachable</th><th>last heard</th></tr></thead>
<tbody id="members"></tbody></table>
<h2>Names</h2>
<div id="names"><p class="muted">none bound</p></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function row(cells) {
  const tr = el("tr");
  for (const c of cells) {
    const td = el("td");
    if (c instanceof Node) td.append(c); else td.textContent = c === null || c === undefined ? "—" : String(c);
    tr.append(td);
  }
  return tr;
}
function render(v) {
  $("node").textContent = v.node;
  $("leader").textContent = v.leader === null ? "none (election under way)" : v.leader;
  $("term").textContent = v.term;
  $("revision").textContent = v.revision;
  const members = $("members");
  members.replaceChildren(...v.members.map((m) => {
    const tr = row([
      m.id + (m.self ? " (this node)" : ""),
      el("span", m.role, "badge " + (m.role === "leader" ? "leader" : "")),
      m.term, m.commitIndex, m.appliedIndex, m.matchIndex, m.lag,
      m.reachable ? el("span", "yes", "badge serving") : el("span", "no" + (m.lastError ? ": " + m.lastError : ""), "badge down"),
      m.lastHeardMsAgo === null ? null : m.lastHeardMsAgo + " ms ago",
    ]);
    tr.dataset.member = m.id;
    tr.dataset.role = m.role;
    return tr;
  }));
  const names = $("names");
  if (v.names.length === 0) { names.replaceChildren(el("p", "none bound", "muted")); return; }
  names.replaceChildren(...v.names.map((n) => {
    const section = el("section");
    section.dataset.name = n.name;
    section.append(el("h3", n.name + " (" + n.endpoints.length + ")"));
    const table = el("table");
    const head = el("tr");
    for (const h of ["id", "url", "state", "attributes", "load", "weight", "zone", "lease"]) head.append(el("th", h));
    table.append(head);
    for (const e of n.endpoints) {
      const attrs = Object.entries(e.attrs).map(([k, val]) => k + "=" + val).join(", ");
      const tr = row([
        e.id, el("code", e.url), el("span", e.state, "badge " + e.state), attrs || null,
        e.load, e.weight, e.zone,
        e.leaseId === null ? "permanent" : e.leaseId + " (" + e.leaseRemainingMs + " ms left)",
      ]);
      tr.dataset.endpoint = e.id;
      tr.dataset.state = e.state;
      table.append(tr);
    }
    section.append(table);
    return section;
  }));
}
const source = new EventSource("/events");
source.onopen = () => { $("conn").textContent = "live"; $("conn").className = "live"; };
source.onerror = () => { $("conn").textContent = "connection lost, retrying…"; $("conn").className = "lost"; };
source.onmessage = (event) => { render(JSON.parse(event.data)); document.body.dataset.ready = "1"; };
source.addEventListener("revoked", () => { source.close(); $("conn").textContent = "token revoked: reload with a valid token"; $("conn").className = "lost"; });
</script>
</body>
</html>
`;
