"""Classifying a failed HTTP model call: kind, retryable, how long the server asks us to wait.

The kinds are those of :class:`clawkit.errors.ProviderError` (``connection``, ``dns``,
``tls``, ``timeout``, ``http``, ``auth``, ``bad_request``, ``not_found``,
``rate_limit``, ``context_overflow``, ``stream_cut``, ``config``).
"""

from __future__ import annotations

import errno
import socket
import ssl
from dataclasses import dataclass
from typing import Any

from clawkit.retry import parse_retry_after

RETRYABLE_STATUS = {408, 409, 429}
OVERFLOW_MARKERS = ("context_length_exceeded", "maximum context length", "context window", "prompt is too long",
                    "too many tokens")


@dataclass
class Failure:
    """One failed attempt."""

    kind: str
    message: str
    retryable: bool
    status: int | None = None
    retry_after: float | None = None
    reason: str | None = None


def from_status(status: int, message: str, headers: Any) -> Failure:
    """An HTTP error answer."""
    lowered = message.lower()
    if status != 429 and any(m in lowered for m in OVERFLOW_MARKERS):
        return Failure("context_overflow", message, False, status)
    if status == 429:
        return Failure("rate_limit", message, True, status, parse_retry_after(headers))
    if status in (401, 403):
        return Failure("auth", message, False, status)
    if status == 404:
        return Failure("not_found", message, False, status)
    retryable = status in RETRYABLE_STATUS or status >= 500
    kind = "http" if retryable or status >= 500 else "bad_request"
    return Failure(kind, message, retryable, status, parse_retry_after(headers) if retryable else None)


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    return chain


def from_exception(exc: BaseException, *, streaming: bool) -> Failure:
    """A transport failure (httpx's exception classes, read by name so httpx loads lazily);
    ``reason`` says it in a few words for the one-line retry notices."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    text = " ".join(str(exc).split()) or type(exc).__name__
    message = f"{type(exc).__name__}: {text}"
    chain = _chain(exc)
    if "TimeoutException" in names or any(isinstance(e, (TimeoutError, socket.timeout)) for e in chain):
        return Failure("timeout", message, True, reason="timed out")
    if any(isinstance(e, ssl.SSLError) for e in chain) or "certificate" in text.lower():
        return Failure("tls", message, False, reason="TLS failure")
    if any(isinstance(e, socket.gaierror) for e in chain):
        temporary = any(isinstance(e, socket.gaierror) and e.errno == socket.EAI_AGAIN for e in chain)
        return Failure("dns", message, temporary, reason="the host name does not resolve")
    if any(isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED for e in chain):
        return Failure("connection", message, True, reason="connection refused")
    if "ConnectError" in names:
        return Failure("connection", message, True, reason="the connection failed")
    if streaming or names & {"RemoteProtocolError", "ReadError"}:
        return Failure("stream_cut", message, True, reason="the answer was cut off")
    return Failure("connection", message, True, reason="the connection failed")
