"""One Python process of the mixed fleet (clients/mixed_test.go): workers
wait in line for a request and a slot together, hold the slot briefly and
release it, printing each grant and release as a JSON line in Unix
milliseconds. A grant's "lo" is the later of the call's start and the
instant the lease took effect."""

import asyncio
import datetime
import json
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from sluice_client import Client, SlotTimeout  # noqa: E402


def now_ms():
    return time.time() * 1000


def rfc3339_ms(s):
    """Unix milliseconds of an RFC 3339 timestamp with up to nine
    fractional digits (Python parses at most six)."""
    s = re.sub(r"(\.\d{6})\d+", r"\1", s).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(s).timestamp() * 1000


async def worker(client, until):
    while now_ms() < until:
        lo = now_ms()
        try:
            lease = await client.wait({"mix#rpm": 1, "mix#slots": 1}, max_wait=2, ttl=10)
        except SlotTimeout:
            continue
        hi = now_ms()
        lo = min(max(lo, rfc3339_ms(lease.created_at)), hi)
        print(json.dumps({"grant": lease.id, "lo": lo, "hi": hi}), flush=True)
        await asyncio.sleep(random.uniform(0.01, 0.03))
        print(json.dumps({"release": lease.id, "lo": now_ms()}), flush=True)
        await lease.release()


async def main():
    client = Client(os.environ["SLUICE_URL"], token=os.environ.get("SLUICE_TOKEN"))
    until = now_ms() + float(sys.argv[1]) * 1000
    await asyncio.gather(*(worker(client, until) for _ in range(int(sys.argv[2]))))


asyncio.run(main())
