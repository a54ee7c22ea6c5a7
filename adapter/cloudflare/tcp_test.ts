import assert from "node:assert/strict";
import {
  type CloudflareConnect,
  cloudflareDialer,
  type CloudflareSocket,
  type CloudflareSocketOptions,
} from "./tcp.ts";
import { tlsFailureOf } from "../../rpc/errors.ts";

/** A fake `connect` that records what it was asked and opens at once. */
function recordingConnect(): {
  connect: CloudflareConnect;
  calls: {
    address: { hostname: string; port: number };
    options?: CloudflareSocketOptions;
  }[];
} {
  const calls: {
    address: { hostname: string; port: number };
    options?: CloudflareSocketOptions;
  }[] = [];
  const socket = (opened: Promise<unknown>): CloudflareSocket => ({
    readable: new ReadableStream(),
    writable: new WritableStream(),
    opened,
    closed: new Promise(() => {}),
    close: () => Promise.resolve(),
  });
  const connect: CloudflareConnect = (address, options) => {
    calls.push({ address, options });
    return {
      ...socket(Promise.resolve({})),
      startTls: () => socket(Promise.resolve({})),
    };
  };
  return { connect, calls };
}

Deno.test("cloudflare dialer: tls:// opens TCP with secureTransport starttls, then TLS on it, and marks the stream secure", async () => {
  const { connect, calls } = recordingConnect();
  const dialer = cloudflareDialer(connect);
  const secure = await dialer("tls://api.example.com:7443");
  assert.deepEqual(calls[0], {
    address: { hostname: "api.example.com", port: 7443 },
    options: { secureTransport: "starttls", allowHalfOpen: false },
  });
  assert.equal(secure.secure, true);
  secure.close();
  const plain = await dialer("tcp://10.0.0.5:7001");
  assert.deepEqual(calls[1], {
    address: { hostname: "10.0.0.5", port: 7001 },
    options: { secureTransport: "off", allowHalfOpen: false },
  });
  assert.equal(plain.secure, undefined);
  plain.close();
  await assert.rejects(
    dialer("udp://10.0.0.5:7001"),
    /invalid endpoint URL "udp:\/\/10.0.0.5:7001": expected tcp:\/\/host:port/,
  );
  assert.equal(calls.length, 2);
});

/** A socket whose `opened` rejects with workerd's words for any failure. */
function failing(): CloudflareSocket {
  const opened = Promise.reject(
    new Error("proxy request failed, cannot connect to the specified address"),
  );
  opened.catch(() => {});
  return {
    readable: new ReadableStream(),
    writable: new WritableStream(),
    opened,
    closed: new Promise(() => {}),
    close: () => Promise.resolve(),
  };
}

Deno.test("cloudflare dialer: a failed TLS handshake after TCP opened is tagged tlsFailure handshake; a refused TCP connection is not", async () => {
  const handshakeFails: CloudflareConnect = () => ({
    readable: new ReadableStream(),
    writable: new WritableStream(),
    opened: Promise.resolve({}),
    closed: new Promise(() => {}),
    close: () => Promise.resolve(),
    startTls: failing,
  });
  const error = await cloudflareDialer(handshakeFails)(
    "tls://127.0.0.1:7001",
  ).then(() => undefined, (e) => e);
  assert.equal(tlsFailureOf(error), "handshake");
  assert.match(
    (error as Error).message,
    /^TLS to tls:\/\/127\.0\.0\.1:7001 failed: the TCP connection was accepted, then the TLS handshake failed; .*tlsOptions\.trustedCertificates/,
  );

  const refused: CloudflareConnect = () => ({
    ...failing(),
    startTls: () => assert.fail("no TLS on a refused connection"),
  });
  const refusal = await cloudflareDialer(refused)("tls://127.0.0.1:7001")
    .then(() => undefined, (e) => e);
  assert.equal(
    (refusal as Error).message,
    "proxy request failed, cannot connect to the specified address",
  );
  assert.equal(tlsFailureOf(refusal), undefined);
});
