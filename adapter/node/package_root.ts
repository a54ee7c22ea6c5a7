/**
 * The npm package's `@rafter/rpc` under Node (the `node` condition): all of
 * `@rafter/rpc` (`mod.ts`), with `connect` on `node:net` and Node's
 * `serve()` from `@rafter/rpc/node`, so `import { connect, serve } from
 * "@rafter/rpc"` works under Node without a dialer given and without a
 * process-wide default set. Not a `deno.json` entry: under Deno,
 * `@rafter/rpc` finds `Deno.connect` itself.
 *
 * @module
 */

export * from "../../mod.ts";
// Named exports take precedence over the star export's `connect`.
export { connect, serve } from "./mod.ts";
