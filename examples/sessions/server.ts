/**
 * A session server: each session is a list of notes a client adds to
 * (`note(sessionId, n)` records note n; recording it again changes
 * nothing, so the method is idempotent), and reads (`notes`, `count`).
 * Every change reaches a backup server before the client gets its answer
 * (`SessionStore`), so when this server dies the client's stub (with the
 * `session()` distributor) carries on at the backup with every
 * acknowledged note. Run two or more under one name:
 *
 * ```sh
 * deno run -A examples/sessions/server.ts --id s1 &
 * deno run -A examples/sessions/server.ts --id s2 &
 * ```
 *
 * The registry URLs come from `--registry`, else `$RAFTER_REGISTRY`, else
 * `tcp://127.0.0.1:7001`. SIGINT/SIGTERM drain and unbind.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { DEFAULT_REGISTRY_URL, INVALID_PARAMS, RpcError } from "../../mod.ts";
import { connect, serve } from "../../adapter/deno/mod.ts";
import { SessionStore } from "../../stub/mod.ts";
import { untilStopped } from "../until_stopped.ts";

/** A session's state: the notes recorded, by number. */
export interface Notes {
  notes: number[];
}

/** The notes service as a client's stub sees it (values unwrapped by `session()`). */
export interface NotesService {
  "session.open"(): string;
  note(sessionId: string, n: number): number;
  notes(sessionId: string): number[];
  count(sessionId: string): number;
  "session.close"(sessionId: string): boolean;
}

/** The session store of the notes service. */
export function notesStore(ttlMs = 600_000): SessionStore<Notes> {
  return new SessionStore<Notes>({
    initial: () => ({ notes: [] }),
    methods: {
      note(state, n: unknown) {
        if (typeof n !== "number" || !Number.isSafeInteger(n)) {
          throw new RpcError(
            INVALID_PARAMS,
            "Invalid params: note takes the session id and a note number",
          );
        }
        if (!state.notes.includes(n)) state.notes.push(n);
        return state.notes.length;
      },
      notes: (state) => state.notes,
      count: (state) => state.notes.length,
    },
    readOnly: ["notes", "count"],
    ttlMs,
  });
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      id: { type: "string" },
      registry: { type: "string" },
      name: { type: "string", default: "notes" },
      port: { type: "string", default: "0" },
      "ttl-ms": { type: "string", default: "3000" },
      "watch-stdin": { type: "boolean", default: false },
    },
  });
  const id = values.id ?? `notes-${crypto.randomUUID().slice(0, 8)}`;
  const registry = (values.registry ?? Deno.env.get("RAFTER_REGISTRY") ??
    DEFAULT_REGISTRY_URL).split(",");
  const client = connect(registry);
  const store = notesStore();
  const server = serve({ port: Number(values.port), methods: store.methods });
  const binding = await client.bindServer(values.name, server, {
    id,
    ttlMs: Number(values["ttl-ms"]),
  }).catch((error) => {
    console.error(`error: ${id}: ${error.message}`);
    Deno.exit(1);
  });
  store.bound(client, values.name, binding.id);
  console.log(
    `${id} ready on ${server.url} bound as ${values.name} (pid ${Deno.pid})`,
  );
  await untilStopped(values["watch-stdin"]);
  await binding.close();
  await server.close();
  client.close();
  Deno.exit(0);
}
