import assert from "node:assert/strict";
import { MetricFamilies } from "./metrics.ts";

Deno.test("MetricFamilies: counter() and histogram() hand back the same series, which count() and observe() add to", () => {
  const families = new MetricFamilies({ node: "n1" });
  const calls = families.counter("calls_total", "Calls.", { method: "a" });
  assert.equal(
    families.counter("calls_total", "Calls.", { method: "a" }),
    calls,
  );
  calls.value += 2;
  families.count("calls_total", "Calls.", { method: "a" });
  const latency = families.histogram("call_seconds", "Time.", { method: "a" });
  assert.equal(
    families.histogram("call_seconds", "Time.", { method: "a" }),
    latency,
  );
  latency.observe(0.003);
  families.observe("call_seconds", "Time.", { method: "a" }, 0.02);
  assert.equal(latency.count, 2);
  assert.equal(latency.sum, 0.023);
  const lines = families.render([]).split("\n");
  for (
    const line of [
      'calls_total{node="n1",method="a"} 3',
      'call_seconds_bucket{node="n1",method="a",le="0.0025"} 0',
      'call_seconds_bucket{node="n1",method="a",le="0.005"} 1',
      'call_seconds_bucket{node="n1",method="a",le="0.025"} 2',
      'call_seconds_bucket{node="n1",method="a",le="+Inf"} 2',
      'call_seconds_count{node="n1",method="a"} 2',
    ]
  ) assert.ok(lines.includes(line), `${line}\nin:\n${lines.join("\n")}`);
});
