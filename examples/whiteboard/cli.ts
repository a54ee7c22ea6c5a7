/**
 * The whiteboard from a terminal: `list` prints the strokes, `draw` adds
 * one, `clear` wipes the board; through the registry, writes to the
 * leader (the `leader()` distributor).
 *
 * ```sh
 * deno run -A examples/whiteboard/cli.ts draw 10,10 200,120 --color '#d00'
 * deno run -A examples/whiteboard/cli.ts list
 * deno run -A examples/whiteboard/cli.ts clear
 * ```
 *
 * @module
 */

import { parseArgs } from "node:util";
import { DEFAULT_REGISTRY_URL } from "../../mod.ts";
import { connect } from "../../adapter/deno/mod.ts";
import { leader } from "../../stub/distributors/mod.ts";
import type { WhiteboardService } from "./board.ts";

const USAGE = `usage: deno run -A examples/whiteboard/cli.ts [options] COMMAND

  list                    print the strokes (seq, colour, points)
  draw X,Y X,Y ... [--color #RGB]
                          add a stroke through those points
  clear                   wipe the board

  --registry URLS         registry nodes (default $RAFTER_REGISTRY, else ${DEFAULT_REGISTRY_URL})
  --json                  list: print the strokes as JSON`;

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      registry: { type: "string" },
      color: { type: "string", default: "#222" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
} catch (error) {
  console.error(`error: ${(error as Error).message}\n\n${USAGE}`);
  Deno.exit(2);
}
const { values, positionals } = parsed;
if (values.help) {
  console.log(USAGE);
  Deno.exit(0);
}
const [command, ...rest] = positionals;
if (command === undefined || !["list", "draw", "clear"].includes(command)) {
  console.error(USAGE);
  Deno.exit(2);
}
const registry = (values.registry ?? Deno.env.get("RAFTER_REGISTRY") ??
  DEFAULT_REGISTRY_URL).split(",");
const client = connect(registry);
const board = client.stub<WhiteboardService>("whiteboard", {
  distributor: leader({ reads: ["strokes"] }),
  idempotent: true,
  attemptTimeoutMs: 5_000,
});
let code = 0;
try {
  if (command === "list") {
    const strokes = await board.strokes();
    if (values.json) console.log(JSON.stringify(strokes));
    else {
      for (const s of strokes) {
        console.log(
          `${s.seq}\t${s.color}\t${s.points.map((p) => p.join(",")).join(" ")}`,
        );
      }
      console.log(`${strokes.length} strokes`);
    }
  } else if (command === "draw") {
    const points = rest.map((p) =>
      p.split(",").map(Number) as [number, number]
    );
    const seq = await board.stroke({
      points,
      color: values.color,
      requestId: crypto.randomUUID(),
    });
    console.log(`stroke ${seq}`);
  } else {
    await board.clear({ requestId: crypto.randomUUID() });
    console.log("cleared");
  }
} catch (error) {
  console.error(`whiteboard: ${(error as Error).message}`);
  code = 1;
} finally {
  client.close();
}
Deno.exit(code);
