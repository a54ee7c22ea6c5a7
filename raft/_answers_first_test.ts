import assert from "node:assert/strict";
import { answersFirst } from "./_answers_first.ts";
import type { AppendRequest, Message } from "./types.ts";

const heartbeat = (to: string, commit: number): AppendRequest => ({
  type: "append",
  from: "n1",
  to,
  term: 2,
  prevLogIndex: 3,
  prevLogTerm: 2,
  entries: [],
  commit,
});

const macrotask = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("bare heartbeats leave one event-loop turn later, after the microtasks that answer clients; every other message at once, after the held ones", async () => {
  const sent: string[] = [];
  const network = answersFirst({
    send: (messages) =>
      sent.push(
        messages.map((m) =>
          `${m.type}>${m.to}${"commit" in m ? `@${m.commit}` : ""}`
        ).join(","),
      ),
  });
  network.send([heartbeat("n2", 4), heartbeat("n3", 4)]);
  network.send([]);
  await Promise.resolve(); // microtasks run first
  sent.push("answer");
  assert.deepEqual(sent, ["answer"]);
  await macrotask();
  assert.deepEqual(sent, ["answer", "append>n2@4,append>n3@4"]);

  // A message that is not a bare heartbeat flushes the held ones first.
  sent.length = 0;
  network.send([heartbeat("n2", 5)]);
  const withEntry: Message = {
    ...heartbeat("n2", 5),
    entries: [{ index: 4, term: 2, data: "x" }],
  };
  const withContext: Message = { ...heartbeat("n3", 5), context: "2:1" };
  network.send([withEntry]);
  network.send([withContext]);
  assert.deepEqual(sent, ["append>n2@5", "append>n2@5", "append>n3@5"]);
  await macrotask();
  assert.equal(sent.length, 3, "nothing left to send");

  // close drops what is held.
  network.send([heartbeat("n2", 6)]);
  network.close();
  await macrotask();
  assert.equal(sent.length, 3);
});
