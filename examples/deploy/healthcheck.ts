/**
 * The container's health check: exit 0 when the node's metrics endpoint
 * (the URL given, default `http://127.0.0.1:9101/metrics`) answers 200
 * within 4 s, 1 otherwise.
 *
 * ```sh
 * deno run --allow-net=127.0.0.1:9101 examples/deploy/healthcheck.ts
 * ```
 *
 * @module
 */

const url = Deno.args[0] ?? "http://127.0.0.1:9101/metrics";
try {
  const response = await fetch(url, { signal: AbortSignal.timeout(4000) });
  await response.body?.cancel();
  if (!response.ok) {
    console.error(`healthcheck: ${url} answered ${response.status}`);
    Deno.exit(1);
  }
} catch (error) {
  console.error(
    `healthcheck: ${url} did not answer: ${
      error instanceof Error ? error.message : String(error)
    }`,
  );
  Deno.exit(1);
}
