import assert from "node:assert/strict";
import { INVALID_PARAMS } from "../../rpc/errors.ts";
import type { Params } from "../../rpc/message.ts";
import { MAX_NAME_LENGTH } from "../../protocol/registry.ts";
import {
  BIND_SHAPE,
  ENDPOINT_SHAPE,
  rejectsWith,
  withSingleNode,
} from "./_test_util.ts";

Deno.test("registry.bind refuses every kind of bad params with -32602 naming the field, and writes nothing", async () => {
  await withSingleNode(async (node, connection) => {
    const bad = (params: Params | undefined, message: string | RegExp) =>
      rejectsWith(
        connection.call("registry.bind", params),
        INVALID_PARAMS,
        message,
      );
    const url = "tcp://127.0.0.1:9001";
    await bad(undefined, BIND_SHAPE);
    await bad([], BIND_SHAPE);
    await bad([5], BIND_SHAPE);
    await bad([null], BIND_SHAPE);
    await bad({}, 'Invalid params: "name" must be a string');
    await bad(
      { name: 5, endpoint: { url } },
      'Invalid params: "name" must be a string',
    );
    await bad(
      { name: "", endpoint: { url } },
      'Invalid params: "name" must be a non-empty string',
    );
    await bad(
      { name: "x".repeat(MAX_NAME_LENGTH + 1), endpoint: { url } },
      `Invalid params: "name" is ${
        MAX_NAME_LENGTH + 1
      } characters long; at most ${MAX_NAME_LENGTH} are allowed`,
    );
    await bad(
      { name: "he llo", endpoint: { url } },
      'Invalid params: "name" "he llo" may not contain whitespace, control characters, "?" or "#"',
    );
    // Malformed queries.
    await bad(
      { name: "db?", endpoint: { url } },
      'Invalid params: "name" ends with "?" but has no attributes; write name?key=value&key=value',
    );
    await bad(
      { name: "db?version", endpoint: { url } },
      /query item "version" has no "="/,
    );
    await bad(
      { name: "db?a=1&a=2", endpoint: { url } },
      /attribute "a" is given twice/,
    );
    await bad(
      { name: "db?b@d=1", endpoint: { url } },
      /attribute name "b@d" must be/,
    );
    await bad(
      { name: "db?v=%zz", endpoint: { url } },
      /malformed percent escape/,
    );
    await bad({ name: "hello" }, ENDPOINT_SHAPE);
    await bad({ name: "hello", endpoint: url }, ENDPOINT_SHAPE);
    await bad(["hello", null], ENDPOINT_SHAPE);
    await bad(
      { name: "hello", endpoint: {} },
      'Invalid params: "endpoint.url" must be a string like tcp://127.0.0.1:9001',
    );
    for (
      const badUrl of [
        "http://127.0.0.1:9001",
        "tcp://127.0.0.1:0",
        "tcp://127.0.0.1",
      ]
    ) {
      await bad(
        { name: "hello", endpoint: { url: badUrl } },
        `Invalid params: "endpoint.url": invalid endpoint URL "${badUrl}": expected tcp://host:port with a port in 1..65535`,
      );
    }
    // A URL with a path or query is refused, not silently trimmed.
    await bad(
      { name: "hello", endpoint: { url: "tcp://127.0.0.1:9/db?version=1.0" } },
      'Invalid params: "endpoint.url": invalid endpoint URL "tcp://127.0.0.1:9/db?version=1.0": a tcp:// URL has no path, query, fragment or user name; give only tcp://host:port (attributes go in the name, "name?key=value", or in "endpoint.attrs")',
    );
    await bad(
      { name: "hello", endpoint: { url: "tcp://0.0.0.0:9001" } },
      'Invalid params: "endpoint.url" "tcp://0.0.0.0:9001" names a wildcard address, which no client can dial; bind the server\'s reachable address (serve({ advertise }) or --advertise)',
    );
    await bad(
      { name: "hello", endpoint: { url: "tcp://[::]:9001" } },
      /names a wildcard address/,
    );
    await bad(
      { name: "hello", endpoint: { id: "", url } },
      'Invalid params: "endpoint.id" must be a non-empty string',
    );
    await bad(
      { name: "hello", endpoint: { url, weight: 0 } },
      'Invalid params: "endpoint.weight" must be an integer in 1..1000000',
    );
    await bad(
      { name: "hello", endpoint: { url, weight: 1.5 } },
      /"endpoint.weight" must be an integer/,
    );
    await bad(
      { name: "hello", endpoint: { url, zone: "" } },
      'Invalid params: "endpoint.zone" must be a string of 1..64 characters, or null',
    );
    await bad(
      { name: "hello", endpoint: { url, attrs: [] } },
      /"endpoint.attrs" must be an object/,
    );
    await bad(
      { name: "hello", endpoint: { url, attrs: { v: 1 } } },
      'Invalid params: "endpoint.attrs": attribute "v" must have a string value',
    );
    await bad(
      { name: "hello?v=1", endpoint: { url, attrs: { v: "2" } } },
      'Invalid params: attribute "v" is "1" in the name but "2" in "endpoint.attrs"',
    );
    await bad(
      { name: "hello", endpoint: { url, check: { kind: "udp" } } },
      'Invalid params: "endpoint.check.kind" must be "tcp" or "ping"',
    );
    await bad(
      {
        name: "hello",
        endpoint: {
          url,
          check: { kind: "ping", intervalMs: 1000, timeoutMs: 1000 },
        },
      },
      'Invalid params: "endpoint.check.timeoutMs" must be an integer in 10..999',
    );
    await bad(
      { name: "hello", endpoint: { url }, leaseId: "no such!" },
      'Invalid params: "leaseId" must be a lease id: 1..64 characters of A-Z a-z 0-9 _ -',
    );
    await bad(
      { name: "hello", endpoint: { url }, grant: 5 },
      'Invalid params: "grant" must be { ttlMs }',
    );
    await bad(
      { name: "hello", endpoint: { url }, grant: { ttlMs: 10 } },
      'Invalid params: "grant.ttlMs" is 10 ms; it must be at least 75 ms (1.5 × this registry\'s election timeout), or a leader change could expire a lease that is kept alive',
    );
    await bad(
      {
        name: "hello",
        endpoint: { url },
        grant: { ttlMs: 1000 },
        leaseId: "abc",
      },
      'Invalid params: give "leaseId" (an existing lease) or "grant", not both',
    );
    await bad(
      { name: "hello", endpoint: { url }, scope: "cluster" },
      'Invalid params: "scope" must be "global" or "local"',
    );
    // Nothing was written.
    assert.equal(node.state.revision, 0);
    assert.equal(node.state.leaseCount, 0);
    assert.deepEqual(node.state.names(), []);
  });
});

