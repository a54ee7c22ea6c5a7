import assert from "node:assert/strict";
import {
  Latencies,
  LATENCY_SAMPLES,
  LatencyBook,
  latencyBook,
  latencyTimeoutMs,
  MIN_LATENCY_SAMPLES,
} from "./latencies.ts";

Deno.test("an attempt timeout from latency is max(100 ms, 3 × p99)", () => {
  assert.equal(latencyTimeoutMs(0), 100);
  assert.equal(latencyTimeoutMs(8), 100);
  assert.equal(latencyTimeoutMs(33), 100);
  assert.equal(latencyTimeoutMs(40), 120);
  assert.equal(latencyTimeoutMs(2_000), 6_000);
});

Deno.test("latency quantiles: none before 20 samples, then read from the samples", () => {
  const latencies = new Latencies();
  for (let i = 1; i < MIN_LATENCY_SAMPLES; i++) latencies.add(i);
  assert.equal(latencies.quantile(0.99), null);
  latencies.add(MIN_LATENCY_SAMPLES);
  assert.equal(latencies.count, 20);
  assert.equal(latencies.quantile(0), 1);
  assert.equal(latencies.quantile(0.5), 11);
  assert.equal(latencies.quantile(0.99), 20);
  assert.equal(latencies.quantile(1), 20);
});

Deno.test("latency quantiles follow new samples within 32 of them, and the ring keeps the latest 512", () => {
  const latencies = new Latencies();
  for (let i = 0; i < 100; i++) latencies.add(1);
  assert.equal(latencies.quantile(0.99), 1);
  // Fewer than 32 new samples: the sorted copy is not made again yet.
  for (let i = 0; i < 31; i++) latencies.add(50);
  assert.equal(latencies.quantile(0.99), 1);
  latencies.add(50);
  assert.equal(latencies.quantile(0.99), 50);
  // 512 samples of 7 replace every older one.
  for (let i = 0; i < LATENCY_SAMPLES; i++) latencies.add(7);
  assert.equal(latencies.count, LATENCY_SAMPLES);
  assert.equal(latencies.quantile(0), 7);
  assert.equal(latencies.quantile(0.99), 7);
  latencies.add(1_000);
  for (let i = 0; i < 31; i++) latencies.add(7);
  assert.equal(latencies.quantile(1), 1_000);
  assert.equal(latencies.quantile(0.99), 7);
});

Deno.test("a cluster's latencies are kept per method, shared by whoever asks for the same cluster, for at most 256 methods", () => {
  const cluster = {};
  const book = latencyBook(cluster);
  assert.equal(latencyBook(cluster), book);
  assert.notEqual(latencyBook({}), book);
  const get = book.of("get")!;
  assert.equal(book.of("get"), get);
  assert.notEqual(book.of("put"), get);
  const capped = new LatencyBook();
  for (let i = 0; i < 256; i++) assert.ok(capped.of(`m${i}`) !== null);
  assert.equal(capped.of("one-more"), null);
  assert.ok(capped.of("m0") !== null);
});
