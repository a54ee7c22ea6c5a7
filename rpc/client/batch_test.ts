import assert from "node:assert/strict";
import {
  CANCELLED,
  ConnectionError,
  DEADLINE_EXCEEDED,
  INVALID_PARAMS,
  METHOD_NOT_FOUND,
  RpcError,
} from "../errors.ts";
import { dial } from "../transport/dial.ts";
import { serve } from "../../adapter/deno/serve.ts";
import { withContext } from "../server/method.ts";
import { delay, within } from "../../testing/time.ts";

/** A server that records the calls it ran and what their signals saw. */
function recordingServer() {
  const ran: string[] = [];
  const aborted: string[] = [];
  const server = serve({
    onInternalError: () => {},
    methods: {
      add: (a: number, b: number) => (ran.push("add"), a + b),
      log: (text: string) => void ran.push(`log ${text}`),
      fail: () => {
        ran.push("fail");
        throw new RpcError(INVALID_PARAMS, "Invalid params: no");
      },
      slow: withContext(async ({ signal }, ms: number) => {
        ran.push("slow");
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms);
          signal.addEventListener("abort", () => {
            clearTimeout(timer);
            aborted.push(`slow ${(signal.reason as RpcError).code}`);
            resolve();
          });
        });
        return ms;
      }),
    },
  });
  return { server, ran, aborted };
}

Deno.test("batch: one result per request in order, server errors per member, notifications run and get undefined", async () => {
  const { server, ran } = recordingServer();
  const connection = await dial(server.url);
  try {
    const results = await connection.batch([
      { method: "add", params: [1, 2] },
      { method: "fail" },
      { method: "log", params: ["hi"], notification: true },
      { method: "missing" },
      { method: "add", params: [3, 4] },
    ]);
    assert.equal(results.length, 5);
    assert.deepEqual(results[0], { ok: true, value: 3 });
    assert.equal(results[1].ok, false);
    assert.equal(!results[1].ok && results[1].error.code, INVALID_PARAMS);
    assert.equal(
      !results[1].ok && results[1].error.message,
      "Invalid params: no",
    );
    assert.deepEqual(results[2], { ok: true, value: undefined });
    assert.equal(!results[3].ok && results[3].error.code, METHOD_NOT_FOUND);
    assert.deepEqual(results[4], { ok: true, value: 7 });
    assert.deepEqual(ran.sort(), ["add", "add", "fail", "log hi"]);
    // A batch of notifications only resolves once written.
    const sent = await connection.batch([{
      method: "log",
      params: ["a"],
      notification: true,
    }]);
    assert.deepEqual(sent, [{ ok: true, value: undefined }]);
    await within(
      (async () => {
        while (!ran.includes("log a")) await delay(5);
      })(),
      2_000,
      "the notification to run",
    );
  } finally {
    connection.close();
    await server.close();
  }
});

Deno.test("batch: goes out as one JSON array on one line; each request with an id carries the time left", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const got = (async () => {
    const conn = await listener.accept();
    const buffer = new Uint8Array(64 * 1024);
    let text = "";
    while (!text.includes("\n")) {
      const n = await conn.read(buffer);
      if (n === null) break;
      text += new TextDecoder().decode(buffer.subarray(0, n));
    }
    const requests = JSON.parse(text.slice(0, text.indexOf("\n")));
    const answer = requests.filter((r: { id?: number }) => r.id !== undefined)
      .map((r: { id: number }) => ({
        jsonrpc: "2.0",
        id: r.id,
        result: r.id * 10,
      }))
      .reverse();
    await conn.write(new TextEncoder().encode(JSON.stringify(answer) + "\n"));
    conn.close();
    return { text, requests };
  })();
  const connection = await dial(
    `tcp://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
  );
  try {
    const results = await connection.batch([
      { method: "a", params: [1] },
      { method: "b", notification: true },
      { method: "c", params: { x: 1 } },
    ], { timeoutMs: 4_000 });
    const { text, requests } = await got;
    assert.equal(text.indexOf("\n"), text.length - 1, "one line");
    assert.equal(requests.length, 3);
    assert.deepEqual(requests.map((r: { method: string }) => r.method), [
      "a",
      "b",
      "c",
    ]);
    assert.equal("id" in requests[1], false);
    assert.equal("timeoutMs" in requests[1], false);
    for (const r of [requests[0], requests[2]]) {
      assert.ok(r.timeoutMs > 3_900 && r.timeoutMs <= 4_000, `${r.timeoutMs}`);
    }
    // Answers in reverse order still land on their requests.
    assert.deepEqual(results, [
      { ok: true, value: requests[0].id * 10 },
      { ok: true, value: undefined },
      { ok: true, value: requests[2].id * 10 },
    ]);
  } finally {
    connection.close();
    listener.close();
  }
});

Deno.test("batch: the deadline and the signal cover the whole batch, and cancel only the unanswered members", async () => {
  const { server, aborted } = recordingServer();
  const connection = await dial(server.url);
  try {
    await assert.rejects(
      connection.batch([
        { method: "add", params: [1, 1] },
        { method: "slow", params: [5_000] },
      ], { timeoutMs: 150 }),
      (error) =>
        error instanceof RpcError && error.code === DEADLINE_EXCEEDED &&
        error.data !== undefined &&
        (error.data as { written: boolean }).written === true &&
        /a batch of 2 \("add", "slow"\)/.test(error.message),
    );
    await within(
      (async () => {
        while (aborted.length < 1) await delay(5);
      })(),
      2_000,
      "the slow member to be stopped",
    );
    const controller = new AbortController();
    const pending = connection.batch([{ method: "slow", params: [5_000] }], {
      signal: controller.signal,
    });
    await delay(50);
    controller.abort();
    await assert.rejects(
      pending,
      (error) => error instanceof RpcError && error.code === CANCELLED,
    );
    await within(
      (async () => {
        while (aborted.length < 2) await delay(5);
      })(),
      2_000,
      "the aborted member to be stopped",
    );
    assert.equal(aborted.length, 2);
    // The connection is fine afterwards.
    assert.deepEqual(
      await connection.batch([{ method: "add", params: [2, 2] }]),
      [
        { ok: true, value: 4 },
      ],
    );
    assert.equal(connection.pendingCalls, 0);
  } finally {
    connection.close();
    await server.close();
  }
});

Deno.test("batch: bad input is refused before anything is sent; a closed connection rejects with written=false", async () => {
  const { server, ran } = recordingServer();
  const connection = await dial(server.url);
  try {
    await assert.rejects(connection.batch([]), RangeError);
    await assert.rejects(
      connection.batch([
        { method: "add", params: [1, 2] },
        { method: "add", params: 5 as unknown as unknown[] },
      ]),
      (error) => error instanceof RpcError && error.code === INVALID_PARAMS,
    );
    await delay(50);
    assert.deepEqual(ran, []);
    assert.equal(connection.pendingCalls, 0);
    connection.close();
    await assert.rejects(
      connection.batch([{ method: "add", params: [1, 2] }]),
      (error) => error instanceof ConnectionError && error.written === false,
    );
  } finally {
    connection.close();
    await server.close();
  }
});

Deno.test("batch: the connection dying mid-batch rejects the batch with written=true", async () => {
  const { server } = recordingServer();
  const connection = await dial(server.url);
  try {
    const pending = connection.batch([
      { method: "add", params: [1, 1] },
      { method: "slow", params: [5_000] },
    ]);
    await delay(50);
    connection.close();
    await assert.rejects(
      pending,
      (error) => error instanceof ConnectionError && error.written === true,
    );
  } finally {
    await server.close();
  }
});
