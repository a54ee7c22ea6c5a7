import assert from "node:assert/strict";
import { EndpointHealth, HealthBook } from "./endpoint_health.ts";
import { delay, shiftableWallClock } from "../../testing/time.ts";

function clock(start = 0) {
  const c = { now: start, at: () => c.now };
  return c;
}

Deno.test("a refused connection ejects at once; timeouts make it suspect, then ejected after ejectAfterFailures in a row", () => {
  const time = clock(1_000);
  const refused = new EndpointHealth({ now: time.at });
  refused.failed("refused");
  assert.equal(refused.state, "ejected");
  assert.equal(refused.reason, "the connection was refused or closed");
  assert.equal(refused.ejectedUntil, 2_000);

  const slow = new EndpointHealth({ now: time.at, ejectAfterFailures: 3 });
  slow.failed("timeout");
  assert.equal(slow.state, "suspect");
  assert.equal(slow.reason, "an attempt timed out");
  slow.failed("broken");
  assert.equal(slow.state, "suspect");
  slow.failed("timeout");
  assert.equal(slow.state, "ejected");
  assert.equal(slow.reason, "3 attempts in a row timed out");
  assert.equal(slow.consecutiveFailures, 3);
  assert.equal(slow.recentFailures, 3);
});

Deno.test("an answer clears suspicion and the failures in a row; failures older than 10 s are no longer recent", () => {
  const time = clock(0);
  const health = new EndpointHealth({ now: time.at });
  health.failed("timeout");
  health.answered(5);
  assert.equal(health.state, "serving");
  assert.equal(health.consecutiveFailures, 0);
  assert.equal(health.recentFailures, 1);
  time.now = 10_001;
  assert.equal(health.recentFailures, 0);
  assert.equal(health.lastFailureAt, 0);
});

Deno.test("ejection times double while probes fail, up to the maximum, and are forgiven after a serving minute", () => {
  const time = clock(0);
  const health = new EndpointHealth({
    now: time.at,
    baseEjectionMs: 100,
    maxEjectionMs: 350,
    ejectionResetMs: 1_000,
  });
  health.failed("refused");
  assert.equal(health.ejectedUntil, 100);
  assert.equal(health.probeDue(), false);
  time.now = 100;
  assert.equal(health.probeDue(), true);
  health.probeStarted();
  assert.equal(health.probeDue(), false); // one probe at a time
  health.probeEnded(false);
  assert.equal(health.ejectedUntil, 300); // 100 + 200
  assert.equal(
    health.reason,
    "the connection was refused or closed; a probe failed too",
  );
  time.now = 300;
  health.probeStarted();
  health.probeEnded(false);
  assert.equal(health.ejectedUntil, 650); // 300 + min(400, 350)
  // The reason counts failed probes instead of growing.
  assert.equal(
    health.reason,
    "the connection was refused or closed; 2 probes failed too",
  );
  time.now = 650;
  health.probeStarted();
  health.probeEnded(true);
  assert.equal(health.state, "serving");
  assert.equal(health.reason, null);
  // Soon ejected again: the time keeps growing...
  time.now = 700;
  health.failed("refused");
  assert.equal(health.ejectedUntil, 700 + 350);
  time.now = 1_050;
  health.probeStarted();
  health.probeEnded(true);
  // ...unless it stays serving for ejectionResetMs.
  time.now = 2_100;
  health.answered(1);
  health.failed("refused");
  assert.equal(health.ejectedUntil, 2_100 + 100);
});

Deno.test("peak EWMA latency jumps to a slower sample at once and decays towards faster ones", () => {
  const time = clock(0);
  const health = new EndpointHealth({ now: time.at, ewmaDecayMs: 1_000 });
  assert.equal(health.ewmaLatencyMs, 0);
  health.answered(10);
  assert.equal(health.ewmaLatencyMs, 10);
  time.now = 100;
  health.answered(200);
  assert.equal(health.ewmaLatencyMs, 200);
  time.now = 1_100; // one time constant later, a fast sample
  health.answered(10);
  const expected = 200 * Math.exp(-1) + 10 * (1 - Math.exp(-1));
  assert.ok(Math.abs(health.ewmaLatencyMs - expected) < 1e-9);
  // Left alone, it decays towards 0 (no starvation after one slow answer).
  time.now = 2_100;
  assert.ok(Math.abs(health.ewmaLatencyMs - expected * Math.exp(-1)) < 1e-9);
  time.now = 11_100;
  assert.ok(health.ewmaLatencyMs < 0.01);
});

Deno.test("in-flight counts and snapshot; the book keys records by URL and forgets idle ones", () => {
  const book = new HealthBook();
  const a = book.of("tcp://127.0.0.1:1");
  assert.equal(book.of("tcp://127.0.0.1:1"), a);
  a.started();
  a.started();
  a.ended();
  assert.deepEqual(a.snapshot(), {
    inFlight: 1,
    ewmaLatencyMs: 0,
    recentFailures: 0,
    consecutiveFailures: 0,
    lastFailureAt: null,
    state: "serving",
  });
  book.forget("tcp://127.0.0.1:1");
  assert.equal(book.of("tcp://127.0.0.1:1"), a); // a call is under way
  a.ended();
  book.forget("tcp://127.0.0.1:1");
  assert.notEqual(book.of("tcp://127.0.0.1:1"), a);
});

Deno.test("an endpoint ejected just before the wall clock steps back an hour is probed when its ejection ends", async () => {
  const wall = shiftableWallClock();
  try {
    const health = new EndpointHealth({ baseEjectionMs: 50 });
    health.failed("timeout");
    health.failed("timeout");
    assert.equal(health.state, "ejected");
    wall.offsetMs = -3_600_000;
    await delay(100);
    assert.equal(health.probeDue(), true);
  } finally {
    wall.restore();
  }
});

Deno.test("an answer's time given by the caller is ignored when the record has its own clock", () => {
  const time = clock(0);
  const health = new EndpointHealth({ now: time.at, ewmaDecayMs: 1_000 });
  // A performance.now() reading far ahead of the injected clock.
  health.answered(10, 999_999);
  time.now = 1_000;
  health.answered(5, 999_999 + 1_000);
  const expected = 10 * Math.exp(-1) + 5 * (1 - Math.exp(-1));
  assert.ok(Math.abs(health.ewmaLatencyMs - expected) < 1e-9);
});

Deno.test("an answer's time given by the caller stands for the record's performance.now() read", () => {
  const health = new EndpointHealth({ ewmaDecayMs: 1_000 });
  const now = performance.now();
  health.answered(10, now);
  // A faster sample one time constant later, by the times given.
  health.answered(5, now + 1_000);
  const expected = 10 * Math.exp(-1) + 5 * (1 - Math.exp(-1));
  // The last answer's time is ahead of the real clock: read back as it is.
  assert.ok(Math.abs(health.ewmaLatencyMs - expected) < 1e-9);
});