Deno.test("registry.unbind, lookup, list, watch and the lease calls refuse bad params with -32602", async () => {
  await withSingleNode(async (_node, connection) => {
    const bad = (
      method: string,
      params: Params | undefined,
      message: string | RegExp,
    ) => rejectsWith(connection.call(method, params), INVALID_PARAMS, message);
    await bad(
      "registry.unbind",
      undefined,
      "Invalid params: registry.unbind takes { name, id, leaseId?, scope? }",
    );
    await bad(
      "registry.unbind",
      { name: "hello" },
      'Invalid params: "id" must be a non-empty string',
    );
    await bad(
      "registry.lookup",
      [false],
      "Invalid params: registry.lookup takes { name, consistency?, rotate?, includeUnhealthy?, limit? }",
    );
    await bad(
      "registry.lookup",
      ["hello", "strong"],
      'Invalid params: "consistency" must be "linearizable" or "serializable"',
    );
    await bad(
      "registry.lookup",
      { name: "hello", rotate: "yes" },
      'Invalid params: "rotate" must be a boolean',
    );
    await bad("registry.lookup", { name: "db?x" }, /query item "x" has no "="/);
    await bad(
      "registry.list",
      { prefix: 5 },
      'Invalid params: "prefix" must be a string of at most 256 characters',
    );
    await bad(
      "registry.watch",
      { prefix: "db?x" },
      'Invalid params: "prefix" "db?x" may not contain whitespace, control characters, "?" or "#": it is the start of a name, and no name has a query (attributes are matched by lookups)',
    );
    await bad("registry.list", { prefix: "db?" }, /may not contain/);
    await bad(
      "registry.watch",
      { prefix: "", fromRevision: 0 },
      'Invalid params: "fromRevision" must be a revision: an integer >= 1',
    );
    await bad(
      "registry.watch",
      { prefix: "", watchId: 5 },
      'Invalid params: "watchId" must be a string',
    );
    await bad(
      "registry.setState",
      { name: "a", id: "b", state: "unhealthy" },
      'Invalid params: "state" must be "serving" or "draining"',
    );
    await bad(
      "lease.grant",
      {},
      'Invalid params: "ttlMs" must be an integer number of ms',
    );
    await bad(
      "lease.grant",
      { ttlMs: 74 },
      /"ttlMs" is 74 ms; it must be at least 75 ms/,
    );
    await bad(
      "lease.grant",
      { ttlMs: 1000, id: "bad id" },
      /"id" must be a lease id/,
    );
    await bad(
      "lease.keepAlive",
      { id: "abc", load: "high" },
      'Invalid params: "load" must be a finite number',
    );
    await bad("lease.keepAlive", [1], /lease.keepAlive takes \{ id, load\? \}/);
    await bad("lease.revoke", {}, /"id" must be a lease id/);
  });
});
