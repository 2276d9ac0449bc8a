"""What keeps ``clawkit serve`` answering under hostile traffic: a loopback check of ``Host`` and
``Origin`` in ``--dev`` (a web page cannot drive a local agent by DNS rebinding), per-connection
header and idle timeouts with a connection cap (idle sockets cannot starve ``/healthz``), and a
bounded JSON nesting depth (400, not a 500)."""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("clawkit.serve")

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
#: deepest JSON nesting a request body may have
MAX_JSON_DEPTH = 64


def _host_name(value: str) -> str:
    """``Host`` header value without its port (``[::1]:8787`` → ``[::1]``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_loopback_host(value: str) -> bool:
    return _host_name(value) in LOOPBACK_NAMES


def is_loopback_origin(value: str) -> bool:
    try:
        parts = urlsplit(value.strip())
        host = parts.hostname or ""
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and (host in LOOPBACK_NAMES or f"[{host}]" in LOOPBACK_NAMES)


class LoopbackOnly:
    """ASGI middleware for ``--dev`` (no keys): a request whose ``Host`` is not a loopback name, or
    whose ``Origin`` (when sent) is not a loopback origin, gets 403 — a page on another site that
    rebinds its name to 127.0.0.1 sends its own name as ``Host``, and its own ``Origin``."""

    def __init__(self, app: Any, allowed_origins: list[str] = ()):
        self.app, self.allowed_origins = app, set(allowed_origins)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            host, origin = headers.get("host", ""), headers.get("origin")
            why = None
            if not is_loopback_host(host):
                why = f"Host {host!r} is not a loopback name (localhost, 127.0.0.1, [::1]): --dev serves loopback only"
            elif origin is not None and origin not in self.allowed_origins and not is_loopback_origin(origin):
                why = f"Origin {origin!r} is not a loopback origin: --dev refuses cross-site requests"
            if why is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                from .httperror import error_response

                await error_response(403, why, "not_loopback")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def json_depth(text: bytes | str) -> int:
    """The deepest nesting of arrays and objects in a JSON text (brackets inside strings ignored)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0  # cannot be deeper than the limit: skip the scan (the common case)
    depth = deepest = 0
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', '""', text):
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in "]}":
            depth -= 1
    return deepest


def loads_bounded(body: bytes) -> Any:
    """``json.loads`` that refuses nesting deeper than :data:`MAX_JSON_DEPTH` (ValueError)."""
    depth = json_depth(body)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"nested {depth} levels deep (at most {MAX_JSON_DEPTH})")
    try:
        return json.loads(body or b"{}")
    except RecursionError:
        raise ValueError(f"nested too deep (at most {MAX_JSON_DEPTH} levels)") from None


def raise_open_files() -> int:
    """Raise the soft limit on open files to the hard one (the usual soft 1,024 is what a slowloris
    exhausts); the new soft limit."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 65536
        want = min(want, 65536)
        if want > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        return soft
    except (ImportError, ValueError, OSError):  # pragma: no cover - not POSIX
        return 1024


#: connections the event loop accepts in one go (asyncio accepts up to the listen backlog at once)
BACKLOG = 128


def connection_cap(max_connections: int | None, open_files: int) -> int:
    """Connections served at once: ``max_connections``, never more than the open-file limit leaves
    once a burst of :data:`BACKLOG` fresh connections (accepted before any is looked at) and the
    files of the server itself (databases, logs, the processes tools start) are counted."""
    room = max(8, open_files - BACKLOG - max(64, open_files // 8))
    return min(max_connections, room) if max_connections else room


_BUSY_BODY = b'{"error":{"message":"too many connections","type":"unavailable","code":"busy"}}'
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
         b"retry-after: 1\r\ncontent-length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))


def guarded_protocol(header_timeout: float, max_connections: int) -> type:
    """uvicorn's HTTP protocol with a header timeout and a connection cap.

    * A connection must complete a request's headers within ``header_timeout`` seconds of being
      opened, or of its previous response: else it is closed (an idle socket, or a slowloris
      sending a byte at a time). A request being answered (a stream, a long poll) is never cut.
    * At ``max_connections``, a new connection closes the oldest one waiting for its headers;
      when every connection is busy with a request, the new one gets 503 and is closed.
    """
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    registry: OrderedDict[int, Any] = OrderedDict()

    class GuardedProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            registry[id(self)] = self
            self._arm()
            if len(registry) > max_connections:
                for key, other in list(registry.items()):
                    if other is not self and other._waiting():
                        other._drop("connection cap reached: closed the oldest connection still waiting for a request")
                        break
                else:
                    transport.write(_BUSY)
                    self._drop("connection cap reached and every connection is busy")

        def connection_lost(self, exc: Exception | None) -> None:
            registry.pop(id(self), None)
            timer = getattr(self, "_header_timer", None)
            if timer is not None:
                timer.cancel()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request's headers are due within the timeout too

        def _arm(self) -> None:
            timer = getattr(self, "_header_timer", None)
            if timer is not None:
                timer.cancel()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_due)

        def _waiting(self) -> bool:
            """No request in flight: waiting for (the rest of) a request's headers."""
            return self.cycle is None or self.cycle.response_complete

        def _headers_due(self) -> None:
            self._header_timer = None
            if self._waiting() and not self.transport.is_closing():
                self._drop(f"no complete request headers within {header_timeout:g} s")

        def _drop(self, why: str) -> None:
            log.debug("clawkit serve: closing %s: %s", self.client, why)
            registry.pop(id(self), None)
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedProtocol
