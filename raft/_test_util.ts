/**
 * Former home of the tests' helpers, kept as a re-export of `testing/` for
 * the files that still import it (registry/, stub/, cli/, bench/); new code
 * imports `testing/` directly.
 *
 * @module
 */

export { freePorts } from "../testing/ports.ts";
export { delay, waitFor, within } from "../testing/time.ts";
export { withTempDir } from "../testing/temp.ts";
export { TEST_SECRET } from "../testing/cluster.ts";
