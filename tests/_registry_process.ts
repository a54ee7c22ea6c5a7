/**
 * A registry node run as its own process (`deno run registry/main.ts`),
 * for the tests of the command line.
 *
 * @module
 */

/**
 * A `deno run registry/main.ts` child whose output the test can wait on;
 * `env` is added to the child's environment (never the test's own).
 */
export function spawnRegistry(
  cwd: string,
  args: string[],
  env: Record<string, string> = {},
) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../registry/main.ts", import.meta.url).pathname,
      ...args,
      // Safety net: the node exits when the test's end of stdin closes.
      "--watch-stdin",
    ],
    cwd,
    env,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let output = "";
  const decoder = new TextDecoder();
  const drain = (stream: ReadableStream<Uint8Array>) =>
    stream.pipeTo(
      new WritableStream({
        write(chunk) {
          output += decoder.decode(chunk, { stream: true });
        },
      }),
    );
  const drained = Promise.all([drain(child.stdout), drain(child.stderr)]);
  return {
    child,
    get output() {
      return output;
    },
    /** Exit code, once the process ended and its output was read. */
    async exit(): Promise<number> {
      const [status] = await Promise.all([child.status, drained]);
      await child.stdin.close().catch(() => {});
      return status.code;
    },
  };
}
