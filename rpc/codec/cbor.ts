/**
 * Loads the CBOR codec (cbor-x) into this process: after this module is
 * imported, `dial()`, `connect()` and the stubs take `codec: "cbor"`, and
 * servers answer clients that open with the CBOR self-describe tag (see
 * `codec.ts` for the wire format). `@rafter/rpc/deno` and
 * `@rafter/rpc/node` import it; the edge-safe `@rafter/rpc` does not, so
 * that an edge bundle reaches no npm package.
 *
 * @example
 * ```ts ignore
 * import "./cbor.ts";
 * import { dial } from "../transport/dial.ts";
 * const connection = await dial("tcp://127.0.0.1:7001", { codec: "cbor" });
 * ```
 *
 * @module
 */

import { installCodec } from "./codecs.ts";
import { cborCodec } from "./_cbor_codec.ts";

installCodec(cborCodec);
