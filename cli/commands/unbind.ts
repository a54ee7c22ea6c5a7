/**
 * `rafter unbind NAME ID`: removes endpoint ID from NAME (only if still
 * on a given lease, or from one node's local area); exit 4 when nothing
 * was bound as ID.
 *
 * @module
 */

import {
  bindingTarget,
  checkName,
  TARGET_OPTION_HELP,
  TARGET_OPTIONS,
} from "../args.ts";
import type { Command, Context, Values } from "../context.ts";
import { EXIT } from "../errors.ts";

/** The spec of `rafter unbind`. */
export const unbindCommand: Command = {
  name: "unbind",
  args: "NAME ID",
  summary: "remove endpoint ID from NAME",
  about: "Removes endpoint ID from NAME. Exit 4 when nothing was bound as ID.",
  options: TARGET_OPTIONS,
  optionHelp: TARGET_OPTION_HELP,
  positionals: [2, 2],
  run: (c, [name, id], v) => unbind(c, checkName(name), id, v),
};

/** Runs `rafter unbind`. */
export async function unbind(
  context: Context,
  name: string,
  id: string,
  values: Values,
): Promise<number> {
  const { client, globals, out, err } = context;
  const result = await client.unbind(
    name,
    id,
    bindingTarget(values, globals),
  );
  if (globals.json) out(JSON.stringify(result, null, 2));
  else if (result.removed === 0) {
    err(
      `rafter: nothing is bound as "${id}" under "${name}"${
        values.lease === undefined ? "" : ` with lease ${values.lease}`
      }; rafter lookup ${name} lists what is`,
    );
  } else out(`unbound "${id}" from "${name}" at revision ${result.revision}`);
  return result.removed === 0 ? EXIT.notFound : EXIT.ok;
}
