import { INVALID_PARAMS } from "../../rpc/errors.ts";
import { rejectsWith, withSingleNode } from "./_test_util.ts";

Deno.test("registry.watch and unwatch refuse an unknown param, naming it and the accepted ones", async () => {
  await withSingleNode(async (_node, connection) => {
    await rejectsWith(
      connection.call("registry.watch", { prefix: "", from: 3 }),
      INVALID_PARAMS,
      'Invalid params: "from" is not a param of registry.watch, which takes { prefix, fromRevision?, watchId?, loads? }',
    );
    await rejectsWith(
      connection.call("registry.unwatch", { watchId: "w1", all: true }),
      INVALID_PARAMS,
      'Invalid params: "all" is not a param of registry.unwatch, which takes { watchId }',
    );
  });
});
