import assert from "node:assert/strict";
import { dial } from "../rpc/transport/dial.ts";
import { RpcError } from "../rpc/errors.ts";
import type { Params } from "../rpc/message.ts";
import { serve } from "../adapter/deno/serve.ts";
import type { RpcSession } from "../rpc/server/server_connection.ts";
import { RawClient } from "../testing/rpc.ts";
import { within } from "../testing/time.ts";
import { shiftableWallClock, waitFor } from "../testing/time.ts";
import {
  COMPACTED,
  WATCH_CANCELLED,
  WATCH_CANCELLED_NOTIFICATION,
  WATCH_EVENTS_NOTIFICATION,
  WATCH_LOADS_NOTIFICATION,
  type WatchCancelledNotification,
  type WatchEventsNotification,
  type WatchLoadsNotification,
} from "../protocol/registry.ts";
import { encodeCommand, RegistryState } from "./state.ts";
import { WatchHub, type WatchHubOptions } from "./watch_hub.ts";

/** A real server whose `watch` method is a hub over a state the test changes. */
function harness(options: WatchHubOptions = {}, historyEvents = 10_000) {
  const state = new RegistryState({ historyEvents });
  const hub = new WatchHub(state, { progressIntervalMs: 0, ...options });
  const sessions: RpcSession[] = [];
  const server = serve({
    methods: (session) => (sessions.push(session), {
      watch: (
        params: {
          prefix: string;
          fromRevision?: number;
          watchId?: string;
          loads?: boolean;
        },
      ) => hub.watch(session, params),
      unwatch: (params: { watchId: string }) =>
        hub.unwatch(session, params.watchId),
    }),
  });
  let port = 9000;
  const bind = (name: string, id = `e${port}`) => {
    state.apply(encodeCommand({
      op: "bind",
      name,
      endpoint: { id, url: `tcp://127.0.0.1:${port++}` },
    }));
    hub.changed();
  };
  const stop = async () => {
    hub.close();
    await server.close();
  };
  return { state, hub, server, bind, stop, sessions };
}

/** A client that records every watch notification. */
async function watcher(url: string) {
  const events: WatchEventsNotification[] = [];
  const cancelled: WatchCancelledNotification[] = [];
  const connection = await dial(url, {
    onNotification: (method: string, params: Params | undefined) => {
      if (method === WATCH_EVENTS_NOTIFICATION) {
        events.push(params as unknown as WatchEventsNotification);
      } else if (method === WATCH_CANCELLED_NOTIFICATION) {
        cancelled.push(params as unknown as WatchCancelledNotification);
      }
    },
  });
  return { connection, events, cancelled };
}

function revisions(events: WatchEventsNotification[]): number[] {
  return events.flatMap((n) => n.events.map((e) => e.revision));
}

Deno.test("a watch from revision 1 replays the history in order, then follows live changes, none repeated", async () => {
  const h = harness();
  const client = await watcher(h.server.url);
  try {
    h.bind("a");
    h.bind("a");
    const result = await client.connection.call<
      { watchId: string; revision: number }
    >(
      "watch",
      { prefix: "", fromRevision: 1 },
    );
    assert.equal(result.revision, 2);
    h.bind("a");
    await waitFor(() => revisions(client.events).length === 3, "3 events");
    h.bind("b");
    await waitFor(() => revisions(client.events).length === 4, "4 events");
    assert.deepEqual(revisions(client.events), [1, 2, 3, 4]);
    assert.ok(client.events.every((n) => n.watchId === result.watchId));
    assert.equal(client.events.at(-1)!.revision, 4);
  } finally {
    client.connection.close();
    await h.stop();
  }
});

Deno.test("a watch without fromRevision gets only later changes, under its prefix only", async () => {
  const h = harness();
  const client = await watcher(h.server.url);
  try {
    h.bind("services/a");
    await client.connection.call("watch", {
      prefix: "services/",
      watchId: "mine",
    });
    h.bind("other");
    h.bind("services/b");
    await waitFor(() => client.events.length === 1, "an event");
    assert.equal(client.events[0].watchId, "mine");
    assert.deepEqual(client.events[0].events.map((e) => [e.name, e.revision]), [
      ["services/b", 3],
    ]);
  } finally {
    client.connection.close();
    await h.stop();
  }
});

