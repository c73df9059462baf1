"""Tests of sluice_client against a real `sluice serve`, started by the Go
test clients/clients_test.go with SLUICE_URL and SLUICE_TOKEN set."""

import asyncio
import os
import socket
import sys
import threading
import unittest
import urllib.parse

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


class CountingProxy:
    """A TCP proxy in front of the service that counts the connections
    clients open through it."""

    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.upstream = (u.hostname, u.port)
        self.accepted = 0
        self.conns = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(down)
            up = socket.create_connection(self.upstream)
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def drop(self):
        """Closes every connection, as a server that restarts does."""
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.drop()
        self.listener.close()


class ConnectionReuseTest(unittest.IsolatedAsyncioTestCase):
    """A client keeps its connections open between calls: a new one per
    call costs a TCP handshake, and at a few hundred calls a second leaves
    enough sockets in TIME_WAIT to run out of local ports."""

    async def test_calls_reuse_connections(self):
        proxy = CountingProxy(URL)
        self.addCleanup(proxy.close)
        client = Client(proxy.url, token=TOKEN, timeout=10)
        for _ in range(30):
            await client.peek("py#tpm")
        self.assertEqual(proxy.accepted, 1, "30 calls in a row")
        await asyncio.gather(*(client.peek("py#tpm") for _ in range(40)))
        self.assertLessEqual(proxy.accepted, 1 + 40, "40 calls at once")
        before = proxy.accepted
        for _ in range(30):
            await client.peek("py#tpm")
        self.assertEqual(proxy.accepted, before, "30 more calls in a row, after calls at once")

    async def test_closed_connections_are_replaced(self):
        proxy = CountingProxy(URL)
        self.addCleanup(proxy.close)
        client = Client(proxy.url, token=TOKEN, timeout=10)
        await client.peek("py#tpm")
        proxy.drop()
        await asyncio.sleep(0.1)
        self.assertTrue(await client.peek("py#tpm"))
        self.assertEqual(proxy.accepted, 2)


if __name__ == "__main__":
    unittest.main()


class HostileTest(unittest.IsolatedAsyncioTestCase):
    """Waiters beyond any thread pool, cancelled waits, a heartbeat that
    fails, and error pages that are not the service's."""

    def setUp(self):
        self.client = Client(URL, token=TOKEN, timeout=10)

    async def test_many_waiters_do_not_starve_releases(self):
        # More waiters than asyncio's default executor has threads: the
        # holders' releases must not queue behind the waits.
        n = min(32, (os.cpu_count() or 1) + 4) + 2
        timeouts = []

        async def worker():
            try:
                async with self.client.slot({"py#many": 1}, max_wait=4):
                    await asyncio.sleep(0.05)
            except SlotTimeout as e:
                timeouts.append(e)

        await asyncio.gather(*(worker() for _ in range(n)))
        self.assertEqual(timeouts, [], f"{len(timeouts)} of {n} waits timed out")

    async def test_cancelled_wait_keeps_no_slot(self):
        holder = await self.client.acquire({"py#cancel": 2})
        self.assertTrue(holder)

        async def want():
            async with self.client.slot({"py#cancel": 2}, max_wait=3):
                await asyncio.sleep(10)

        task = asyncio.ensure_future(want())
        await asyncio.sleep(0.3)  # in line on the server
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        await holder.release()  # the slot goes to the cancelled wait's request
        for _ in range(50):
            state = (await self.client.peek("py#cancel"))[0]
            if state.get("tokensMilli", "0") == "2000":
                break
            await asyncio.sleep(0.1)
        self.assertEqual(state.get("tokensMilli", "0"), "2000", "the cancelled wait's slot is held by nobody")

    async def test_slot_without_ttl_releases_and_keeps_the_error(self):
        raised = None
        try:
            async with self.client.slot({"py#nottl": 2}, ttl=None):
                await asyncio.sleep(0.1)
                raise KeyError("the block's error")
        except BaseException as e:  # noqa: B036
            raised = e
        state = (await self.client.peek("py#nottl"))[0]
        self.assertEqual((repr(raised), state.get("tokensMilli", "0")), ('KeyError("the block\'s error")', "2000"))

    async def test_error_page_keeps_its_code(self):
        # A proxy's 503 page in front of the service is unavailable (retry),
        # not unknown.
        class Page(threading.Thread):
            def run(self):
                conn, _ = srv.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/html\r\nContent-Length: 19\r\nConnection: close\r\n\r\n<html>busy</html>\r\n")

        srv = socket.create_server(("127.0.0.1", 0))
        page = Page(daemon=True)
        page.start()
        client = Client(f"http://127.0.0.1:{srv.getsockname()[1]}", token=TOKEN, timeout=5)
        with self.assertRaises(SluiceError) as ctx:
            await client.peek()
        srv.close()
        self.assertEqual(ctx.exception.code, "unavailable")


class IdempotentRetryTest(unittest.IsolatedAsyncioTestCase):
    async def test_retry_after_cancel_holds_its_slot(self):
        # A wait with an idempotency key, cancelled and sent again with the
        # key (what the key is for), gets the first call's lease: the
        # client must not have given it back.
        client = Client(URL, token=TOKEN, timeout=10)
        holder = await client.acquire({"py#retry": 2})
        self.assertTrue(holder)
        task = asyncio.ensure_future(client.wait({"py#retry": 2}, max_wait=5, idempotency_key="order-42"))
        await asyncio.sleep(0.3)
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        await holder.release()  # the server's wait is granted now
        await asyncio.sleep(0.5)
        lease = await client.wait({"py#retry": 2}, max_wait=5, idempotency_key="order-42")
        self.assertTrue(lease)
        state = (await client.peek("py#retry"))[0]
        self.assertEqual(state.get("tokensMilli", "0"), "0", "the retried wait's lease was released by the client")
        self.assertFalse(await client.acquire({"py#retry": 2}), "another caller got the slots the retried wait holds")
        await lease.release()
