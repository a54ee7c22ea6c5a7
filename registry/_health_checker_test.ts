import assert from "node:assert/strict";
import { HealthChecker } from "./_health_checker.ts";
import { encodeCommand, RegistryState } from "./state.ts";
import { shiftableWallClock, waitFor } from "../testing/time.ts";

Deno.test("a wall clock stepped back an hour does not stop the health probes", async () => {
  // A port nothing listens on: every probe fails.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  listener.close();
  const state = new RegistryState();
  state.apply(encodeCommand({
    op: "bind",
    name: "hello",
    endpoint: {
      id: "h1",
      url: `tcp://127.0.0.1:${listener.addr.port}`,
      check: {
        kind: "tcp",
        intervalMs: 50,
        timeoutMs: 500,
        failuresBeforeUnhealthy: 2,
      },
    },
  }));
  const wall = shiftableWallClock();
  const proposed: unknown[] = [];
  const checker = new HealthChecker({
    propose: (command) => Promise.resolve(void proposed.push(command)),
  });
  checker.update(state.checkedBindings());
  checker.start();
  checker.tick(); // the first probe, which fails
  try {
    // The second failure makes the binding unhealthy; with the next probe
    // timed by the wall clock, it would come an hour late.
    await new Promise((resolve) => setTimeout(resolve, 20));
    wall.offsetMs = -3_600_000;
    await waitFor(
      () => {
        checker.tick();
        return proposed.length > 0;
      },
      "the second probe to fail and mark h1 unhealthy",
      5_000,
      20,
    );
    assert.deepEqual(proposed, [{
      op: "health",
      name: "hello",
      id: "h1",
      createRevision: 1,
      healthy: false,
    }]);
  } finally {
    wall.restore();
    checker.stop();
  }
});
