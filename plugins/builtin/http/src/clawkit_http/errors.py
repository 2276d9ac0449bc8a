"""Classifying a failed HTTP model call: kind, retryable, how long the server asks us to wait.

The kinds are those of :class:`clawkit.errors.ProviderError` (``connection``, ``dns``,
``tls``, ``timeout``, ``http``, ``auth``, ``bad_request``, ``not_found``,
``rate_limit``, ``context_overflow``, ``stream_cut``, ``config``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clawkit.errors import is_overflow_message, transport_cause
from clawkit.retry import parse_retry_after

RETRYABLE_STATUS = {408, 409, 429}


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
    if status != 429 and is_overflow_message(message):
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


def from_exception(exc: BaseException, *, streaming: bool) -> Failure:
    """A transport failure (the kernel reads the cause from the exception chain, by class name, so
    httpx loads lazily); ``reason`` says it in a few words for the one-line retry notices."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    message = f"{type(exc).__name__}: {text}"
    cause = transport_cause(exc)
    names = {cls.__name__ for cls in type(exc).__mro__}
    if cause is not None and (cause[0] != "connection" or cause[1] == "connection refused"):  # tls, dns, timeout, refused
        kind, what, retryable = cause
        return Failure(kind, message, retryable, reason=what)
    if "ConnectError" in names:
        return Failure("connection", message, True, reason="the connection failed")
    if streaming or names & {"RemoteProtocolError", "ReadError"}:  # the connection went while the answer came
        return Failure("stream_cut", message, True, reason="the answer was cut off")
    return Failure("connection", message, True, reason="the connection failed")
