/**
 * `rafter ls [PREFIX]`: lists the names that start with PREFIX and how
 * many endpoints each has, at one registry revision.
 *
 * @module
 */

import type { Command, Context } from "../context.ts";
import { EXIT } from "../errors.ts";
import { formatTable } from "../table.ts";

/** The spec of `rafter ls`. */
export const lsCommand: Command = {
  name: "ls",
  args: "[PREFIX]",
  summary: "names under PREFIX, with endpoint counts",
  about:
    "Lists the names that start with PREFIX and how many endpoints each has.",
  options: { serializable: { type: "boolean" } },
  optionHelp:
    "  --serializable    answer from the node asked, without a quorum (may lag)",
  positionals: [0, 1],
  run: (c, [prefix], v) => ls(c, prefix ?? "", v.serializable === true),
};

/** Runs `rafter ls`. */
export async function ls(
  context: Context,
  prefix: string,
  serializable: boolean,
): Promise<number> {
  const { client, globals, out } = context;
  const result = await client.list(prefix, {
    consistency: serializable ? "serializable" : "linearizable",
  });
  if (globals.json) {
    out(JSON.stringify(result, null, 2));
  } else {
    out(formatTable(
      ["NAME", "ENDPOINTS"],
      result.names.map((n) => [n.name, String(n.count)]),
    ));
    out(`revision ${result.revision}`);
  }
  return EXIT.ok;
}
