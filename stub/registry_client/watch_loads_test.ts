/**
 * Load notifications of a watch (`onLoads`): delivered to the watches that
 * asked, never into the updates, and a node from before them (which
 * refuses the `loads` param) still carries the watch, without loads.
 */

import assert from "node:assert/strict";
import { serve } from "../../adapter/deno/serve.ts";
import { INVALID_PARAMS, RpcError } from "../../rpc/errors.ts";
import type { RpcSession } from "../../rpc/server/server_connection.ts";
import {
  WATCH_EVENTS_NOTIFICATION,
  WATCH_LOADS_NOTIFICATION,
  type WatchEventsNotification,
  type WatchLoadsNotification,
} from "../../protocol/registry.ts";
import { makeEndpoint } from "../../protocol/registry.ts";
import { waitFor } from "../../testing/time.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { RegistryClient } from "./registry_client.ts";
import { WatchClient, type WatchUpdate } from "./watch.ts";
import type { EndpointLoad } from "../../protocol/registry.ts";

/**
 * How a node from before load notifications refused the `loads` param
 * (its params parser refuses unknown params; this is its message, word
 * for word, as a node of the previous commit answers).
 */
const OLD_REFUSAL =
  'Invalid params: "loads" is not a param of registry.watch, which takes { prefix, fromRevision?, watchId? }';

/** A fake node: records each watch call's params; `old` refuses `loads`. */
function fakeNode(old: boolean) {
  const calls: Record<string, unknown>[] = [];
  let refused = 0;
  const sessions: RpcSession[] = [];
  const watch = (p: Record<string, unknown>) => {
    calls.push(p);
    return { watchId: String(p.watchId), revision: 1, compactRevision: 1 };
  };
  const server = serve({
    methods: (session) => {
      sessions.push(session);
      return {
        "registry.watch": (p: Record<string, unknown>) => {
          if (old && p.loads !== undefined) {
            refused++;
            throw new RpcError(INVALID_PARAMS, OLD_REFUSAL);
          }
          return watch(p);
        },
      };
    },
  });
  const send = (watchId: string) => {
    const events: WatchEventsNotification = {
      watchId,
      revision: 2,
      events: [{
        type: "put",
        name: "hello",
        revision: 2,
        endpoint: makeEndpoint({ id: "a", url: "tcp://127.0.0.1:9001" }),
      }],
    };
    const loads: WatchLoadsNotification = {
      watchId,
      loads: [{ name: "hello", id: "a", load: 7 }],
    };
    for (const session of sessions) {
      session.notify(
        WATCH_EVENTS_NOTIFICATION,
        events as unknown as Record<string, unknown>,
      );
      if (old) continue; // it knows of no loads
      session.notify(
        WATCH_LOADS_NOTIFICATION,
        loads as unknown as Record<string, unknown>,
      );
    }
  };
  return { server, calls, send, refused: () => refused };
}

async function withWatches(
  old: boolean,
  test: (
    node: ReturnType<typeof fakeNode>,
    watches: WatchClient,
  ) => Promise<void>,
) {
  const node = fakeNode(old);
  const pool = new ConnectionPool();
  const registry = new RegistryClient([node.server.url], pool);
  const watches = new WatchClient(registry, { minBackoffMs: 10 });
  try {
    await test(node, watches);
  } finally {
    watches.close();
    registry.close();
    pool.close();
    await node.server.close();
  }
}

Deno.test("a watch with onLoads gets the loads; one without ignores them; updates carry none", async () => {
  await withWatches(false, async (node, watches) => {
    const withLoads: WatchUpdate[] = [];
    const loads: EndpointLoad[][] = [];
    const without: WatchUpdate[] = [];
    watches.watch(
      "hello",
      { onLoads: (l) => loads.push(l) },
      (u) => withLoads.push(u),
    );
    watches.watch("hello", {}, (u) => without.push(u));
    await waitFor(() => node.calls.length === 2, "both watches");
    assert.deepEqual(node.calls.map((c) => c.loads), [true, undefined]);
    for (const call of node.calls) node.send(String(call.watchId));
    await waitFor(
      () =>
        loads.length === 1 && withLoads.length === 1 && without.length === 1,
      "the updates",
    );
    assert.deepEqual(loads, [[{ name: "hello", id: "a", load: 7 }]]);
    assert.deepEqual(withLoads.map((u) => u.kind), ["events"]);
    assert.deepEqual(without.map((u) => u.kind), ["events"]);
  });
});

Deno.test("a node from before load notifications refuses loads: the watch carries on there without them", async () => {
  await withWatches(true, async (node, watches) => {
    const updates: WatchUpdate[] = [];
    const loads: EndpointLoad[][] = [];
    const watch = watches.watch(
      "hello",
      { onLoads: (l) => loads.push(l) },
      (u) => updates.push(u),
    );
    // The refused call is not recorded (its params failed); the retry is.
    await waitFor(() => node.calls.length === 1, "the watch");
    assert.equal(node.refused(), 1);
    assert.equal(node.calls[0].loads, undefined);
    assert.equal(watch.closed, false);
    node.send(String(node.calls[0].watchId));
    await waitFor(() => updates.length === 1, "the event");
    assert.deepEqual(updates.map((u) => u.kind), ["events"]);
    assert.deepEqual(loads, []);
    // A second watch on the same connection does not ask again.
    watches.watch("other", { onLoads: () => {} }, () => {});
    await waitFor(() => node.calls.length === 2, "the second watch");
    assert.equal(node.calls[1].loads, undefined);
    assert.equal(node.refused(), 1);
  });
});
