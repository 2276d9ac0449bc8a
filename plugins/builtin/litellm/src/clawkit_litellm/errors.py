"""What a failed model call means: which kind of failure, retry or not, how long to wait.

litellm maps every provider's errors onto OpenAI-style exception classes with a
``status_code`` — and reports a refused connection or a missing API key as HTTP 500.
So we look through the whole exception chain for the real cause (the socket error,
the DNS failure, the TLS error) before trusting a status; by class *name*, so this
module stays cheap and testable without importing litellm.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from clawkit.errors import ProviderError, exception_chain, is_overflow_message, transport_cause
from clawkit.retry import parse_retry_after

_CLASS_PREFIXES = re.compile(r"^(?:(?:litellm\.)?\w*(?:Error|Exception|Timeout): )+")
_MISSING_KEY = re.compile(r"missing credentials|api[_ ]?key (?:client option )?must be set|no (?:api )?key is set|"
                          r"missing \w+ api key|api_key.*(?:not set|is required)", re.I)
_UNKNOWN_PROVIDER = re.compile(r"LLM Provider NOT provided", re.I)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    yield from exception_chain(exc, limit=32)


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


def is_context_overflow(exc: BaseException) -> bool:
    if type(exc).__name__ == "ContextWindowExceededError":
        return True
    return _status(exc) != 429 and is_overflow_message(str(exc))  # "tokens per minute" rate limits mention tokens too


def summary(exc: BaseException, limit: int = 300) -> str:
    """The error as one line, without litellm's repeated class-name prefixes."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = _CLASS_PREFIXES.sub("", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _transport_kind(exc: BaseException) -> tuple[str, str, bool] | None:
    """(kind, what, retryable) when the chain holds a network-level cause (the kernel's reading)."""
    cause = transport_cause(exc)
    if cause is not None and cause[0] == "tls":
        tls = next((e for e in _chain(exc) if "SSL" in type(e).__name__ or "Certificate" in type(e).__name__), exc)
        return "tls", f"TLS failure ({summary(tls, 160)})", False
    return cause


def classify(exc: BaseException, *, model: str = "", endpoint: str | None = None,
             timeout: float | None = None) -> ProviderError:
    """Turn whatever litellm raised into a classified :class:`ProviderError`."""
    where = f" at {endpoint}" if endpoint else ""
    head = f"model {model}{where}" if model else f"model call{where}"
    detail = summary(exc)
    status = _status(exc)
    fields: dict[str, Any] = {"endpoint": endpoint, "model": model or None}
    if is_context_overflow(exc):
        return ProviderError(f"{head}: the request exceeds the model's context window (HTTP {status or 400}): {detail}",
                             kind="context_overflow", status=status, retryable=False, **fields)
    transport = _transport_kind(exc)
    if transport is not None:
        kind, what, retryable = transport
        if kind == "timeout" and timeout is not None:
            what = f"timed out after {timeout:g}s"
        return ProviderError(f"{head}: {what}: {detail}", kind=kind, retryable=retryable, reason=what, **fields)
    text = " ".join(str(e) for e in _chain(exc))
    if _MISSING_KEY.search(text):
        return ProviderError(f"{head}: no API key (set model.api_key or the provider's key variable): {detail}",
                             kind="auth", retryable=False, **fields)
    if _UNKNOWN_PROVIDER.search(text):
        return ProviderError(f"{head}: litellm does not know this model's provider (use provider/model, "
                             f"e.g. openai/gpt-4o-mini): {detail}", kind="config", retryable=False, **fields)
    if status is None:
        return ProviderError(f"{head}: {detail}", kind="config", retryable=False, **fields)
    err = ProviderError(f"{head}: HTTP {status}: {detail}", status=status,
                        retry_after=parse_retry_after(_headers(exc)), **fields)
    if err.kind == "not_found":
        err.args = (f"{head}: HTTP 404 (unknown model or wrong api_base?): {detail}",)
    return err
