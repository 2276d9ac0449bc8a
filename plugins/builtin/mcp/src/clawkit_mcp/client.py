"""Connections to MCP servers, kept on a thread of their own.

A turn runs on an event loop of its own (``Agent.run`` opens one per turn) while an MCP
session is bound to the loop it was opened on, so every connection of an agent lives on
one background loop (:class:`Hub`) and outlives turns; turns reach it through futures.
Each server has an owner task that holds the SDK's ``Client`` open until the server is
stopped or its transport ends (a crash), after which the next need restarts it with
backoff.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Callable, Coroutine

from .config import ServerConfig

log = logging.getLogger("clawkit.mcp")
STOP_TIMEOUT = 10.0


class ServerUnavailable(Exception):
    """The server could not be started, crashed, or did not answer in time (a tool error, not a crash)."""


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, which anyio task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    exc = _leaf(exc)
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, (OSError, ServerUnavailable)) else f"{type(exc).__name__}: {text}"


class ServerConnection:
    """One MCP server: start on need, list its tools, call them, restart after a crash."""

    def __init__(self, name: str, config: ServerConfig, workspace: Path, on_change: Callable[[str], None] | None = None):
        self.name = name
        self.config = config
        self.workspace = Path(workspace)
        self.on_change = on_change
        self.state = "stopped"  # stopped | starting | ready | crashed | failed
        self.error: str | None = None
        self.tools: list[Any] = []
        self.capabilities: Any = None
        self.server_info: Any = None
        self.restarts = 0
        self.starts = 0
        #: wall-clock bounds (``time.time()``) of the latest start: launch, and ready (tools listed)
        self.started: float | None = None
        self.ready: float | None = None
        self.changed = False
        self._client: Any = None
        self._owner: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._crashed_at = 0.0
        self._lock: asyncio.Lock | None = None
        self._proc: Any = None  # a stdio server launched by _start, handed to its transport

    # --- lifecycle ----------------------------------------------------------------------

    async def ensure(self) -> None:
        """Ready the server, starting (or restarting with backoff) it; raises :class:`ServerUnavailable`."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.state == "ready" and self._client is not None:
                return
            if self.state == "failed":
                raise ServerUnavailable(f"MCP server {self.name!r} is unavailable: {self.error}")
            if self.state == "crashed":
                if self.restarts >= self.config.max_restarts:
                    self.state = "failed"
                    self.error = f"it crashed {self.restarts + 1} times; given up ({self.error})"
                    raise ServerUnavailable(f"MCP server {self.name!r} is unavailable: {self.error}")
                delay = min(0.25 * 2**self.restarts, 5.0) - (time.monotonic() - self._crashed_at)
                if delay > 0:
                    await asyncio.sleep(delay)
                self.restarts += 1
            await self._start()

    async def _start(self) -> None:
        self.state, self._stopping = "starting", False
        self.starts += 1
        self.started, self.ready = time.time(), None
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._wake = asyncio.Event()
        if self.config.transport == "stdio":  # launched before the SDK import, so they overlap (see .stdio)
            from . import stdio

            errlog = self._errlog()
            try:
                self._proc = await stdio.spawn(self.config.command, list(self.config.args), dict(self.config.env) or None,
                                               self.config.cwd or str(self.workspace), errlog)
            except (OSError, ValueError) as exc:
                self._fail(f"it failed to start: {_describe(exc)}{self._stderr_tail()}")
            finally:
                errlog.close()  # the child holds its own copy
        self._owner = asyncio.ensure_future(self._own(ready, self._wake))
        timeout = self.config.startup_timeout
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except asyncio.TimeoutError:
            await self._abandon()
            self._fail(f"it did not start within {timeout:g} s (startup_timeout){self._stderr_tail()}")
        except Exception as exc:
            await self._abandon()
            self._fail(f"it failed to start: {_describe(exc)}{self._stderr_tail()}")

    def _fail(self, why: str) -> None:
        self.state, self.error, self._crashed_at = "crashed", why, time.monotonic()
        raise ServerUnavailable(f"MCP server {self.name!r}: {why}")

    async def _abandon(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            owner.cancel()
            await asyncio.wait({owner}, timeout=STOP_TIMEOUT)
        if self._proc is not None:  # the owner was cancelled before it took the process
            from . import stdio

            proc, self._proc = self._proc, None
            await stdio.stop(proc)

    async def _own(self, ready: asyncio.Future, wake: asyncio.Event) -> None:
        from mcp import Client
        from mcp.types import Implementation

        try:
            client = Client(self._transport(wake), mode="legacy", message_handler=self._on_message, cache=None,
                            client_info=Implementation(name="clawkit", version="0.1.0"))
            async with client:
                self.tools = await _list_tools(client)
                self.capabilities = client.server_capabilities
                self.server_info = client.server_info
                self._client, self.state, self.error = client, "ready", None
                self.ready = time.time()
                ready.set_result(None)
                await wake.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ServerUnavailable("start cancelled"))
            if not isinstance(exc, Exception):
                raise
            log.info("MCP server %s ended: %s", self.name, _describe(exc))
        finally:
            self._client = None
            if self._proc is not None:  # launched but never handed to a transport (start cancelled or failed)
                from . import stdio

                proc, self._proc = self._proc, None
                await asyncio.shield(stdio.stop(proc))
            if self.state == "ready" and not self._stopping:
                self.state, self.error, self._crashed_at = "crashed", "its connection ended (the server exited?)", time.monotonic()
                log.warning("MCP server %s: connection ended; it will be restarted when next needed", self.name)

    def _transport(self, wake: asyncio.Event):
        """The SDK transport, wrapped so that its read side ending (the process died) wakes the owner."""
        cfg = self.config
        if cfg.transport == "stdio":
            from . import stdio

            proc, self._proc = self._proc, None
            inner = stdio.transport(proc)
        else:
            import httpx2 as httpx  # the HTTP client the mcp SDK is built on
            from mcp.client.streamable_http import streamable_http_client

            http = httpx.AsyncClient(headers=dict(cfg.headers), timeout=httpx.Timeout(cfg.call_timeout, connect=cfg.startup_timeout))
            inner = streamable_http_client(cfg.url, http_client=http)
        return _watched(inner, wake)

    def _errlog(self):
        """The server's stderr goes to a log file in the workspace (its tail explains a failed start)."""
        try:
            folder = self.workspace / ".clawkit" / "mcp"
            folder.mkdir(parents=True, exist_ok=True)
            self._log_path = folder / f"{self.name}.log"
            return open(self._log_path, "a", encoding="utf-8")  # noqa: SIM115 - handed to the child, closed with it
        except OSError:
            self._log_path = None
            return open(os.devnull, "w")  # noqa: SIM115

    def _stderr_tail(self) -> str:
        path = getattr(self, "_log_path", None)
        if not path:
            return ""
        try:
            lines = [ln for ln in Path(path).read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return ("; its stderr ends: " + " | ".join(lines[-3:])[-400:]) if lines else ""

    async def _on_message(self, message: Any) -> None:
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self.changed = True
            if self.on_change is not None:
                self.on_change(self.name)

    async def stop(self) -> None:
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            done, _ = await asyncio.wait({owner}, timeout=STOP_TIMEOUT)
            if not done:
                owner.cancel()
                await asyncio.wait({owner}, timeout=STOP_TIMEOUT)
        if self.state in ("ready", "starting"):
            self.state = "stopped"

    # --- requests -----------------------------------------------------------------------

    async def refresh(self) -> list[Any]:
        """Re-list the tools after ``notifications/tools/list_changed``."""
        await self.ensure()
        self.changed = False
        self.tools = await asyncio.wait_for(_list_tools(self._client), self.config.call_timeout)
        return self.tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        from mcp.shared.exceptions import MCPError

        await self.ensure()
        client, timeout = self._client, self.config.call_timeout
        try:
            return await asyncio.wait_for(client.call_tool(tool, arguments), timeout)
        except asyncio.TimeoutError:
            raise ServerUnavailable(f"MCP server {self.name!r}: {tool} did not answer within {timeout:g} s (call_timeout)") from None
        except MCPError as exc:
            if self._client is None or "closed" in str(exc).lower():
                if self.state == "ready":
                    self.state, self.error, self._crashed_at = "crashed", "its connection ended during a call", time.monotonic()
                raise ServerUnavailable(
                    f"MCP server {self.name!r} closed the connection during {tool} (it crashed?); "
                    "it is restarted on the next call"
                ) from None
            raise ServerUnavailable(f"MCP server {self.name!r}: {tool} failed: {exc}") from None

    async def request(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Any other client request (``list_resources``, ``read_resource``, ``get_prompt``…)."""
        await self.ensure()
        try:
            return await asyncio.wait_for(getattr(self._client, method)(*args, **kwargs), self.config.call_timeout)
        except asyncio.TimeoutError:
            raise ServerUnavailable(f"MCP server {self.name!r}: {method} did not answer in time") from None
        except ServerUnavailable:
            raise
        except Exception as exc:
            raise ServerUnavailable(f"MCP server {self.name!r}: {method} failed: {_describe(exc)}") from None


async def _list_tools(client: Any) -> list[Any]:
    tools, cursor = [], None
    for _ in range(100):  # a server paging forever cannot hang the agent
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


@asynccontextmanager
async def _watched(inner: Any, wake: asyncio.Event):
    """Forward the transport's read stream; when it ends (EOF: the server exited) set ``wake``."""
    import anyio

    async with inner as (read, write):
        send, receive = anyio.create_memory_object_stream(0)

        async def pump() -> None:
            try:
                async with send:
                    async for item in read:
                        await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            finally:
                wake.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                yield receive, write
            finally:
                tg.cancel_scope.cancel()


class Hub:
    """The MCP servers of one agent on a background event loop; safe to use from any thread or loop."""

    def __init__(self, servers: dict[str, ServerConfig], workspace: Path, on_change: Callable[[str], None] | None = None):
        self.connections = {name: ServerConnection(name, cfg, workspace, on_change) for name, cfg in servers.items()}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="clawkit-mcp", daemon=True)
        self._thread.start()
        self.closed = False

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        if self.closed:
            coro.close()
            raise ServerUnavailable("the agent's MCP connections are closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Await ``coro`` on the hub's loop from another event loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def run_sync(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        """Stop every server (their processes end) and the loop; idempotent."""
        if self.closed:
            return
        try:
            self.run_sync(self._stop_all(), timeout=STOP_TIMEOUT * 2)
        except Exception as exc:  # never let shutdown raise; the processes die with their pipes anyway
            log.warning("stopping MCP servers: %s", _describe(exc))
        self.closed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(STOP_TIMEOUT)
        if not self._thread.is_alive():
            self.loop.close()

    async def start_all(self, names: list[str] | None = None) -> dict[str, BaseException | None]:
        """Start (or ready) the named servers, default all, concurrently; each one's failure (or None) by name.

        One server failing or hanging never holds up or takes down the others: each has its own
        ``startup_timeout`` and its error is kept on its connection (``state``, ``error``)."""
        conns = [self.connections[n] for n in (self.connections if names is None else names)]
        outcomes = await asyncio.gather(*(c.ensure() for c in conns), return_exceptions=True)
        return {c.name: (out if isinstance(out, BaseException) else None) for c, out in zip(conns, outcomes)}

    async def _stop_all(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()), return_exceptions=True)
