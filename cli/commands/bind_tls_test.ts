import assert from "node:assert/strict";
import { bind } from "./bind.ts";

// A tls:// URL is bound as it is (it used to become "tcp://tls://…").
Deno.test("rafter bind: a tls:// URL keeps its scheme, a bare host:port becomes tcp://", async () => {
  const specs: { url: string }[] = [];
  const context = {
    client: {
      bind: (_name: string, spec: { url: string; id?: string }) => {
        specs.push(spec);
        return Promise.resolve({
          name: "svc",
          endpoint: { id: "svc-1", url: spec.url },
          leaseId: null,
          revision: 1,
        });
      },
    },
    globals: { json: false, registry: ["tcp://127.0.0.1:7001"] },
    out: () => {},
  } as unknown as Parameters<typeof bind>[0];
  await bind(context, "svc", "tls://127.0.0.1:9001", {});
  await bind(context, "svc", "127.0.0.1:9002", {});
  assert.deepEqual(specs.map((spec) => spec.url), [
    "tls://127.0.0.1:9001",
    "tcp://127.0.0.1:9002",
  ]);
});
