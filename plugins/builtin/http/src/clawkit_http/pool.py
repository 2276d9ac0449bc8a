"""A connection pool for httpx whose cost per request does not grow with the requests in flight.

httpcore's ``AsyncConnectionPool`` re-examines every connection it holds on each request and
each release (``has_expired`` → a ``select`` and anyio's attribute lookup per connection):
quadratic in the requests in flight — at 1,000 concurrent sessions that was most of a
session's CPU. This pool keeps idle HTTP/1.1 connections per origin on a stack and looks
only at the one it takes. The connections themselves are httpcore's (``AsyncHTTPConnection``:
connect, TLS, h11, keep-alive expiry), and the transport is httpx's own
``AsyncHTTPTransport`` with this pool in place of httpcore's, so requests, responses,
timeouts and exception classes are httpx's.

Limits: at most ``max_connections`` requests in flight (others wait, up to the request's
``pool`` timeout, then ``httpx.PoolTimeout``); at most ``max_keepalive`` idle connections
are kept (the rest are closed on release, and an idle one is closed when a new connection
would pass ``max_connections``).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import Any, AsyncIterator

import httpcore
import httpx

from .netio import AsyncioBackend


class LeanPool:
    """httpcore's request interface (``handle_async_request``) over a stack of idle connections."""

    def __init__(self, ssl_context: ssl.SSLContext | None, *, max_connections: int, max_keepalive: int,
                 keepalive_expiry: float | None = 5.0) -> None:
        self._ssl_context = ssl_context
        self._max = max_connections
        self._keep = max_keepalive
        self._expiry = keepalive_expiry
        self._idle: dict[tuple[bytes, bytes, int], list[Any]] = {}  # origin → idle connections, newest last
        self._idle_count = 0
        self._in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False
        self._backend = AsyncioBackend()
        self._closing: set[asyncio.Task[Any]] = set()  # closes in progress (a task nobody holds may vanish)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        await self._slot(request)
        try:
            conn = self._take(request.url.origin)
            try:
                response = await conn.handle_async_request(request)
            except BaseException:
                self._put(conn)  # httpcore has closed a connection that failed mid-request
                raise
        except BaseException:
            self._free()
            raise
        return httpcore.Response(status=response.status, headers=response.headers,
                                 content=_Body(response.stream, conn, self), extensions=response.extensions)

    async def _slot(self, request: httpcore.Request) -> None:
        if self._in_flight < self._max and not self._waiters:
            self._in_flight += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        timeout = (request.extensions.get("timeout") or {}).get("pool")
        try:
            async with asyncio.timeout(timeout):
                await waiter  # _free hands its slot over: _in_flight already counts us
        except TimeoutError:
            raise httpcore.PoolTimeout(f"no connection free within {timeout}s "
                                       f"({self._max} requests in flight)") from None
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._free()  # the slot came as we were cancelled: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def _free(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to the longest waiter
                return
        self._in_flight -= 1

    def _take(self, origin: Any) -> Any:
        stack = self._idle.get((origin.scheme, origin.host, origin.port))
        while stack:
            conn = stack.pop()
            self._idle_count -= 1
            if conn.is_available() and not conn.has_expired():
                return conn
            self._close_soon(conn)
        if self._in_flight + self._idle_count > self._max:
            self._evict()
        return httpcore.AsyncHTTPConnection(origin=origin, ssl_context=self._ssl_context,
                                            keepalive_expiry=self._expiry, network_backend=self._backend)

    def _evict(self) -> None:
        for stack in self._idle.values():
            if stack:
                self._idle_count -= 1
                self._close_soon(stack.pop(0))  # the oldest
                return

    def _put(self, conn: Any) -> None:
        if not self._closed and conn.is_available() and self._idle_count < self._keep:
            origin = conn._origin
            self._idle.setdefault((origin.scheme, origin.host, origin.port), []).append(conn)
            self._idle_count += 1
        elif not conn.is_closed():
            self._close_soon(conn)

    def _release(self, conn: Any) -> None:
        self._put(conn)
        self._free()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle, self._idle_count = self._idle, {}, 0
        for stack in idle.values():
            for conn in stack:
                await conn.aclose()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def __aenter__(self) -> "LeanPool":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


    def _close_soon(self, conn: Any) -> None:
        """Close a connection nobody uses without making the caller wait for it."""
        try:
            task = asyncio.get_running_loop().create_task(conn.aclose())
        except RuntimeError:  # no loop: nothing is listening on it either
            return
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


class _Body:
    """A response body that gives its connection back to the pool when closed."""

    def __init__(self, stream: Any, conn: Any, pool: LeanPool) -> None:
        self._stream, self._conn, self._pool = stream, conn, pool
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:
            yield part

    async def aclose(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            await self._stream.aclose()  # h11: idle again if the exchange completed, else closed
        finally:
            self._pool._release(self._conn)


class LeanTransport(httpx.AsyncHTTPTransport):
    """httpx's transport (request/response mapping, exception classes) over a :class:`LeanPool`."""

    def __init__(self, *, verify: ssl.SSLContext, limits: httpx.Limits) -> None:
        super().__init__(verify=verify, limits=limits)
        self._pool = LeanPool(verify, max_connections=limits.max_connections or 1000,
                              max_keepalive=limits.max_keepalive_connections or 100,
                              keepalive_expiry=limits.keepalive_expiry)
