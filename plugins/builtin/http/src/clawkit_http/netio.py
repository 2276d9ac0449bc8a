"""httpcore's network layer on plain asyncio (a protocol and a buffer) instead of anyio.

httpcore's default backend goes through anyio: every read and write opens a cancel scope
(``fail_after``) and every keep-alive check builds anyio's attribute table — about a third
of the client's CPU per request under load. The provider only ever runs on asyncio, so this
backend talks to asyncio's transport directly: data arrives through ``data_received`` into
a buffer, a read waits on one future with a ``call_later`` timer, a write is
``transport.write`` (waiting only while the transport asks us to pause). Failures are
httpcore's exception classes, chained to the OS error, as the anyio backend raises them.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any, Iterable

import httpcore


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: Any = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None  # a read waiting for data
        self.drained: asyncio.Future[None] | None = None  # a write waiting for resume_writing
        self.paused = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: BaseException | None) -> None:
        self.eof = True
        self.error = exc
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


async def _wait(fut: asyncio.Future[None], timeout: float | None, error: type[Exception]) -> None:
    if timeout is None:
        await fut
        return
    timer = asyncio.get_running_loop().call_later(timeout, _expire, fut, error, timeout)
    try:
        await fut
    finally:
        timer.cancel()


def _expire(fut: asyncio.Future[None], error: type[Exception], timeout: float) -> None:
    if not fut.done():
        fut.set_exception(error(f"timed out after {timeout:g}s"))


#: writes are held back (up to this many bytes) until the next read: h11 writes a request's
#: head and body separately, and one segment instead of two halves the wake-ups on both ends
CORK = 64 * 1024


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, transport: Any, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._held: list[bytes] = []
        self._held_size = 0

    def _flush(self) -> None:
        if self._held:
            data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
            self._held, self._held_size = [], 0
            if not self._transport.is_closing():  # else the read that follows reports the hang-up
                self._transport.write(data)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._flush()
        proto = self._protocol
        if not proto.buffer and not proto.eof:
            proto.waiter = asyncio.get_running_loop().create_future()
            try:
                await _wait(proto.waiter, timeout, httpcore.ReadTimeout)
            finally:
                proto.waiter = None
        if proto.buffer:
            data = bytes(proto.buffer[:max_bytes])
            del proto.buffer[:max_bytes]
            return data
        if proto.error is not None:
            raise httpcore.ReadError(str(proto.error) or type(proto.error).__name__) from proto.error
        return b""  # the server closed the connection

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        proto = self._protocol
        if self._transport.is_closing():
            error = proto.error
            raise httpcore.WriteError(str(error) if error else "the connection is closed") from error
        self._held.append(buffer)
        self._held_size += len(buffer)
        if self._held_size < CORK:
            return
        self._flush()
        if proto.paused:
            proto.drained = asyncio.get_running_loop().create_future()
            try:
                await _wait(proto.drained, timeout, httpcore.WriteTimeout)
            finally:
                proto.drained = None
            if proto.error is not None:
                raise httpcore.WriteError(str(proto.error)) from proto.error

    async def aclose(self) -> None:
        self._held, self._held_size = [], 0
        self._transport.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        self._flush()
        loop = asyncio.get_running_loop()
        try:
            transport = await loop.start_tls(self._transport, self._protocol, ssl_context,
                                             server_hostname=server_hostname, ssl_handshake_timeout=timeout)
        except (TimeoutError, asyncio.TimeoutError) as exc:
            self._transport.close()
            raise httpcore.ConnectTimeout(f"TLS handshake: timed out after {timeout:g}s") from exc
        except (OSError, ssl.SSLError, ConnectionError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        self._protocol.transport = transport
        return AsyncioStream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":  # idle, yet the server sent something or hung up
            return bool(self._protocol.buffer) or self._protocol.eof
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Protocol, host, port, local_addr=(local_address, 0) if local_address else None)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"connecting to {host}:{port}: timed out after {timeout:g}s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # asyncio's default; said for clarity
        return AsyncioStream(transport, protocol)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_unix_connection(_Protocol, path)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"connecting to {path}: timed out after {timeout:g}s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return AsyncioStream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
