"""One Python process of the mixed fleet (clients/mixed_test.go): workers
take a request and a slot together, hold the slot briefly and release it,
printing each grant and release as a JSON line in Unix milliseconds."""

import asyncio
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from sluice_client import Client  # noqa: E402


def now_ms():
    return time.time() * 1000


async def worker(client, until):
    while now_ms() < until:
        lo = now_ms()
        lease = await client.acquire({"mix#rpm": 1, "mix#slots": 1}, ttl=10)
        hi = now_ms()
        if not lease:
            await asyncio.sleep(min(lease.seconds, 0.05))
            continue
        print(json.dumps({"grant": lease.id, "lo": lo, "hi": hi}), flush=True)
        await asyncio.sleep(random.uniform(0.01, 0.03))
        print(json.dumps({"release": lease.id, "lo": now_ms()}), flush=True)
        await lease.release()


async def main():
    client = Client(os.environ["SLUICE_URL"], token=os.environ.get("SLUICE_TOKEN"))
    until = now_ms() + float(sys.argv[1]) * 1000
    await asyncio.gather(*(worker(client, until) for _ in range(int(sys.argv[2]))))


asyncio.run(main())