Deno.test("a revision older than the history window gets COMPACTED with the oldest revision held", async () => {
  const h = harness({}, 2);
  const client = await watcher(h.server.url);
  try {
    for (let i = 0; i < 5; i++) h.bind("a");
    await assert.rejects(
      client.connection.call("watch", { prefix: "", fromRevision: 2 }),
      (error: unknown) => {
        assert.ok(error instanceof RpcError);
        assert.equal(error.code, COMPACTED);
        assert.deepEqual(error.data, { compactRevision: 4, revision: 5 });
        assert.match(error.message, /list the prefix \(registry\.list\)/);
        return true;
      },
    );
    await client.connection.call("watch", { prefix: "", fromRevision: 4 });
    await waitFor(() => revisions(client.events).length === 2, "2 events");
    assert.deepEqual(revisions(client.events), [4, 5]);
  } finally {
    client.connection.close();
    await h.stop();
  }
});

Deno.test("a watch id in use on the connection is refused; unwatch stops the events; a closed connection frees its watches", async () => {
  const h = harness();
  const client = await watcher(h.server.url);
  try {
    await client.connection.call("watch", { prefix: "", watchId: "w" });
    await assert.rejects(
      client.connection.call("watch", { prefix: "", watchId: "w" }),
      /already open on this connection/,
    );
    await assert.rejects(
      client.connection.call("watch", { prefix: "", watchId: "bad id!" }),
      /"watchId" must be/,
    );
    assert.equal(h.hub.count, 1);
    assert.equal(
      await client.connection.call("unwatch", { watchId: "w" }),
      true,
    );
    h.bind("a");
    await new Promise((r) => setTimeout(r, 30));
    assert.deepEqual(client.events, []);
    await client.connection.call("watch", { prefix: "" });
    assert.equal(h.hub.count, 1);
    client.connection.close();
    await waitFor(
      () => h.hub.count === 0,
      "the watch to go with its connection",
    );
  } finally {
    client.connection.close();
    await h.stop();
  }
});

Deno.test("progress notifications tell a quiet watcher the revision it has caught up to", async () => {
  const h = harness({ progressIntervalMs: 20 });
  const client = await watcher(h.server.url);
  try {
    await client.connection.call("watch", { prefix: "quiet/" });
    h.bind("busy");
    h.bind("busy");
    await waitFor(() => client.events.length > 0, "a progress notification");
    assert.deepEqual(client.events[0], {
      watchId: client.events[0].watchId,
      revision: 2,
      events: [],
    });
  } finally {
    client.connection.close();
    await h.stop();
  }
});

