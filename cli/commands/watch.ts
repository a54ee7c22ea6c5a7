/**
 * `rafter watch PREFIX`: prints one line (or JSON document) per change
 * under PREFIX as it happens, following the registry through node
 * failures without losing or repeating a change, until `--count` events
 * or Ctrl-C (exit 130).
 *
 * @module
 */

import { WatchClient } from "../../stub/registry_client/watch.ts";
import { clusterSuffix } from "../../stub/client.ts";
import type { WatchEvent } from "../../protocol/registry.ts";
import { optionalInteger } from "../args.ts";
import { cliDialer, type Command, type Context } from "../context.ts";
import { EXIT } from "../errors.ts";

/** The spec of `rafter watch`. */
export const watchCommand: Command = {
  name: "watch",
  args: "PREFIX",
  summary: "print changes under PREFIX as they happen",
  about: `Prints one line per change under PREFIX ("" watches every name):
revision, put or delete, name, endpoint id, URL, and the state (put) or
the reason (delete). Follows the registry through node failures without
losing or repeating a change. Ends after --count events (exit 0) or on
Ctrl-C (exit 130).`,
  options: { from: { type: "string" }, count: { type: "string" } },
  optionHelp:
    `  --from REV        start at revision REV (replays history), instead of now
  --count N         stop after N events`,
  positionals: [1, 1],
  run: (c, [prefix], v) =>
    watch(
      c,
      prefix,
      optionalInteger(v.from, "--from", 1),
      optionalInteger(v.count, "--count", 1),
    ),
};

/** Runs `rafter watch`. */
export async function watch(
  context: Context,
  prefix: string,
  fromRevision: number | undefined,
  count: number | undefined,
): Promise<number> {
  const { client, globals, out, err, signal } = context;
  // Fail fast (exit 3) when no registry node answers, and learn the
  // revision to start from, so nothing between this and the watch is lost.
  const listed = await client.list(prefix);
  // A sibling's suffix is not followed here (client.watch does): say so,
  // rather than watch a local name that nothing binds.
  const at = clusterSuffix(prefix);
  if (at !== null && !globals.json) {
    const urls = (await client.clusters().catch(() => ({})) as Record<
      string,
      string[]
    >)[at.cluster];
    if (urls !== undefined) {
      err(
        `note: rafter watch does not follow "@${at.cluster}" yet: it watches the local name "${prefix}"; to watch ${at.base} in cluster ${at.cluster}, run rafter --registry ${
          urls.join(",")
        } watch ${at.base}`,
      );
    }
  }
  const from = fromRevision ?? listed.revision + 1;
  const interrupted = new AbortController();
  const onSigint = () => interrupted.abort();
  if (signal === undefined) Deno.addSignalListener("SIGINT", onSigint);
  signal?.addEventListener("abort", onSigint, { once: true });
  if (signal?.aborted) interrupted.abort();
  const watches = new WatchClient(client.registry, {
    dialer: cliDialer(globals),
    token: globals.token,
    connectTimeoutMs: Math.min(globals.timeoutMs, 2_000),
    callTimeoutMs: Math.min(globals.timeoutMs, 4_000),
    onReconnect: reconnectNotice(context, (): number => watcher.revision),
  });
  const watcher = watches.watch(prefix, {
    fromRevision: from,
    signal: interrupted.signal,
  });
  if (!globals.json) {
    err(
      `watching ${
        prefix === "" ? "every name" : `names under "${prefix}"`
      } from revision ${from}; Ctrl-C stops`,
    );
  }
  let seen = 0;
  try {
    for await (const update of watcher) {
      if (update.kind === "reset") {
        out(
          globals.json
            ? JSON.stringify({
              type: "reset",
              revision: update.revision,
              names: update.names,
            })
            : `${update.revision} reset  ${update.names.length} ${
              update.names.length === 1 ? "name" : "names"
            } (the watch fell behind the registry's history; this is the whole prefix now)`,
        );
        continue;
      }
      for (const event of update.events) {
        out(globals.json ? JSON.stringify(event) : eventLine(event));
        if (count !== undefined && ++seen >= count) return EXIT.ok;
      }
    }
    return interrupted.signal.aborted ? EXIT.interrupted : EXIT.ok;
  } finally {
    watcher.close();
    watches.close();
    if (signal === undefined) Deno.removeSignalListener("SIGINT", onSigint);
    signal?.removeEventListener("abort", onSigint);
  }
}

/**
 * The watch's `onReconnect`: a warning on stderr, at most one per 10 s
 * while the registry is away; `revision` is the last revision seen.
 */
function reconnectNotice(
  context: Context,
  revision: () => number,
): (url: string, error: unknown) => void {
  const { globals, err } = context;
  let lastNoticeAt = -Infinity;
  return (url, error) => {
    if (Date.now() - lastNoticeAt < 10_000) return;
    lastNoticeAt = Date.now();
    const notice = `watch connection to ${url} failed (${
      (error as Error)?.message ?? error
    }); retrying on the registry nodes, from revision ${revision() + 1}`;
    err(
      globals.json ? JSON.stringify({ warning: notice }) : `rafter: ${notice}`,
    );
  };
}

function eventLine(event: WatchEvent): string {
  const e = event.endpoint;
  return [
    String(event.revision),
    event.type.padEnd(6),
    event.name,
    e.scope === "local" ? `${e.id} (local)` : e.id,
    e.url,
    event.type === "put" ? e.state : event.reason ?? "",
  ].join(" ").trimEnd();
}
