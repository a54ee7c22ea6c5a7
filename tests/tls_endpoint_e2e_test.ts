import assert from "node:assert/strict";
import { join } from "node:path";
import { connect, serve } from "../adapter/deno/mod.ts";
import { startRegistryNode } from "../registry/mod.ts";
import { makeTestPki } from "../testing/certs.ts";

Deno.test("tls endpoint: a tls:// server is bound, looked up and called through a stub", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rafter-tls-e2e-" });
  const pkiDir = join(dir, "pki");
  await Deno.mkdir(pkiDir);
  const pki = await makeTestPki(pkiDir, { others: ["api"] });
  const node = await startRegistryNode({
    id: "n1",
    listen: { hostname: "127.0.0.1", port: 0 },
    dataDir: join(dir, "data"),
    tickMs: 10,
  });
  const server = serve({
    methods: { greet: (name: string) => `Hello, ${name}!` },
    tls: { certFile: pki.certs.api.certFile, keyFile: pki.certs.api.keyFile },
  });
  const client = connect(node.url, { tls: { caFile: pki.caFile } });
  try {
    assert.match(server.url, /^tls:\/\//);
    await client.bind("hello", { id: "hello-1", url: server.url });
    const hello = client.stub<{ greet(name: string): string }>("hello");
    assert.equal(await hello.greet("Ada"), "Hello, Ada!");
    // The registry keeps the scheme: a lookup gives the tls:// URL back.
    const found = await client.lookup("hello");
    assert.deepEqual(found.endpoints.map((endpoint) => endpoint.url), [
      server.url,
    ]);
  } finally {
    client.close();
    await server.close();
    await node.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
