/**
 * The Node adapter's TLS checks, runtime-neutral (no Deno APIs): run by
 * `tls_test.ts` under Deno, and, bundled with `deno bundle --platform
 * node`, under Node itself (`node _tls_checks.mjs PKI_JSON` prints the
 * result as JSON).
 *
 * @module
 */

import "../../rpc/codec/cbor.ts";
import { dial } from "./mod.ts";
import { serve } from "./serve.ts";
import { nodeDialer } from "./tcp.ts";
import type { RpcSession } from "../../rpc/server/method.ts";

/** The files the checks use (from `makeTestPki`). */
export interface TlsCheckFiles {
  caFile: string;
  otherCaFile: string;
  server: { certFile: string; keyFile: string };
  client: { certFile: string; keyFile: string };
  otherClient: { certFile: string; keyFile: string };
}

/** What the checks saw; the test asserts on it. */
export interface TlsCheckResult {
  url: string;
  json: unknown;
  cbor: unknown;
  serverCommonName: string | null;
  secure: boolean | undefined;
  noCertRefused: boolean;
  otherCaRefused: boolean;
  untrusted: string;
}

async function refused(call: () => Promise<unknown>): Promise<boolean> {
  try {
    await call();
    return false;
  } catch {
    return true;
  }
}

/** Serves TLS with a required client certificate and dials it every way. */
export async function runTlsChecks(
  files: TlsCheckFiles,
): Promise<TlsCheckResult> {
  const server = await serve({
    methods: (session: RpcSession) => ({
      whoami: () => ({
        secure: session.secure,
        altNames: session.peerCertificate?.altNames ?? null,
        fromLoopback: /^127\.0\.0\.1:\d+$/.test(session.remoteAddress ?? ""),
      }),
    }),
    tls: {
      ...files.server,
      caFile: files.caFile,
      clientCert: "require",
      onError: () => {},
    },
  });
  const tls = { caFile: files.caFile, ...files.client };
  try {
    const answers: unknown[] = [];
    for (const codec of ["json", "cbor"] as const) {
      const connection = await dial(server.url, { codec, tls });
      answers.push(await connection.call("whoami"));
      connection.close();
    }
    const stream = await nodeDialer(tls)(server.url);
    stream.close();
    const attempt = (options: Record<string, string>) => () =>
      dial(server.url, { tls: options, timeoutMs: 5_000 }).then(
        async (connection) => {
          try {
            await connection.call("whoami", [], { timeoutMs: 5_000 });
          } finally {
            connection.close();
          }
        },
      );
    let untrusted = "";
    try {
      await dial(server.url, { tls: { caFile: files.otherCaFile } });
    } catch (error) {
      untrusted = (error as Error).message;
    }
    return {
      url: server.url,
      json: answers[0],
      cbor: answers[1],
      serverCommonName: stream.peerCertificate?.commonName ?? null,
      secure: stream.secure,
      noCertRefused: await refused(attempt({ caFile: files.caFile })),
      otherCaRefused: await refused(
        attempt({ caFile: files.caFile, ...files.otherClient }),
      ),
      untrusted,
    };
  } finally {
    await server.close();
  }
}

const argv = (globalThis as { process?: { argv?: string[] } }).process?.argv;
const isMain = !("Deno" in globalThis) && argv?.[2] !== undefined;
if (isMain) {
  console.log(JSON.stringify(await runTlsChecks(JSON.parse(argv![2]))));
}
