/**
 * Loads the CBOR codec (cbor-x) into this process: after this module is
 * imported, `dial()`, `connect()` and the stubs take `codec: "cbor"`, and
 * servers answer clients that open with the CBOR self-describe tag (see
 * `codec.ts` for the wire format). `@rafter/rpc/deno` and
 * `@rafter/rpc/node` import it; the edge-safe `@rafter/rpc` does not, so
 * that an edge bundle reaches no npm package.
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
