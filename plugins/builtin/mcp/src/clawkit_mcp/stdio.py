"""A stdio MCP server launched before the ``mcp`` SDK is imported, and the transport over its pipes.

Importing the SDK costs about half a second of CPU; a Node server needs a second or more to boot.
:func:`spawn` starts the server's process with nothing but asyncio (no SDK import), so every
server of an agent is already booting while the SDK loads, and :func:`transport` then speaks
newline-delimited JSON-RPC over the pipes, as the SDK's own ``stdio_client`` does (same streams of
``SessionMessage``, same shutdown: close stdin, wait, then end the process group).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from contextlib import asynccontextmanager, suppress
from typing import IO, Any

log = logging.getLogger("clawkit.mcp")

#: what the SDK's stdio_client lets a server inherit from our environment (POSIX)
INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
STOP_GRACE = 2.0  # seconds a server has to exit once its stdin is closed (the SDK's value)
KILL_GRACE = 2.0
CHUNK = 1 << 16


def server_env(extra: dict[str, str] | None) -> dict[str, str]:
    """The SDK's default environment (a few safe variables) with the server's own ``env`` over it."""
    env = {k: v for k in INHERITED_ENV if (v := os.environ.get(k)) is not None and not v.startswith("()")}
    return env | dict(extra or {})


async def spawn(command: str, args: list[str], env: dict[str, str] | None, cwd: str, errlog: IO[str]) -> asyncio.subprocess.Process:
    """Start the server in a session of its own (so its whole process tree can be ended); raises OSError."""
    return await asyncio.create_subprocess_exec(
        command, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=errlog,
        env=server_env(env), cwd=cwd, start_new_session=True)


async def stop(proc: asyncio.subprocess.Process) -> None:
    """Close stdin, give the server :data:`STOP_GRACE` to exit, then SIGTERM, then SIGKILL its group."""
    if proc.stdin is not None:
        with suppress(Exception):
            proc.stdin.close()
    for sig, grace in ((None, STOP_GRACE), (signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, KILL_GRACE)):
        if sig is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), grace)
            return
        except asyncio.TimeoutError:
            continue
    log.warning("MCP server process %d is still alive after SIGKILL; abandoning it", proc.pid)


@asynccontextmanager
async def transport(proc: asyncio.subprocess.Process, encoding: str = "utf-8"):
    """``(read, write)`` SDK streams over a spawned server's pipes; the server is stopped on exit."""
    import anyio
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    read_send, read_recv = anyio.create_memory_object_stream[Any](0)
    write_send, write_recv = anyio.create_memory_object_stream[Any](0)

    def parse(line: str) -> Any:
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as exc:
            log.warning("MCP server sent a line that is not JSON-RPC: %s", str(exc)[:200])
            return exc

    async def reader() -> None:
        assert proc.stdout is not None
        buffer = b""
        try:
            async with read_send:
                while chunk := await proc.stdout.read(CHUNK):
                    *lines, buffer = (buffer + chunk).split(b"\n")
                    for raw in lines:
                        if raw.strip():
                            await read_send.send(parse(raw.decode(encoding, errors="replace")))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError, OSError):
            pass

    async def writer() -> None:
        assert proc.stdin is not None
        try:
            async with write_recv:
                async for message in write_recv:
                    body = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    proc.stdin.write((body + "\n").encode(encoding))
                    await proc.stdin.drain()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError, OSError):
            await read_send.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_recv, write_send
        finally:
            with anyio.CancelScope(shield=True):
                await write_send.aclose()
                await read_recv.aclose()
                await stop(proc)
            tg.cancel_scope.cancel()
