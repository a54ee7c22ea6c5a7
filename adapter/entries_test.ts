import assert from "node:assert/strict";
import {
  defaultDialer,
  setDefaultDialer,
} from "../rpc/transport/default_dialer.ts";
import type { Dialer } from "../rpc/transport/transport.ts";

// The runtime entries pass their dialer per call: importing one leaves the
// process-wide default as it was, and their dial() and connect() work
// while that default refuses every connection.

const refuse: Dialer = () => Promise.reject(new Error("the default dialer"));

Deno.test("importing the Deno, Node and Cloudflare entries changes no default dialer; their dial() and connect() use their own", async () => {
  setDefaultDialer(refuse);
  try {
    const deno = await import("./deno/mod.ts");
    const node = await import("./node/mod.ts");
    await import("./cloudflare/mod.ts");
    await import("./node/package_root.ts");
    assert.equal(defaultDialer(), refuse);
    const server = deno.serve({
      port: 0,
      methods: {
        echo: (value: unknown) => value,
        "registry.status": () => ({ id: "fake" }),
      },
    });
    try {
      for (const dial of [deno.dial, node.dial]) {
        const connection = await dial(server.url);
        try {
          assert.equal(await connection.call("echo", ["hi"]), "hi");
        } finally {
          connection.close();
        }
      }
      for (const connect of [deno.connect, node.connect]) {
        const client = connect(server.url, { watch: false });
        try {
          assert.deepEqual(await client.registry.status(server.url), {
            id: "fake",
          });
        } finally {
          client.close();
        }
      }
      // A dialer given still wins.
      await assert.rejects(
        deno.dial(server.url, { dialer: refuse }),
        /cannot connect to .*: the default dialer/,
      );
    } finally {
      await server.close();
    }
  } finally {
    setDefaultDialer(null);
  }
});
