/**
 * `rafter drain NAME ID`: marks endpoint ID of NAME draining, so stubs
 * pick it for no new calls while calls under way finish (`--undo` marks
 * it serving again); exit 4 when nothing is bound as ID.
 *
 * @module
 */

import { INVALID_PARAMS, RpcError } from "../../rpc/errors.ts";
import { parseName } from "../../protocol/registry.ts";
import {
  bindingTarget,
  checkName,
  TARGET_OPTION_HELP,
  TARGET_OPTIONS,
} from "../args.ts";
import type { Command, Context, Values } from "../context.ts";
import { EXIT } from "../errors.ts";

/** The spec of `rafter drain`. */
export const drainCommand: Command = {
  name: "drain",
  args: "NAME ID",
  summary: "mark endpoint ID of NAME draining",
  about:
    `Marks endpoint ID of NAME draining: stubs pick it for no new calls, calls
under way finish. --undo marks it serving again. Exit 4 when nothing is
bound as ID.`,
  options: { undo: { type: "boolean" }, ...TARGET_OPTIONS },
  optionHelp:
    `  --undo            mark it serving again\n${TARGET_OPTION_HELP}`,
  positionals: [2, 2],
  run: (c, [name, id], v) => drain(c, checkName(name), id, v),
};

/** Runs `rafter drain`. */
export async function drain(
  context: Context,
  name: string,
  id: string,
  values: Values,
): Promise<number> {
  const { client, globals, out, err } = context;
  const state = values.undo === true ? "serving" : "draining";
  const target = bindingTarget(values, globals);
  const { node } = target;
  let result;
  try {
    result = await client.registry.setState(name, id, state, target);
  } catch (error) {
    // The registry refuses an unknown endpoint as invalid params: tell
    // "not found" (exit 4) from other bad params by looking it up.
    if (error instanceof RpcError && error.code === INVALID_PARAMS) {
      const found = await client.lookup(parseName(name).base, {
        includeUnhealthy: true,
        rotate: false,
        node,
      });
      if (!found.endpoints.some((e) => e.id === id)) {
        if (globals.json) err(JSON.stringify({ error: error.toJSON() }));
        else {
          err(
            `rafter: nothing is bound as "${id}" under "${name}"; rafter lookup ${name} lists what is`,
          );
        }
        return EXIT.notFound;
      }
    }
    throw error;
  }
  if (globals.json) out(JSON.stringify(result, null, 2));
  else {
    out(`"${id}" of "${name}" is ${state} (revision ${result.revision})`);
  }
  return EXIT.ok;
}
