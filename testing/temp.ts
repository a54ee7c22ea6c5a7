/**
 * Temporary folders for tests: made fresh, removed afterwards.
 *
 * @module
 */

/**
 * Makes a temp folder (named with `prefix`), runs `fn` with it, and removes
 * it afterwards, whether `fn` returns or throws.
 */
export async function withTempDir<T>(
  fn: (dir: string) => Promise<T>,
  prefix = "rafter_test_",
): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
