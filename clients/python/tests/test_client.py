"""Tests of sluice_client against a real `sluice serve`, started by the Go
test clients/clients_test.go with SLUICE_URL and SLUICE_TOKEN set."""

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from sluice_client import Client, RetryIn, SluiceError, SlotTimeout  # noqa: E402

URL = os.environ.get("SLUICE_URL", "http://127.0.0.1:7070")
TOKEN = os.environ.get("SLUICE_TOKEN")

OPENAI_429 = (
    '{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): '
    'Limit 30000, Used 29937, Requested 385. Please try again in 644ms.","type":"tokens","code":"rate_limit_exceeded"}}'
)


class FakeResponse:
    """What httpx and the SDKs' raw responses look like to observe_response."""

    def __init__(self, status_code, headers, content=b""):
        self.status_code = status_code
        self.headers = headers
        self.content = content


class ClientTest(unittest.IsolatedAsyncioTestCase):
    def setUp(self):
        self.client = Client(URL, token=TOKEN, timeout=10)

    async def test_acquire_settle_release(self):
        lease = await self.client.acquire({"py#tpm": 300, "py#slots": 1}, caller="pytest")
        self.assertTrue(lease)
        self.assertEqual(lease.items, {"py#tpm": 300, "py#slots": 1})
        res = await lease.settle("py#tpm", 450)
        self.assertEqual(res["held"], "450")
        self.assertTrue(await lease.release())
        self.assertFalse(await lease.release())

    async def test_denial_is_a_value(self):
        leases = [await self.client.acquire({"py#rpm": 1}) for _ in range(3)]
        self.assertTrue(all(leases))
        denied = await self.client.acquire({"py#rpm": 1})
        self.assertIsInstance(denied, RetryIn)
        self.assertFalse(denied)
        self.assertGreater(denied.seconds, 0)

    async def test_wait_fails_fast(self):
        with self.assertRaises(SlotTimeout) as cm:
            for _ in range(5):
                await self.client.wait({"py#rpm": 1}, max_wait=0.5)
        self.assertGreater(cm.exception.retry_in, 0.5)

    async def test_slot_heartbeats_and_releases(self):
        async with self.client.slot({"py#slots": 2}, ttl=0.6) as lease:
            await asyncio.sleep(1.5)  # past the TTL: the heartbeats keep it
            await lease.heartbeat(0.6)
            states = await self.client.peek("py#slots")
            self.assertEqual(states[0].get("tokensMilli", "0"), "0")  # JSON leaves zeros out
        states = await self.client.peek("py#slots")
        self.assertEqual(states[0]["tokensMilli"], "2000")

    async def test_slot_waits_in_line(self):
        first = await self.client.acquire({"py#slots": 2})

        async def later():
            await asyncio.sleep(0.3)
            await first.release()

        task = asyncio.ensure_future(later())
        async with self.client.slot({"py#slots": 2}, max_wait=5) as lease:
            self.assertTrue(lease.id)
        await task

    async def test_observe(self):
        res = await self.client.observe_response(
            "openai#gpt-4o", FakeResponse(429, {"retry-after-ms": "644"}, OPENAI_429.encode())
        )
        self.assertEqual(res["kind"], "rate_limited")
        self.assertIn("openai#gpt-4o#tpm", res["cooled"])

    async def test_errors(self):
        with self.assertRaises(SluiceError) as cm:
            await self.client.acquire({"nope#rpm": 1})
        self.assertEqual(cm.exception.code, "not_found")
        self.assertIn("nope#rpm", cm.exception.message)
        with self.assertRaises(SluiceError) as cm:
            await Client(URL, token="slc_wrong").acquire({"py#rpm": 1})
        self.assertEqual(cm.exception.code, "unauthenticated")


if __name__ == "__main__":
    unittest.main()
