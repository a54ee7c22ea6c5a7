/**
 * A message a decoder refused before dispatch (private: not part of the
 * public API).
 *
 * @module
 */

import type { RpcError } from "../errors.ts";
import type { RequestId } from "../message.ts";

/**
 * Stands in a decoded frame for a message (or one member of a batch) that
 * must not run: its id cannot be echoed exactly, or a CBOR item holds a
 * value JSON cannot represent. The dispatcher answers it with `error` and
 * `id`, as it answers an invalid request, and runs nothing.
 */
export class Refusal {
  /**
   * @param error the error to answer with (-32600 or -32700).
   * @param id the id to answer with: the request's, when it could be read
   * exactly, else null.
   */
  constructor(readonly error: RpcError, readonly id: RequestId) {}
}
