// A client of `sluice serve`: TypeScript services share vendor API limits
// with the rest of the fleet. A thin layer over the Connect client
// generated from proto/sluice/v1/sluice.proto.
//
//   const sluice = new SluiceClient({ baseUrl: "http://127.0.0.1:7070", token });
//   await using lease = await sluice.slot({ "openai#gpt-4o#tpm": 2000 });
//   const { data, response } = await openai.chat.completions.create(...).withResponse();
//   await lease.settle("openai#gpt-4o#tpm", { actual: data.usage!.total_tokens });
//   await sluice.observeResponse("openai#gpt-4o", response);

import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { durationFromMs, durationMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { LimiterService, type BucketState, type ObserveResponse, type Lease as LeaseMsg } from "./gen/sluice/v1/sluice_pb.js";

export { Code, ConnectError };
export type { BucketState, ObserveResponse };

/** Costs per dimension; 0 is the bucket's cost per call. */
export type Costs = Record<string, number | bigint>;

export interface AcquireOptions {
  /** The lease's time to live in ms; the server's default when unset. */
  ttlMs?: number;
  /** Names the calling service in lease records. */
  caller?: string;
  /** A resend with the same key within a minute gets the first answer. */
  idempotencyKey?: string;
}

export interface WaitOptions extends AcquireOptions {
  /** The longest wait in ms; the client's timeout when unset. */
  maxWaitMs?: number;
}

export interface ClientOptions {
  /** The server, e.g. "http://127.0.0.1:7070". */
  baseUrl: string;
  /** A bearer token, when the server has --auth. */
  token?: string;
  /** "2" speaks HTTP/2 (gRPC-style streams); "1.1" by default. */
  httpVersion?: "1.1" | "2";
  /** The bound of every call without its own (a lease's too), in ms (default 30 s). */
  timeoutMs?: number;
}

/** A denial: nothing was granted; ask again in retryInMs. */
export class RetryIn {
  readonly granted = false;
  constructor(readonly retryInMs: number) {}
}

/** No slot within the wait's bound; ask again in retryInMs. */
export class SlotTimeout extends Error {
  constructor(readonly retryInMs: number) {
    super(`sluice: no slot within the wait; retry in ${retryInMs} ms`);
    this.name = "SlotTimeout";
  }
}

/** A grant held through the service. Release it, or hold it with `await using`. */
export class Lease implements AsyncDisposable {
  readonly granted = true;
  readonly id: string;
  /** When the lease took effect (for a wait, when its reservation became valid). */
  readonly createdAt: Date;
  expiresAt: Date;
  readonly items = new Map<string, bigint>();
  released = false;
  private beat?: NodeJS.Timeout;

  constructor(private readonly rpc: Client<typeof LimiterService>, msg: LeaseMsg, private readonly timeoutMs = 30_000) {
    this.id = msg.id;
    this.createdAt = msg.createdAt ? timestampDate(msg.createdAt) : new Date(0);
    this.expiresAt = msg.expiresAt ? timestampDate(msg.expiresAt) : new Date(0);
    for (const it of msg.items) this.items.set(it.dimension, it.cost);
  }

  /** Replaces the estimate on dimension with the actual cost, or changes it by delta. */
  async settle(dimension: string, amount: { actual: number | bigint } | { delta: number | bigint }) {
    const res = await this.rpc.settle({
      leaseId: this.id,
      dimension,
      amount: "actual" in amount ? { case: "actual", value: BigInt(amount.actual) } : { case: "delta", value: BigInt(amount.delta) },
    }, { timeoutMs: this.timeoutMs });
    this.items.set(dimension, res.held);
    return res;
  }

  /** Extends the lease to now + ttlMs (its own TTL when unset). */
  async heartbeat(ttlMs?: number) {
    const res = await this.rpc.heartbeat({ leaseIds: [this.id], ttl: ttlMs === undefined ? undefined : durationFromMs(ttlMs) }, { timeoutMs: this.timeoutMs });
    const r = res.results[0];
    if (r.error) throw new ConnectError(`lease ${this.id} was not extended: ${r.error}`, Code.FailedPrecondition);
    if (r.expiresAt) this.expiresAt = timestampDate(r.expiresAt);
  }

  /** Heartbeats every third of ttlMs until released. */
  keepAlive(ttlMs: number) {
    clearInterval(this.beat);
    this.beat = setInterval(() => void this.heartbeat(ttlMs).catch(() => {}), ttlMs / 3);
    this.beat.unref();
  }

  /** Gives the lease's slots back; true when this call released it. A release that failed may be tried again. */
  async release(): Promise<boolean> {
    clearInterval(this.beat);
    if (this.released) return false;
    const res = await this.rpc.release({ leaseId: this.id }, { timeoutMs: this.timeoutMs });
    this.released = true;
    return res.released;
  }

  async [Symbol.asyncDispose]() {
    await this.release().catch(() => {});
  }
}

export class SluiceClient {
  readonly rpc: Client<typeof LimiterService>;
  private readonly timeoutMs: number;

  constructor(opts: ClientOptions) {
    const auth: Interceptor = (next) => async (req) => {
      if (opts.token) req.header.set("Authorization", `Bearer ${opts.token}`);
      return next(req);
    };
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.rpc = createClient(
      LimiterService,
      createConnectTransport({ baseUrl: opts.baseUrl, httpVersion: opts.httpVersion ?? "1.1", interceptors: [auth] }),
    );
  }

  /** One attempt on every dimension: a Lease, or a RetryIn saying when to ask again. */
  async acquire(costs: Costs, opts: AcquireOptions = {}): Promise<Lease | RetryIn> {
    const res = await this.rpc.acquire(this.request(costs, opts), { timeoutMs: this.timeoutMs });
    if (!res.granted || !res.lease) return new RetryIn(res.retryIn ? durationMs(res.retryIn) : 0);
    return new Lease(this.rpc, res.lease, this.timeoutMs);
  }

  /** Waits in line on the server; throws SlotTimeout at once when the wait would be longer. */
  async wait(costs: Costs, opts: WaitOptions = {}): Promise<Lease> {
    const bound = opts.maxWaitMs ?? this.timeoutMs;
    const res = await this.rpc.wait({ ...this.request(costs, opts), maxWait: durationFromMs(bound) }, { timeoutMs: bound + 5000 });
    if (!res.granted || !res.lease) throw new SlotTimeout(res.retryIn ? durationMs(res.retryIn) : 0);
    return new Lease(this.rpc, res.lease, this.timeoutMs);
  }

  /** Waits for a slot and heartbeats it while held: `await using lease = await client.slot(...)` releases it at the end of the scope. */
  async slot(costs: Costs, opts: WaitOptions = {}): Promise<Lease> {
    const ttlMs = opts.ttlMs ?? 60_000;
    const lease = await this.wait(costs, { ...opts, ttlMs });
    lease.keepAlive(ttlMs);
    return lease;
  }

  /** Hands a vendor response to the fleet: a 429 cools its dimension down everywhere, headers lower balances. */
  async observe(profile: string, status: number, headers: Headers | Record<string, string>, body?: string | Uint8Array): Promise<ObserveResponse> {
    const h: Record<string, string> = {};
    new Headers(headers).forEach((v, k) => (h[k] = v));
    const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
    return this.rpc.observe({ profile, status, headers: h, body: status >= 300 && bytes ? bytes.subarray(0, 16384) : new Uint8Array() }, { timeoutMs: this.timeoutMs });
  }

  /** observe() for a fetch Response, such as the OpenAI and Anthropic SDKs' `.withResponse()` gives. */
  async observeResponse(profile: string, response: Response): Promise<ObserveResponse> {
    // A body already read (the application logged it) cannot be cloned: observe the headers alone.
    const body = response.status >= 300 && !response.bodyUsed ? await response.clone().text().catch(() => "") : undefined;
    return this.observe(profile, response.status, response.headers, body);
  }

  /** observe() for an SDK's APIError (status, headers and error body), as thrown on a 429. */
  async observeError(profile: string, err: { status?: number; headers?: Headers | Record<string, string>; error?: unknown }): Promise<ObserveResponse | undefined> {
    if (err.status === undefined) return undefined;
    return this.observe(profile, err.status, err.headers ?? {}, JSON.stringify({ error: err.error }));
  }

  /** The buckets' states (every bucket when none is named). */
  async peek(...dimensions: string[]): Promise<BucketState[]> {
    return (await this.rpc.peek({ dimensions }, { timeoutMs: this.timeoutMs })).buckets;
  }

  private request(costs: Costs, opts: AcquireOptions) {
    return {
      items: Object.entries(costs).map(([dimension, cost]) => ({ dimension, cost: BigInt(cost) })),
      ttl: opts.ttlMs === undefined ? undefined : durationFromMs(opts.ttlMs),
      caller: opts.caller ?? "",
      idempotencyKey: opts.idempotencyKey ?? "",
    };
  }
}
