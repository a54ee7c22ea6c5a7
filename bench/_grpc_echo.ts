/**
 * The `EchoService` of `bench/echo.proto`, loaded with
 * `@grpc/proto-loader` (private to `bench/`): its service definition for
 * the server, and its client constructor.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

/** The echo service's client constructor (its `.service` for a server). */
export function echoService(protoPath: string): grpc.ServiceClientConstructor {
  const definition = protoLoader.loadSync(protoPath, {
    keepCase: true,
    defaults: true,
  });
  const root = grpc.loadPackageDefinition(definition) as unknown as {
    rafterbench: { EchoService: grpc.ServiceClientConstructor };
  };
  return root.rafterbench.EchoService;
}
