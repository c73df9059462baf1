// One Node process of the mixed fleet (clients/mixed_test.go): workers take
// a request and a slot together, hold the slot briefly and release it,
// printing each grant and release as a JSON line in Unix milliseconds.
import { Lease, SluiceClient } from "../src/index.js";

const client = new SluiceClient({ baseUrl: process.env.SLUICE_URL!, token: process.env.SLUICE_TOKEN });
const until = Date.now() + Number(process.argv[2]) * 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function worker() {
  while (Date.now() < until) {
    const lo = Date.now();
    const lease = await client.acquire({ "mix#rpm": 1, "mix#slots": 1 }, { ttlMs: 10_000 });
    const hi = Date.now();
    if (!(lease instanceof Lease)) {
      await sleep(Math.min(lease.retryInMs, 50));
      continue;
    }
    console.log(JSON.stringify({ grant: lease.id, lo, hi }));
    await sleep(10 + Math.random() * 20);
    console.log(JSON.stringify({ release: lease.id, lo: Date.now() }));
    await lease.release();
  }
}

await Promise.all(Array.from({ length: Number(process.argv[3]) }, worker));
