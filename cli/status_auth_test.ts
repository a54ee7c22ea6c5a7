import assert from "node:assert/strict";
import { serve } from "../adapter/deno/serve.ts";
import { PERMISSION_DENIED, RpcError, UNAUTHENTICATED } from "../rpc/errors.ts";
import { EXIT, runCli } from "./main.ts";

/** `rafter status` against a node whose `registry.status` always throws `error`. */
async function statusRefusedWith(
  error: RpcError,
  env: Record<string, string> = {},
): Promise<{ code: number; err: string; out: string }> {
  const server = serve({
    methods: {
      "registry.status": () => {
        throw error;
      },
    },
  });
  const err: string[] = [];
  const out: string[] = [];
  try {
    const code = await runCli(["status", "--timeout-ms", "3000"], {
      out: (line) => out.push(line),
      err: (line) => err.push(line),
      env: (name) => ({ RAFTER_REGISTRY: server.url, ...env })[name],
    });
    return { code, err: err.join("\n"), out: out.join("\n") };
  } finally {
    await server.close();
  }
}

Deno.test("rafter status: nodes that refuse the missing token exit 5 with the hint, not 3", async () => {
  const ran = await statusRefusedWith(
    new RpcError(
      UNAUTHENTICATED,
      "Unauthenticated: registry.status needs a token",
    ),
  );
  assert.equal(ran.code, EXIT.unauthenticated, ran.err);
  assert.match(
    ran.err,
    /this command gave no token: set RAFTER_TOKEN \(or --token\)/,
  );
  assert.doesNotMatch(ran.err, /no registry node answered/);
  // The refusal is said once, with no table calling the node unreachable.
  assert.equal(ran.out, "");
  assert.equal(ran.err.split("Unauthenticated").length - 1, 1, ran.err);
});

Deno.test("rafter status: nodes that refuse the token's permissions exit 6 naming the permission", async () => {
  const ran = await statusRefusedWith(
    new RpcError(PERMISSION_DENIED, "Permission denied: registry.status", {
      method: "registry.status",
      permission: "read:*",
    }),
  );
  assert.equal(ran.code, EXIT.permissionDenied, ran.err);
  assert.match(ran.err, /lacks read:\*/);
});

Deno.test("a refused command without a token is told the permission it needs: admin for snapshot save, bind for bind, read for lookup", async () => {
  const refuse = () => {
    throw new RpcError(UNAUTHENTICATED, "Unauthenticated: needs a token");
  };
  const server = serve({
    methods: {
      "registry.snapshot": refuse,
      "registry.bind": refuse,
      "registry.lookup": refuse,
    },
  });
  const dir = await Deno.makeTempDir();
  try {
    for (
      const [argv, perm] of [
        [["snapshot", "save", `${dir}/backup.snap`], "admin"],
        [["bind", "web", "tcp://127.0.0.1:1", "--id", "w1"], "bind:<prefix>"],
        [["lookup", "web"], "read:<prefix>"],
      ] as const
    ) {
      const err: string[] = [];
      const code = await runCli([...argv, "--timeout-ms", "3000"], {
        out: () => {},
        err: (line) => err.push(line),
        env: (name) => ({ RAFTER_REGISTRY: server.url })[name],
      });
      assert.equal(code, EXIT.unauthenticated, err.join("\n"));
      assert.ok(
        err.join("\n").includes(`rafter token create NAME --perm ${perm}.`),
        `${argv.join(" ")}: ${err.join("\n")}`,
      );
    }
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});
