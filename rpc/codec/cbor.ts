/**
 * Loads the CBOR codec (cbor-x) into this process: after this module is
 * imported, `dial()`, `connect()` and the stubs take `codec: "cbor"`, and
 * servers answer clients that open with the CBOR self-describe tag (see
 * `codec.ts` for the wire format). It is the `@rafter/rpc/cbor` entry:
 * import it once, for its effect, in a process that dials or serves CBOR
 * (`import "@rafter/rpc/cbor";`). No other entry imports it (the registry's
 * process aside, so that a registry answers CBOR clients), so a project
 * without CBOR installs neither cbor-x nor its native helper cbor-extract.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import "./cbor.ts";
 * import { dial } from "../transport/dial.ts";
 * import { serve } from "../../adapter/deno/serve.ts";
 * const server = serve({ methods: { echo: (value: unknown) => value } });
 * const connection = await dial(server.url, { codec: "cbor" });
 * assert.deepEqual(await connection.call("echo", [{ n: 1 }]), { n: 1 });
 * connection.close();
 * await server.close();
 * ```
 *
 * @module
 */

import { installCodec } from "./codecs.ts";
import { cborCodec } from "./_cbor_codec.ts";

installCodec(cborCodec);
