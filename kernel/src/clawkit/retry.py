"""Retrying a model call: backoff with jitter, ``Retry-After``, and a total time bound.

Every provider plugin uses :func:`call_with_retries` so that retries look and behave
the same whichever SDK is underneath: the provider turns each failure into a
classified :class:`~clawkit.errors.ProviderError`, this helper decides whether and
when to try again, and tells an observer about each retry (the agent turns that
into an ``llm.retry`` event, which ``clawkit run``/``chat`` print on stderr).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

from .errors import ProviderError

log = logging.getLogger("clawkit.retry")
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. ``total_timeout`` bounds the whole call, waits included:
    no retry starts when its wait would end past it."""

    max_retries: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0
    total_timeout: float | None = 120.0

    @classmethod
    def from_model_config(cls, cfg: Any) -> "RetryPolicy":
        """The policy a :class:`clawkit.config.ModelConfig` asks for (defaults where it is silent)."""
        def get(name: str, default: Any) -> Any:
            value = getattr(cfg, name, None)
            return default if value is None else value

        total = getattr(cfg, "retry_timeout", cls.total_timeout)
        return cls(max_retries=max(0, int(get("max_retries", cls.max_retries))),
                   base_delay=float(get("retry_base_delay", cls.base_delay)),
                   max_delay=float(get("retry_max_delay", cls.max_delay)),
                   max_retry_after=float(get("max_retry_after", cls.max_retry_after)),
                   total_timeout=None if total is None or total <= 0 else float(total))

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds before retry number ``attempt`` (1-based): exponential with jitter
        (half to all of ``base * 2**(attempt-1)``, capped), ``Retry-After`` as a floor."""
        exp = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        delay = exp * random.uniform(0.5, 1.0)
        return delay if retry_after is None else max(delay, retry_after)


@dataclass(frozen=True)
class RetryNotice:
    """One retry about to happen: after ``attempt`` of ``max_attempts`` failed with ``error``."""

    attempt: int
    max_attempts: int
    delay: float
    error: ProviderError

    def line(self) -> str:
        """One short human line: what failed, where, and when the next try is."""
        e = self.error
        what = e.reason or e.kind
        if e.status is not None:
            what = f"{what} (HTTP {e.status})"
        where = f" at {e.endpoint}" if e.endpoint else ""
        return f"model call failed: {what}{where}; retry {self.attempt}/{self.max_attempts - 1} in {self.delay:.1f}s"

    def as_event(self) -> dict[str, Any]:
        e = self.error
        return {"attempt": self.attempt, "max_attempts": self.max_attempts, "delay": round(self.delay, 3),
                "kind": e.kind, "status": e.status, "endpoint": e.endpoint, "error": e.message[:300],
                "line": self.line()}


OnRetry = Callable[[RetryNotice], "Awaitable[None] | None"]


async def call_with_retries(
    attempt_fn: Callable[[int], Awaitable[T]],
    *,
    policy: RetryPolicy,
    classify: Callable[[BaseException], ProviderError],
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``attempt_fn(attempt)`` until it returns, retrying classified retryable failures.

    ``policy.total_timeout`` bounds the time from the first failure to the last retry
    (waits and retried attempts included; the first attempt is bounded by the
    request timeout alone, so a cold first call does not eat the retry budget).

    ``classify(exc)`` turns any exception into a :class:`ProviderError` (a
    ``ProviderError`` raised by ``attempt_fn`` is taken as classified already). The
    error finally raised says how many attempts were made and why it stopped.
    Cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``) is never retried.
    """
    attempts = policy.max_retries + 1
    started: float | None = None  # the bound counts from the first failure: a cold first call is not retrying
    attempt = 0
    while True:
        attempt += 1
        try:
            return await attempt_fn(attempt)
        except ProviderError as exc:
            error = exc
        except Exception as exc:
            error = classify(exc)
            if error.__cause__ is None:
                error.__cause__ = exc
        error.attempts = attempt
        if started is None:
            started = clock()
        if not error.retryable:
            raise _final(error, attempt, "not retryable")
        if attempt >= attempts:
            raise _final(error, attempt, f"gave up after {attempt} attempt{'s' if attempt != 1 else ''}")
        if error.retry_after is not None and error.retry_after > policy.max_retry_after:
            raise _final(error, attempt, f"the server asks to wait {error.retry_after:g}s, more than "
                                         f"max_retry_after={policy.max_retry_after:g}s")
        delay = policy.delay(attempt, error.retry_after)
        elapsed = clock() - started
        if policy.total_timeout is not None and elapsed + delay > policy.total_timeout:
            raise _final(error, attempt, f"gave up after {attempt} attempt{'s' if attempt != 1 else ''} in "
                                         f"{elapsed:.1f}s (retry_timeout={policy.total_timeout:g}s)")
        notice = RetryNotice(attempt, attempts, delay, error)
        log.info("%s", notice.line())
        if on_retry is not None:
            try:
                result = on_retry(notice)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # an observer must not turn a retry into a failure
                log.exception("on_retry observer failed")
        await sleep(delay)


def _final(error: ProviderError, attempt: int, why: str) -> ProviderError:
    return error.with_message(f"{error.message} ({why})", attempts=attempt)


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), or None.

    ``headers``: any mapping with ``get`` (httpx, requests, a dict, an SDK's header object).
    """
    import email.utils

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
