/**
 * `rafter registry [node options]`: runs a registry node, handing the
 * words after `registry` to `runRegistry` (registry/main.ts) unparsed; it
 * has its own options and help.
 *
 * @module
 */

/** The line of `rafter registry` in the command list. */
export const registryCommand = {
  name: "registry",
  args: "[node options]",
  summary: "run a registry node",
} as const;

/**
 * Runs `rafter registry`: a registry node (its variables read with `env`),
 * until it stops; its exit code.
 */
export async function registry(
  args: string[],
  env: (name: string) => string | undefined,
): Promise<number> {
  const { runRegistry } = await import("../../registry/main.ts");
  return await runRegistry(args, env);
}
