// The probe of tests/edge_cloudflare_share_test.ts: what workerd does with
// a promise that one request's I/O settles and other requests await.
//   GET /start?key=K&own=1  starts a slow fetch as promise K; with own=1
//                           the request awaits it, else it ends at once
//   GET /await?key=K        awaits promise K, at most 1 s (its own timer):
//                           "settled:…", "rejected:…" or "timeout"
const shared = new Map();

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const key = url.searchParams.get("key");
    if (url.pathname === "/start") {
      const promise = fetch(`${env.SLOW}/?ms=300`).then((r) => r.text());
      shared.set(key, promise);
      if (url.searchParams.get("own") === "1") {
        return new Response(`own:${await promise}`);
      }
      return new Response("started");
    }
    let timer;
    const timeout = new Promise((resolve) => {
      timer = setTimeout(() => resolve("timeout"), 1000);
    });
    const outcome = await Promise.race([
      shared.get(key).then(
        (value) => `settled:${value}`,
        (error) => `rejected:${error}`,
      ),
      timeout,
    ]);
    clearTimeout(timer);
    return new Response(outcome);
  },
};
