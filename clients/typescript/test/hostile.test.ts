// Tests of the client in a hostile world: a hung server, a server that
// restarts, a body already read. Against a real `sluice serve` (SLUICE_URL,
// SLUICE_TOKEN, as for test/client.test.ts), through a TCP proxy.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { ConnectError, Lease, SluiceClient } from "../src/index.js";

const baseUrl = process.env.SLUICE_URL ?? "http://127.0.0.1:7070";
const token = process.env.SLUICE_TOKEN;

/** A TCP proxy in front of the service: "up" forwards, "stalled" accepts
 * and forwards nothing (a hung server or a black-holed network), "down"
 * resets every connection (a server restarting). */
class Proxy {
  mode: "up" | "stalled" | "down" = "up";
  private readonly socks = new Set<net.Socket>();
  private readonly server: net.Server;
  constructor(private readonly upstream: URL) {
    this.server = net.createServer((down) => {
      this.socks.add(down);
      down.on("close", () => this.socks.delete(down));
      down.on("error", () => {});
      if (this.mode === "down") return void down.destroy();
      const up = net.connect(Number(upstream.port), upstream.hostname);
      this.socks.add(up);
      up.on("error", () => down.destroy());
      down.on("error", () => up.destroy());
      up.on("close", () => down.destroy());
      down.on("close", () => up.destroy());
      up.on("data", (d) => { if (this.mode === "up") down.write(d as unknown as Uint8Array); });
      down.on("data", (d) => { if (this.mode === "up") up.write(d as unknown as Uint8Array); });
    });
  }
  async listen(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }
  drop() {
    for (const s of this.socks) s.destroy();
  }
  close() {
    this.drop();
    this.server.close();
  }
}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<T>((_, reject) => (t = setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms))),
  ]);
}

test("a hung server: the scope of `await using` ends within the client's timeoutMs", async () => {
  const proxy = new Proxy(new URL(baseUrl));
  const url = await proxy.listen();
  try {
    const client = new SluiceClient({ baseUrl: url, token, timeoutMs: 500 });
    const scope = (async () => {
      await using lease = await client.slot({ "ts#hung": 1 }, { ttlMs: 10_000 });
      assert.ok(lease.id);
      proxy.mode = "stalled"; // the server stops answering while the slot is held
    })();
    await within(scope, 3000, "leaving the `await using` scope with timeoutMs 500");
  } finally {
    proxy.close();
  }
});

test("a hung server: peek rejects within the client's timeoutMs", async () => {
  const proxy = new Proxy(new URL(baseUrl));
  const url = await proxy.listen();
  proxy.mode = "stalled";
  try {
    const client = new SluiceClient({ baseUrl: url, token, timeoutMs: 500 });
    await within(client.peek("ts#tpm").then(() => assert.fail("answered"), (e) => assert.ok(e instanceof ConnectError, `${e}`)), 3000, "peek with timeoutMs 500");
  } finally {
    proxy.close();
  }
});

test("a release that failed can be retried, and frees the slot", async () => {
  const proxy = new Proxy(new URL(baseUrl));
  const url = await proxy.listen();
  try {
    const client = new SluiceClient({ baseUrl: url, token, timeoutMs: 5000 });
    const lease = await client.acquire({ "ts#retry": 2 });
    assert.ok(lease instanceof Lease);
    proxy.mode = "down"; // the server restarts: the release cannot reach it
    proxy.drop();
    await assert.rejects(lease.release(), ConnectError);
    proxy.mode = "up"; // back
    const retried = await lease.release();
    const [state] = await client.peek("ts#retry");
    assert.deepEqual({ retried, tokensMilli: state.tokensMilli }, { retried: true, tokensMilli: 2000n }, "the retried release frees both slots");
  } finally {
    proxy.close();
  }
});

test("observeResponse of a 429 whose body was already read", async () => {
  const client = new SluiceClient({ baseUrl, token, timeoutMs: 5000 });
  const res = new Response('{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}', {
    status: 429,
    headers: { "retry-after-ms": "644" },
  });
  await res.text(); // the application logged the error body first
  const obs = await client.observeResponse("openai#gpt-4o", res);
  assert.equal(obs.kind, "rate_limited");
});
