/**
 * Former home of the RPC tests' helpers, kept as a re-export of
 * `testing/rpc.ts` for the tests of rpc/ that still import it.
 *
 * @module
 */

export * from "../testing/rpc.ts";
