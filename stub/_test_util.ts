/**
 * Former home of the stub tests' helpers, kept as a re-export of
 * `testing/cluster.ts` for the tests of stub/ that still import it.
 *
 * @module
 */

export { endpoint, startTestRegistry } from "../testing/cluster.ts";
