/**
 * `ClusterStub.notify` through the shared retry loop with its own rule: the
 * errors it ends with, what it does not touch (the retry budget, the
 * distributor's `onError`), and its fail-over to endpoints not tried yet.
 */

import assert from "node:assert/strict";
import { CANCELLED } from "../../rpc/errors.ts";
import { denoTcpDialer } from "../../adapter/deno/tcp.ts";
import { type RpcServer, serve } from "../../adapter/deno/serve.ts";
import { freePorts } from "../../testing/ports.ts";
import { waitFor } from "../../testing/time.ts";
import {
  type Endpoint,
  makeEndpoint,
  NO_ENDPOINTS,
} from "../../protocol/registry.ts";
import { NotSentError } from "./call_errors.ts";
import { fixedMap } from "./_test_util.ts";
import { ClusterStub, type StubOptions } from "./cluster_stub.ts";
import { ConnectionPool } from "../connection_pool.ts";
import { HealthBook } from "../cluster_map/endpoint_health.ts";
import type { CallInfo } from "../distributors/distributor.ts";
import { RetryBudget } from "./retry_budget.ts";

/** A server recording its notifications. */
function noteServer(notes: string[]): RpcServer {
  return serve({
    methods: {
      note: (text: string) => void notes.push(text),
      echo: (text: string) => text,
    },
  });
}

/** A stub of "svc" over `endpoints`, given to `fn`; all closed at the end. */
async function withStub(
  endpoints: Endpoint[],
  options: StubOptions,
  fn: (
    stub: ClusterStub,
    health: HealthBook,
    closed: AbortController,
  ) => Promise<void>,
): Promise<void> {
  const health = new HealthBook();
  const pool = new ConnectionPool({ dialer: denoTcpDialer });
  const closed = new AbortController();
  const map = fixedMap("svc", endpoints, health);
  try {
    await fn(
      new ClusterStub(
        "svc",
        { map, pool, health, closed: closed.signal },
        options,
      ),
      health,
      closed,
    );
  } finally {
    map.close();
    pool.close();
  }
}

Deno.test("a notification with nothing bound ends as NotSentError NO_ENDPOINTS naming the notification", async () => {
  await withStub([], {}, async (stub) => {
    await assert.rejects(stub.notify("note", ["hi"]), (error: unknown) => {
      assert.ok(error instanceof NotSentError, String(error));
      assert.equal(error.code, NO_ENDPOINTS);
      assert.equal(
        error.message,
        'No endpoints: no server of "svc" took the notification "svc.note"',
      );
      assert.deepEqual(error.data, { written: false, endpoint: null });
      return true;
    });
  });
});

Deno.test("a notification aborted, or of a closed client, is not sent: CANCELLED", async () => {
  const notes: string[] = [];
  const server = noteServer(notes);
  try {
    await withStub(
      [makeEndpoint({ id: "s1", url: server.url })],
      {},
      async (stub, _health, closed) => {
        await assert.rejects(
          stub.notify("note", ["a"], { signal: AbortSignal.abort() }),
          (error: unknown) => {
            assert.ok(error instanceof NotSentError, String(error));
            assert.equal(error.code, CANCELLED);
            assert.match(error.message, /aborted before it was sent/);
            return true;
          },
        );
        closed.abort();
        await assert.rejects(stub.notify("note", ["b"]), (error: unknown) => {
          assert.ok(error instanceof NotSentError, String(error));
          assert.equal(error.code, CANCELLED);
          assert.match(error.message, /its client is closed/);
          return true;
        });
      },
    );
    assert.deepEqual(notes, []);
  } finally {
    await server.close();
  }
});

Deno.test("a notification spends no retry budget, asks no onError, and the distributor sees it as not idempotent", async () => {
  const notes: string[] = [];
  const server = noteServer(notes);
  const budget = new RetryBudget();
  const seen: CallInfo[] = [];
  let onErrors = 0;
  try {
    await withStub(
      [makeEndpoint({ id: "s1", url: server.url })],
      {
        idempotent: true,
        retryBudget: budget,
        distributor: {
          choose: (candidates, info) => (seen.push(info), candidates[0]),
          onError: () => (onErrors++, "throw"),
        },
      },
      async (stub) => {
        const before = budget.balance;
        await stub.notify("note", ["hi"]);
        await waitFor(() => notes.includes("hi"), "the notification");
        assert.equal(budget.balance, before);
        assert.equal(seen.length, 1);
        assert.equal(seen[0].idempotent, false);
        assert.equal(seen[0].attempt, 0);
        assert.deepEqual(seen[0].tried, []);
        // A call does deposit in the budget.
        assert.equal(await stub.call("echo", ["x"]), "x");
        assert.ok(budget.balance > before, `${budget.balance} > ${before}`);
      },
    );
    assert.equal(onErrors, 0);
  } finally {
    await server.close();
  }
});

Deno.test("a notification whose server refuses the connection goes to one not tried yet", async () => {
  const notes: string[] = [];
  const server = noteServer(notes);
  const refused = `tcp://127.0.0.1:${freePorts(1)[0]}`;
  const chosen: string[] = [];
  try {
    await withStub(
      [
        makeEndpoint({ id: "refused", url: refused }),
        makeEndpoint({ id: "s1", url: server.url }),
      ],
      {
        distributor: {
          choose: (candidates, info) => {
            chosen.push(
              `${
                candidates.map((c) => c.id).join("+")
              } @${info.attempt} tried [${info.tried}]`,
            );
            return candidates[0];
          },
        },
      },
      async (stub) => {
        await stub.notify("note", ["hi"]);
        await waitFor(() => notes.includes("hi"), "the notification");
        assert.deepEqual(chosen, [
          "refused+s1 @0 tried []",
          "s1 @1 tried [refused]",
        ]);
      },
    );
    assert.deepEqual(notes, ["hi"]);
  } finally {
    await server.close();
  }
});

Deno.test("a notification every server refuses ends with the last refusal once each was tried once", async () => {
  const [a, b] = freePorts(2).map((port) => `tcp://127.0.0.1:${port}`);
  let chosen = 0;
  await withStub(
    [makeEndpoint({ id: "a", url: a }), makeEndpoint({ id: "b", url: b })],
    {
      maxAttempts: 5,
      distributor: { choose: (candidates) => (chosen++, candidates[0]) },
    },
    async (stub) => {
      await assert.rejects(stub.notify("note", ["hi"]), (error: unknown) => {
        assert.ok(error instanceof NotSentError, String(error));
        assert.equal(error.endpoint, b);
        assert.match(error.message, /^"svc\.note" was not sent to tcp:/);
        return true;
      });
    },
  );
  assert.equal(chosen, 2);
});