Deno.test("a watcher that does not read is throttled, never buffered without bound, then cancelled with the revision to resume from", async () => {
  const backlogBytes = 64 * 1024;
  const h = harness(
    { backlogBytes, stallMs: 300, maxEventsPerNotification: 50 },
    1_000_000,
  );
  const raw = await RawClient.connect(h.server.port);
  try {
    await raw.send(
      '{"jsonrpc":"2.0","method":"watch","params":{"prefix":"","watchId":"slow"},"id":1}',
    );
    assert.match((await raw.line())!, /"result":\{"watchId":"slow"/);
    // The client stops reading; the node keeps changing.
    const [session] = h.sessions;
    let maxQueued = 0;
    const deadline = Date.now() + 10_000;
    while (h.hub.count > 0 && Date.now() < deadline) {
      for (let i = 0; i < 200; i++) {
        h.bind("svc", `id-${i % 50}-${h.state.revision}`);
        maxQueued = Math.max(maxQueued, session.queuedBytes);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.equal(h.hub.count, 0, "the slow watch was cancelled");
    // Now read everything: events in order, then the cancellation.
    const lines: string[] = [];
    for (;;) {
      const line = await raw.line(2_000).catch(() => null);
      if (line === null) break;
      lines.push(line);
      if (line.includes(WATCH_CANCELLED_NOTIFICATION)) break;
    }
    const last = JSON.parse(lines.at(-1)!);
    assert.equal(last.method, WATCH_CANCELLED_NOTIFICATION);
    assert.equal(last.params.code, WATCH_CANCELLED);
    assert.match(last.params.message, /read too slowly/, last.params.message);
    const delivered = lines.slice(0, -1).map((l) =>
      JSON.parse(l).params as WatchEventsNotification
    );
    const seen = revisions(delivered);
    assert.deepEqual(seen, [...seen].sort((a, b) => a - b));
    assert.equal(new Set(seen).size, seen.length);
    assert.equal(last.params.resumeRevision, seen.at(-1)! + 1);
    // The node never queued much more than the limit (one notification of
    // 50 events beyond it), though it produced far more than it sent.
    const produced = h.state.revision;
    assert.ok(seen.length < produced, `${seen.length} of ${produced} sent`);
    assert.ok(maxQueued > 0);
    assert.ok(
      maxQueued < backlogBytes + 64 * 1024,
      `${maxQueued} bytes queued`,
    );
  } finally {
    raw.close();
    await h.stop();
  }
});

Deno.test("closing the hub cancels every watch, telling watchers to go to another node", async () => {
  const h = harness();
  const client = await watcher(h.server.url);
  try {
    await client.connection.call("watch", { prefix: "" });
    h.hub.close();
    await within(
      waitFor(() => client.cancelled.length === 1, "the cancellation"),
      5_000,
      "cancel",
    );
    assert.match(
      client.cancelled[0].message,
      /shutting down; watch through another node/,
    );
    await assert.rejects(
      client.connection.call("watch", { prefix: "" }),
      /shutting down/,
    );
  } finally {
    client.connection.close();
    await h.stop();
  }
});

Deno.test("a wall clock jumping an hour forward does not cancel a watcher that is briefly backed up", async () => {
  const backlogBytes = 16 * 1024;
  const wall = shiftableWallClock();
  const h = harness(
    { backlogBytes, stallMs: 60_000, maxEventsPerNotification: 50 },
    1_000_000,
  );
  const raw = await RawClient.connect(h.server.port);
  try {
    await raw.send(
      '{"jsonrpc":"2.0","method":"watch","params":{"prefix":"","watchId":"w"},"id":1}',
    );
    assert.match((await raw.line())!, /"result":\{"watchId":"w"/);
    // The client stops reading until the node holds back its events.
    const [session] = h.sessions;
    await waitFor(
      async () => {
        for (let i = 0; i < 200; i++) h.bind("svc", `id-${i % 50}`);
        await new Promise((r) => setTimeout(r, 5));
        return session.queuedBytes > backlogBytes;
      },
      "the watcher's backlog to pass the limit",
      10_000,
    );
    wall.offsetMs = 3_600_000;
    for (let round = 0; round < 10; round++) {
      h.bind("svc", "id-after-jump");
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(h.hub.count, 1, "the watch was cancelled by the jump");
  } finally {
    wall.restore();
    raw.close();
    await h.stop();
  }
});

Deno.test("a watch with loads: true gets load changes under its prefix; one without gets none; put events carry the current load", async () => {
  const loads = new Map<string, number>();
  const h = harness({ loadOf: (leaseId) => loads.get(leaseId) ?? null });
  const seen: WatchLoadsNotification[] = [];
  const events: WatchEventsNotification[] = [];
  const withLoads = await dial(h.server.url, {
    onNotification: (method: string, params: Params | undefined) => {
      if (method === WATCH_LOADS_NOTIFICATION) {
        seen.push(params as unknown as WatchLoadsNotification);
      } else if (method === WATCH_EVENTS_NOTIFICATION) {
        events.push(params as unknown as WatchEventsNotification);
      }
    },
  });
  const plain = await watcher(h.server.url);
  const other: string[] = [];
  const otherConnection = await dial(h.server.url, {
    onNotification: (method: string) => other.push(method),
  });
  try {
    await withLoads.call("watch", {
      prefix: "svc",
      watchId: "w",
      loads: true,
    });
    await plain.connection.call("watch", { prefix: "svc", watchId: "p" });
    await otherConnection.call("watch", {
      prefix: "elsewhere",
      watchId: "o",
      loads: true,
    });
    h.hub.loadsChanged([
      { name: "svc", id: "a", load: 3 },
      { name: "nope", id: "b", load: 1 },
    ]);
    await waitFor(() => seen.length === 1, "a loads notification");
    assert.deepEqual(seen[0], {
      watchId: "w",
      loads: [{ name: "svc", id: "a", load: 3 }],
    });
    // A put of a binding on a lease goes out with the lease's load now.
    loads.set("L1", 7);
    h.state.apply(encodeCommand({ op: "leaseGrant", id: "L1", ttlMs: 5_000 }));
    h.state.apply(encodeCommand({
      op: "bind",
      name: "svc",
      endpoint: { id: "a", url: "tcp://127.0.0.1:9100" },
      leaseId: "L1",
    }));
    h.hub.changed();
    await waitFor(
      () => events.length === 1 && plain.events.length === 1,
      "the put",
    );
    assert.equal(events[0].events[0].endpoint.load, 7);
    assert.equal(plain.events[0].events[0].endpoint.load, 7);
    // History keeps none: the load is volatile.
    assert.equal(h.state.eventsFrom(1)![0].events[0].endpoint.load, null);
    h.hub.loadsChanged([{ name: "svc", id: "a", load: 1 }]);
    await waitFor(() => seen.length === 2, "the second loads notification");
    // Neither the plain watch nor the watch of another prefix got loads.
    await withLoads.call("rpc.ping").catch(() => {});
    assert.deepEqual(other, []);
    assert.equal(plain.events.length, 1);
  } finally {
    withLoads.close();
    plain.connection.close();
    otherConnection.close();
    await h.stop();
  }
});
