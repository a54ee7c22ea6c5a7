import assert from "node:assert/strict";
import {
  type CloudflareConnect,
  cloudflareDialer,
  type CloudflareSocketOptions,
} from "./tcp.ts";

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
  const connect: CloudflareConnect = (address, options) => {
    calls.push({ address, options });
    return {
      readable: new ReadableStream(),
      writable: new WritableStream(),
      opened: Promise.resolve({}),
      closed: new Promise(() => {}),
      close: () => Promise.resolve(),
    };
  };
  return { connect, calls };
}

Deno.test("cloudflare dialer: tls:// opens with secureTransport on and marks the stream secure", async () => {
  const { connect, calls } = recordingConnect();
  const dialer = cloudflareDialer(connect);
  const secure = await dialer("tls://api.example.com:7443");
  assert.deepEqual(calls[0], {
    address: { hostname: "api.example.com", port: 7443 },
    options: { secureTransport: "on", allowHalfOpen: false },
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
