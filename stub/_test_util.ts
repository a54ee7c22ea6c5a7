/**
 * Helpers shared by the tests of this folder (not part of the public API).
 *
 * @module
 */

import { type Endpoint, makeEndpoint } from "../protocol/registry.ts";

/** A serving, global endpoint `id` at 127.0.0.1:`port`, with `overrides`. */
export function endpoint(
  id: string,
  port: number,
  overrides: Partial<Endpoint> = {},
): Endpoint {
  return makeEndpoint({
    id,
    url: `tcp://127.0.0.1:${port}`,
    createRevision: 1,
    modRevision: 1,
    ...overrides,
  });
}
