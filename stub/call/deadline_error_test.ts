import assert from "node:assert/strict";
import { CONNECTION_FAILED, DEADLINE_EXCEEDED } from "../../rpc/errors.ts";
import { AmbiguousError, NotSentError } from "./call_errors.ts";
import { deadlineError } from "./outcome.ts";

const s1 = { id: "s1", url: "tcp://127.0.0.1:9001" };
const s2 = { id: "s2", url: "tcp://127.0.0.1:9002" };

Deno.test("deadlineError names what the call waited for: the endpoints and why, or the registry, or nothing", () => {
  // Sent to two endpoints (a hedge), no answer.
  const timedOut = new AmbiguousError("no answer", {
    code: DEADLINE_EXCEEDED,
    endpoint: s2.url,
  });
  const hedged = deadlineError('"a.b"', 2000, s1.url, timedOut, undefined, [
    s1,
    s2,
  ]);
  assert.equal(
    hedged.message,
    `Deadline exceeded: "a.b" did not get an answer within 2000 ms, waiting for endpoint s1 at ${s1.url} and endpoint s2 at ${s2.url} (sent, no answer: the server may be stopped or overloaded); it may have run there`,
  );
  assert.deepEqual(hedged.data, {
    waitingFor: "endpoint",
    endpoints: [s1, s2],
    written: true,
    endpoint: s1.url,
  });
  // Not connected in time.
  const connecting = new NotSentError("could not connect", {
    code: DEADLINE_EXCEEDED,
    endpoint: s1.url,
    data: { step: `connecting to ${s1.url}` },
  });
  assert.equal(
    deadlineError('"a.b"', 150, null, connecting, undefined, [s1]).message,
    `Deadline exceeded: "a.b" did not get an answer within 150 ms, waiting for endpoint s1 at ${s1.url} (not sent: the connection did not open in time; is the server up and reachable?)`,
  );
  // The registry's time: the lookup, even after an attempt on s1.
  const lookingUp = deadlineError(
    '"a.b"',
    200,
    s1.url,
    null,
    "looking up the name in the registry",
    [s1],
  );
  assert.equal(
    lookingUp.message,
    `Deadline exceeded: "a.b" did not get an answer within 200 ms (looking up the name in the registry still under way); it may have run on ${s1.url}`,
  );
  assert.equal(
    (lookingUp.data as { waitingFor: string }).waitingFor,
    "registry",
  );
  // The time ran out between attempts: the last one's endpoint and error.
  const refused = new NotSentError("refused", {
    code: CONNECTION_FAILED,
    endpoint: s1.url,
  });
  const between = deadlineError('"a.b"', 300, null, refused, undefined, [s1]);
  assert.equal(
    between.message,
    `Deadline exceeded: "a.b" did not get an answer within 300 ms (the last attempt went to endpoint s1 at ${s1.url}); last error: refused`,
  );
  assert.equal((between.data as { waitingFor: string }).waitingFor, "nothing");
});
