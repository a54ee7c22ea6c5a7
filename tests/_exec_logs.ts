/**
 * What the exec servers (`tests/_exec_server.ts --log FILE`) logged: one
 * line `callId server at` per call they ran.
 *
 * @module
 */

/** callId → how often it ran, and when each server first ran one (ms), over the logs of `ids` in `dir` (a missing log counts as empty). */
export async function readExecLogs(
  dir: string,
  ids: string[],
): Promise<{ runs: Map<string, number>; firstAt: Map<string, number> }> {
  const runs = new Map<string, number>();
  const firstAt = new Map<string, number>();
  for (const id of ids) {
    let text = "";
    try {
      text = await Deno.readTextFile(`${dir}/${id}.log`);
    } catch {
      continue;
    }
    for (const line of text.split("\n")) {
      if (line === "") continue;
      const [callId, server, at] = line.split(" ");
      runs.set(callId, (runs.get(callId) ?? 0) + 1);
      const time = Number(at);
      if (!firstAt.has(server) || time < firstAt.get(server)!) {
        firstAt.set(server, time);
      }
    }
  }
  return { runs, firstAt };
}
