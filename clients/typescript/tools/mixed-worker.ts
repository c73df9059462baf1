// One Node process of the mixed fleet (clients/mixed_test.go): workers wait
// in line for a request and a slot together, hold the slot briefly and
// release it, printing each grant and release as a JSON line in Unix
// milliseconds. A grant's "lo" is the later of the call's start and the
// instant the lease took effect.
import { SluiceClient, SlotTimeout } from "../src/index.js";

const client = new SluiceClient({ baseUrl: process.env.SLUICE_URL!, token: process.env.SLUICE_TOKEN });
const until = Date.now() + Number(process.argv[2]) * 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function worker() {
  while (Date.now() < until) {
    const start = Date.now();
    let lease;
    try {
      lease = await client.wait({ "mix#rpm": 1, "mix#slots": 1 }, { maxWaitMs: 2000, ttlMs: 10_000 });
    } catch (err) {
      if (err instanceof SlotTimeout) continue;
      throw err;
    }
    const hi = Date.now();
    const lo = Math.min(Math.max(start, lease.createdAt.getTime()), hi);
    console.log(JSON.stringify({ grant: lease.id, lo, hi }));
    await sleep(10 + Math.random() * 20);
    console.log(JSON.stringify({ release: lease.id, lo: Date.now() }));
    await lease.release();
  }
}

await Promise.all(Array.from({ length: Number(process.argv[3]) }, worker));
