"""What a failed model call means: retry or not, how long to wait, and how to say it.

litellm maps every provider's errors onto OpenAI-style exception classes with a
``status_code``; we classify by status and class name rather than importing
litellm here, so this module stays cheap and testable without it.
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from dataclasses import dataclass
from typing import Any

RETRYABLE_STATUS = {408, 409, 429}
_TRANSIENT_NAMES = ("Timeout", "APIConnectionError", "ConnectError", "RemoteProtocolError", "ReadError",
                    "ServerDisconnected", "ClientPayloadError", "MidStreamFallbackError")


_CLASS_PREFIXES = re.compile(r"^(?:(?:litellm\.)?\w*(?:Error|Exception|Timeout): )+")


@dataclass
class Failure:
    """One failed attempt, classified."""

    error: BaseException
    status: int | None
    retryable: bool
    context_overflow: bool = False
    retry_after: float | None = None
    timed_out: bool = False

    def summary(self, limit: int = 300) -> str:
        """The error as one line: class name and message, without litellm's repeated prefixes."""
        text = " ".join(str(self.error).split()) or repr(self.error)
        name = type(self.error).__name__
        text = f"{name}: {_CLASS_PREFIXES.sub('', text)}"
        return text if len(text) <= limit else text[: limit - 1] + "…"


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _headers(exc: BaseException) -> Any:
    for attr in ("litellm_response_headers", "headers"):
        headers = getattr(exc, attr, None)
        if headers:
            return headers
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None) or {}


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    def get(name: str) -> str | None:
        try:
            value = headers.get(name) or headers.get(name.title())
        except AttributeError:
            return None
        return str(value).strip() if value is not None else None

    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def is_context_overflow(exc: BaseException) -> bool:
    if type(exc).__name__ == "ContextWindowExceededError":
        return True
    if _status(exc) == 429:  # "tokens per minute" rate limits mention tokens too
        return False
    text = str(exc).lower()
    return any(s in text for s in ("context_length_exceeded", "maximum context length", "context window",
                                   "prompt is too long"))


def classify(exc: BaseException) -> Failure:
    """Decide whether ``exc`` is worth retrying and how long the server asked us to wait."""
    status = _status(exc)
    if is_context_overflow(exc):
        return Failure(exc, status, retryable=False, context_overflow=True)
    names = {cls.__name__ for cls in type(exc).__mro__}
    timed_out = any("Timeout" in n for n in names) or isinstance(exc, TimeoutError)
    transient = timed_out or any(n in names for n in _TRANSIENT_NAMES) or isinstance(exc, ConnectionError)
    retryable = transient or (status is not None and (status in RETRYABLE_STATUS or status >= 500))
    if status is not None and 400 <= status < 500 and status not in RETRYABLE_STATUS:
        retryable = False  # auth, bad request, not found: the same request fails again
    return Failure(exc, status, retryable=retryable, retry_after=parse_retry_after(_headers(exc)),
                   timed_out=timed_out)


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None = None) -> float:
    """Seconds before retry number ``attempt`` (1-based).

    Exponential with jitter (between half and all of ``base * 2**(attempt-1)``,
    capped at ``cap``); a server's ``Retry-After`` is honoured as a floor.
    """
    exp = min(cap, base * (2 ** (attempt - 1)))
    delay = exp * random.uniform(0.5, 1.0)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay
