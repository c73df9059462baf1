"""A client of `sluice serve`: share vendor API limits with a Go fleet.

Speaks the Sluice API v1 over Connect's JSON protocol with the standard library alone
(Python 3.9+). Every call is a coroutine; its HTTP request runs in a thread of the client's
(waits on threads apart, so releases never queue behind them) on a kept-alive connection.

    client = Client("http://127.0.0.1:7070", token=os.environ.get("SLUICE_TOKEN"))
    async with client.slot({"openai#gpt-4o#rpm": 1, "openai#gpt-4o#tpm": 2000}) as lease:
        response = await call_openai()
        await lease.settle("openai#gpt-4o#tpm", response.usage.total_tokens)
        await client.observe("openai#gpt-4o", response.status_code, response.headers)
"""

import asyncio
import base64
import concurrent.futures
import contextlib
import http.client
import json
import select
import threading
import urllib.parse

__all__ = ["Client", "Lease", "RetryIn", "SluiceError", "SlotTimeout"]

_SERVICE = "/sluice.v1.LimiterService/"
# Connect's codes for an HTTP error without a Connect body (a proxy's page).
_HTTP_CODES = {400: "internal", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented",
               429: "unavailable", 502: "unavailable", 503: "unavailable", 504: "unavailable"}


class SluiceError(Exception):
    """An error the service answered: code is Connect's ("not_found", "unavailable", ...)."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class SlotTimeout(SluiceError):
    """No slot within the wait's bound; ask again in retry_in seconds."""

    def __init__(self, retry_in):
        super().__init__("slot_timeout", f"no slot within the wait; retry in {retry_in:.3f}s")
        self.retry_in = retry_in


class RetryIn:
    """A denial: nothing was granted; ask again in `seconds`."""

    def __init__(self, seconds, dimensions):
        self.seconds = seconds
        self.dimensions = dimensions

    def __bool__(self):
        return False

    def __repr__(self):
        return f"RetryIn({self.seconds:.3f}s)"


def _seconds(d):
    """Parses a protobuf JSON duration ("1.5s")."""
    return float(d[:-1]) if d else 0.0


def _duration(seconds):
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


def _items(costs):
    return [{"dimension": d, "cost": int(c)} for d, c in costs.items()]


class Lease:
    """A grant held through the service. Release it, or use Client.slot."""

    def __init__(self, client, msg):
        self._client = client
        self.id = msg["id"]
        # When the lease took effect (a wait's reservation: when it became
        # valid) and when it expires, as RFC 3339 strings.
        self.created_at = msg.get("createdAt", "")
        self.expires_at = msg.get("expiresAt", "")
        self.items = {i["dimension"]: int(i.get("cost", 0)) for i in msg.get("items", [])}
        self.released = False

    async def settle(self, dimension, actual=None, delta=None):
        """Sets dimension's cost to actual, or changes it by delta (negative refunds)."""
        body = {"leaseId": self.id, "dimension": dimension}
        if (actual is None) == (delta is None):
            raise ValueError("settle: give actual or delta")
        if actual is not None:
            body["actual"] = int(actual)
        else:
            body["delta"] = int(delta)
        res = await self._client._call("Settle", body)
        self.items[dimension] = int(res.get("held", 0))
        return res

    async def heartbeat(self, ttl=None):
        """Extends the lease to now + ttl seconds (its own TTL when None)."""
        body = {"leaseIds": [self.id]}
        if ttl is not None:
            body["ttl"] = _duration(ttl)
        r = (await self._client._call("Heartbeat", body))["results"][0]
        if r.get("error"):
            raise SluiceError("lease_" + r["error"], f"lease {self.id} was not extended: {r['error']}")
        self.expires_at = r.get("expiresAt", self.expires_at)

    async def release(self):
        """Gives the lease's slots back; True when this call released it."""
        if self.released:
            return False
        res = await self._client._call("Release", {"leaseId": self.id})
        self.released = True
        return bool(res.get("released"))


