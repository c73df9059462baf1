// Tests of the client against a real `sluice serve` and the vendor
// simulator, started by the Go test clients/clients_test.go, which sets
// SLUICE_URL, SLUICE_TOKEN, OPENAI_SIM_URL and ANTHROPIC_SIM_URL.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { Code, ConnectError, Lease, RetryIn, SlotTimeout, SluiceClient } from "../src/index.js";

const baseUrl = process.env.SLUICE_URL ?? "http://127.0.0.1:7070";
const token = process.env.SLUICE_TOKEN;
const client = new SluiceClient({ baseUrl, token, timeoutMs: 10_000 });

test("acquire, settle, release", async () => {
  const lease = await client.acquire({ "ts#tpm": 300, "ts#slots": 1 }, { caller: "node-test" });
  assert.ok(lease instanceof Lease);
  assert.equal(lease.items.get("ts#tpm"), 300n);
  const s = await lease.settle("ts#tpm", { actual: 450 });
  assert.equal(s.held, 450n);
  assert.equal(await lease.release(), true);
  assert.equal(await lease.release(), false);
});

test("a denial is a value", async () => {
  for (let i = 0; i < 3; i++) assert.ok((await client.acquire({ "ts#rpm": 1 })).granted);
  const denied = await client.acquire({ "ts#rpm": 1 });
  assert.ok(denied instanceof RetryIn);
  assert.ok(denied.retryInMs > 0);
  await assert.rejects(client.wait({ "ts#rpm": 1 }, { maxWaitMs: 500 }), (e) => e instanceof SlotTimeout && e.retryInMs > 500);
});

test("await using releases the slot at the end of the scope", async () => {
  {
    await using lease = await client.slot({ "ts#slots": 2 }, { ttlMs: 600 });
    await new Promise((r) => setTimeout(r, 1500)); // past the TTL: heartbeats keep it
    await lease.heartbeat(600);
    const [held] = await client.peek("ts#slots");
    assert.equal(held.tokensMilli, 0n);
  }
  const [free] = await client.peek("ts#slots");
  assert.equal(free.tokensMilli, 2000n);
});

test("errors carry Connect's code", async () => {
  await assert.rejects(client.acquire({ "nope#rpm": 1 }), (e) => e instanceof ConnectError && e.code === Code.NotFound && e.message.includes("nope#rpm"));
  const stranger = new SluiceClient({ baseUrl, token: "slc_wrong" });
  await assert.rejects(stranger.acquire({ "ts#rpm": 1 }), (e) => e instanceof ConnectError && e.code === Code.Unauthenticated);
});

test("observe with the official OpenAI SDK", async () => {
  const openai = new OpenAI({ baseURL: `${process.env.OPENAI_SIM_URL}/v1`, apiKey: "sk-test", maxRetries: 0 });
  const ask = () => openai.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }], max_tokens: 5 });
  const { response } = await ask().withResponse();
  const ok = await client.observeResponse("openai#gpt-4o", response);
  assert.equal(ok.kind, "ok");
  assert.ok(ok.synced.includes("openai#gpt-4o#tpm"), `synced ${ok.synced}`);
  let limited: ObserveResponseLike | undefined;
  for (let i = 0; i < 5 && !limited; i++) {
    try {
      await ask();
    } catch (e) {
      assert.ok(e instanceof OpenAI.RateLimitError, `got ${e}`);
      limited = await client.observeError("openai#gpt-4o", e);
    }
  }
  assert.equal(limited?.kind, "rate_limited");
  assert.ok(limited?.cooled.includes("openai#gpt-4o#rpm"), `cooled ${limited?.cooled}`);
});

test("observe with the official Anthropic SDK", async () => {
  const anthropic = new Anthropic({ baseURL: process.env.ANTHROPIC_SIM_URL, apiKey: "sk-ant-test", maxRetries: 0 });
  const ask = () => anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 5, messages: [{ role: "user", content: "hi" }] });
  const { response } = await ask().withResponse();
  const ok = await client.observeResponse("anthropic", response);
  assert.equal(ok.kind, "ok");
  let limited: ObserveResponseLike | undefined;
  for (let i = 0; i < 5 && !limited; i++) {
    try {
      await ask();
    } catch (e) {
      assert.ok(e instanceof Anthropic.RateLimitError, `got ${e}`);
      limited = await client.observeError("anthropic", e);
    }
  }
  assert.equal(limited?.kind, "rate_limited");
  assert.ok(limited?.cooled.includes("anthropic#rpm"), `cooled ${limited?.cooled}`);
});

type ObserveResponseLike = { kind: string; cooled: string[] };
