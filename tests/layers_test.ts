/**
 * The layers docs/architecture.md gives hold on the real module graph: no import
 * goes to a layer it may not, no two files import each other (type-only
 * imports count), and no `_` file is imported from another layer. The
 * rules and their reasons are in `scripts/check_layers.ts`; a breach is
 * printed as `from -> to (rule)`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  checkGraph,
  format,
  type Graph,
  moduleGraph,
} from "../scripts/check_layers.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

Deno.test("the repository's imports keep to the layers, make no cycle and leave other layers' _ files alone", async () => {
  const graph = await moduleGraph(ROOT);
  assert.ok(
    graph.files.includes("rpc/message.ts"),
    "the walk found the sources",
  );
  assert.ok(graph.edges.length > 500, `only ${graph.edges.length} imports`);
  const violations = checkGraph(graph).map(format);
  if (violations.length > 0) {
    throw new Error(
      `${violations.length} layer violation(s):\n${violations.join("\n")}`,
    );
  }
});

Deno.test("negative control: a folder with an upward import, a type-only cycle and a foreign _ import gets exactly those three", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rafter-layers-control-" });
  try {
    const files: Record<string, string> = {
      // Upward: rpc/ may import only internal/.
      "rpc/message.ts": 'import { client } from "../stub/client.ts";\n' +
        "export const message = client;\n",
      // Private: rpc/_codec.ts is rpc's own.
      "stub/client.ts": 'import { codec } from "../rpc/_codec.ts";\n' +
        "export const client = codec;\n",
      "rpc/_codec.ts": "export const codec = 1;\n",
      // A cycle whose one edge is type-only.
      "raft/a.ts": 'import type { B } from "./b.ts";\n' +
        "export const a: B = 1;\n",
      "raft/b.ts": 'import { a } from "./a.ts";\n' +
        "export type B = number;\nexport const b = a;\n",
      // Allowed: an entry's adapter, a test's adapter, a _ file of its own layer.
      "adapter/deno/serve.ts":
        'import { message } from "../../rpc/message.ts";\n' +
        "export const serve = message;\n",
      "tests/e2e_test.ts":
        'import { b } from "../raft/b.ts";\nconsole.log(b);\n',
      "registry/main.ts":
        'import { serve } from "../adapter/deno/serve.ts";\n' +
        'import { a } from "../raft/a.ts";\nconsole.log(serve, a);\n',
      "rpc/message_test.ts":
        'import { serve } from "../adapter/deno/serve.ts";\n' +
        'import { codec } from "./_codec.ts";\nconsole.log(serve, codec);\n',
    };
    for (const [path, text] of Object.entries(files)) {
      await Deno.mkdir(join(dir, path, ".."), { recursive: true });
      await Deno.writeTextFile(join(dir, path), text);
    }
    const graph = await moduleGraph(dir);
    assert.deepEqual(graph.files, Object.keys(files).sort());
    assert.deepEqual(checkGraph(graph).map(format), [
      "rpc/message.ts -> stub/client.ts (layer: rpc may import only internal)",
      "stub/client.ts -> rpc/_codec.ts (private: a _ file of rpc/, imported from stub)",
      "raft/a.ts -> raft/b.ts -> raft/a.ts (cycle of 2 files: raft/a.ts, raft/b.ts)",
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("negative control: production code may not import testing/, test files may", () => {
  const graph: Graph = {
    files: [
      "stub/client.ts",
      "stub/client_test.ts",
      "cli/main.ts",
      "testing/x.ts",
    ],
    edges: [
      "stub/client.ts",
      "stub/client_test.ts",
      "cli/main.ts",
      "tests/e2e_test.ts",
    ]
      .map((from) => ({
        from,
        to: "testing/x.ts",
        typeOnly: false,
        dynamic: false,
      })),
  };
  assert.deepEqual(checkGraph(graph).map(format), [
    "cli/main.ts -> testing/x.ts (layer: production code may not import testing/)",
    "stub/client.ts -> testing/x.ts (layer: production code may not import testing/)",
  ]);
});