class Client:
    """A client of one `sluice serve` (a lease's calls must reach the server that granted it)."""

    def __init__(self, base_url="http://127.0.0.1:7070", token=None, timeout=30.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._pool = _Pool(self.base_url)
        self._waits = concurrent.futures.ThreadPoolExecutor(256, "sluice-wait")
        self._calls = concurrent.futures.ThreadPoolExecutor(32, "sluice")

    async def acquire(self, costs, ttl=None, caller=None, idempotency_key=None):
        """One attempt on every dimension of costs ({dimension: cost}, 0
        for the bucket's cost per call): a Lease, or a falsy RetryIn."""
        res = await self._call("Acquire", self._request(costs, ttl, caller, idempotency_key))
        if not res.get("granted"):
            return RetryIn(_seconds(res.get("retryIn")), res.get("dimensions", []))
        return Lease(self, res["lease"])

    async def wait(self, costs, max_wait=None, ttl=None, caller=None, idempotency_key=None):
        """Waits in line on the server, at most max_wait seconds (the client's
        timeout when None); raises SlotTimeout when the wait would be longer."""
        bound = self.timeout if max_wait is None else max_wait
        body = self._request(costs, ttl, caller, idempotency_key)
        body["maxWait"] = _duration(bound)
        res = await self._call("Wait", body, timeout=bound + 5)
        if not res.get("granted"):
            raise SlotTimeout(_seconds(res.get("retryIn")))
        return Lease(self, res["lease"])

    @contextlib.asynccontextmanager
    async def slot(self, costs, max_wait=None, ttl=60.0, caller=None):
        """Waits for a slot, heartbeats it while the block runs (every
        third of ttl) and releases it on exit, even on an error."""
        lease = await self.wait(costs, max_wait=max_wait, ttl=ttl, caller=caller)
        beat = asyncio.ensure_future(self._beat(lease, ttl))
        try:
            yield lease
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await beat
            with contextlib.suppress(SluiceError, OSError):
                await lease.release()

    async def _beat(self, lease, ttl):
        while True:  # ttl None: the server's default, at least 15 s
            await asyncio.sleep((ttl or 15) / 3)
            with contextlib.suppress(Exception):
                await lease.heartbeat(ttl)

    async def observe(self, profile, status, headers, body=b""):
        """Hands a vendor response to the fleet (a 429 cools its dimension down
        everywhere); profile is a preset's prefix ("openai#gpt-4o", "anthropic")."""
        if isinstance(body, str):
            body = body.encode()
        msg = {"profile": profile, "status": int(status), "headers": {str(k): str(v) for k, v in dict(headers).items()}}
        if body and int(status) >= 300:
            msg["body"] = base64.b64encode(body[:16384]).decode()
        return await self._call("Observe", msg)

    async def observe_response(self, profile, response):
        """observe() for a response with status_code (or status), headers and
        content or text: httpx's, requests', the OpenAI and Anthropic SDKs' raw one."""
        status = getattr(response, "status_code", None) or getattr(response, "status", 0)
        body = b""
        if int(status) >= 300:
            body = getattr(response, "content", None) or getattr(response, "text", b"") or b""
        return await self.observe(profile, status, response.headers, body)

    async def peek(self, *dimensions):
        """The buckets' states (every bucket when none is named)."""
        return (await self._call("Peek", {"dimensions": list(dimensions)})).get("buckets", [])

    def _request(self, costs, ttl, caller, key):
        body = {"items": _items(costs)}
        if ttl is not None:
            body["ttl"] = _duration(ttl)
        if caller:
            body["caller"] = caller
        if key:
            body["idempotencyKey"] = key
        return body

    async def _call(self, method, body, timeout=None):
        pool = self._waits if method == "Wait" else self._calls
        fut = pool.submit(self._post, method, body, timeout or self.timeout)
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            # Its thread goes on: give back what it gets, unless a resend (its key) takes it.
            if method in ("Acquire", "Wait") and not body.get("idempotencyKey"):
                fut.add_done_callback(self._give_back)
            raise

    def _give_back(self, fut):
        if not fut.cancelled() and fut.exception() is None and fut.result().get("granted"):
            self._calls.submit(self._post, "Release", {"leaseId": fut.result()["lease"]["id"]}, self.timeout)

    def _post(self, method, body, timeout):
        headers = {"Content-Type": "application/json", "Connect-Timeout-Ms": str(int(timeout * 1000))}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        status, data = self._pool.post(self._pool.prefix + _SERVICE + method, json.dumps(body).encode(), headers, timeout)
        try:
            msg = json.loads(data or b"{}")
        except ValueError:
            msg = None
        if status < 300 and isinstance(msg, dict):
            return msg
        if not isinstance(msg, dict) or "code" not in msg:
            msg = {"code": _HTTP_CODES.get(status, "unknown"), "message": f"HTTP {status}: not an answer of the service"}
        raise SluiceError(msg["code"], msg.get("message", ""))


class _Pool:
    """Kept-alive connections shared by the worker threads: a call takes an idle one (one
    the server closed meanwhile is replaced) or opens one, and gives it back after the answer."""

    MAX_IDLE = 32

    def __init__(self, base_url):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url: {base_url!r} is not an http:// or https:// URL")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self.prefix = u.path.rstrip("/")
        self._idle = []
        self._lock = threading.Lock()

    def post(self, path, body, headers, timeout):
        conn = self._take(timeout)
        try:
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except http.client.HTTPException as e:
            conn.close()
            raise ConnectionError(f"sluice: {e!r}") from e
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._give(conn)
        return resp.status, data

    def _take(self, timeout):
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if _open(conn):
                    conn.sock.settimeout(timeout)
                    return conn
                conn.close()
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _give(self, conn):
        with self._lock:
            if len(self._idle) < self.MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()


def _open(conn):
    """Reports an idle connection still open (one the server closed reads as ready: EOF)."""
    if conn.sock is None:
        return False
    try:
        ready, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not ready
