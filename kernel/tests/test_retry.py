"""The kernel's retry helper and the classified ProviderError every provider raises."""

from __future__ import annotations

import asyncio

import pytest

from clawkit.config import ModelConfig
from clawkit.errors import PROVIDER_ERROR_KINDS, ProviderError
from clawkit.retry import RetryNotice, RetryPolicy, call_with_retries


class FakeClock:
    """Virtual time: ``sleep`` advances it, so bounds are checked without waiting."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def run(attempt_fn, policy, clock=None, notices=None):
    clock = clock or FakeClock()
    return asyncio.run(call_with_retries(attempt_fn, policy=policy, classify=lambda e: ProviderError(str(e)),
                                         on_retry=(notices.append if notices is not None else None),
                                         sleep=clock.sleep, clock=clock))


def failing(*errors, then="ok"):
    calls: list[int] = []

    async def fn(n: int):
        calls.append(n)
        if n <= len(errors):
            raise errors[n - 1]
        return then

    return fn, calls


def test_kinds_and_defaults():
    assert ProviderError("x", status=429).kind == "rate_limit" and ProviderError("x", status=429).retryable
    assert ProviderError("x", status=401).kind == "auth" and not ProviderError("x", status=401).retryable
    assert ProviderError("x", status=404).kind == "not_found"
    assert ProviderError("x", status=422).kind == "bad_request" and not ProviderError("x", status=422).retryable
    assert ProviderError("x", status=503).kind == "http" and ProviderError("x", status=503).retryable
    assert ProviderError("x", status=408).retryable and ProviderError("x", status=409).retryable
    assert ProviderError("x", context_overflow=True).context_overflow
    cut = ProviderError("x", kind="stream_cut", partial_text="half an", retryable=False)
    assert cut.partial_text == "half an" and not cut.retryable
    assert set(PROVIDER_ERROR_KINDS) >= {"connection", "dns", "tls", "timeout", "http", "auth", "stream_cut"}
    with pytest.raises(ValueError, match="unknown ProviderError kind"):
        ProviderError("x", kind="weird")


def test_retryable_then_success_notifies_each_retry():
    fn, calls = failing(ProviderError("busy", status=503, endpoint="http://m/v1"),
                        ProviderError("slow down", status=429, retry_after=2.0))
    notices: list[RetryNotice] = []
    clock = FakeClock()
    assert run(fn, RetryPolicy(max_retries=3, base_delay=0.1), clock, notices) == "ok"
    assert calls == [1, 2, 3]
    assert [n.attempt for n in notices] == [1, 2] and notices[0].max_attempts == 4
    assert clock.sleeps[1] >= 2.0  # Retry-After is a floor
    assert "http (HTTP 503) at http://m/v1; retry 1/3" in notices[0].line()
    assert notices[1].as_event()["kind"] == "rate_limit"


def test_not_retryable_fails_on_the_first_attempt():
    fn, calls = failing(ProviderError("bad key", status=401))
    with pytest.raises(ProviderError, match=r"bad key \(not retryable\)") as err:
        run(fn, RetryPolicy(max_retries=5))
    assert calls == [1] and err.value.attempts == 1 and err.value.kind == "auth"


def test_exhausted_says_how_many_attempts():
    fn, calls = failing(*[ProviderError("down", kind="connection")] * 5)
    with pytest.raises(ProviderError, match=r"gave up after 3 attempts") as err:
        run(fn, RetryPolicy(max_retries=2, base_delay=0.01))
    assert calls == [1, 2, 3] and err.value.attempts == 3 and err.value.kind == "connection"


def test_total_time_bound_stops_retrying():
    fn, calls = failing(*[ProviderError("down", kind="connection")] * 50)
    clock = FakeClock()
    with pytest.raises(ProviderError, match=r"retry_timeout=5s"):
        run(fn, RetryPolicy(max_retries=40, base_delay=1.0, max_delay=2.0, total_timeout=5.0), clock)
    assert clock.now <= 5.0 and 2 <= len(calls) < 10


def test_retry_after_longer_than_allowed_fails_at_once():
    fn, calls = failing(ProviderError("later", status=429, retry_after=600))
    with pytest.raises(ProviderError, match="more than max_retry_after=120s"):
        run(fn, RetryPolicy())
    assert calls == [1]


def test_unclassified_exceptions_go_through_classify_and_keep_their_cause():
    fn, _ = failing(KeyError("raw"))
    with pytest.raises(ProviderError) as err:
        run(fn, RetryPolicy(max_retries=0))
    assert isinstance(err.value.__cause__, KeyError)


def test_cancellation_is_never_retried():
    fn, calls = failing(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        run(fn, RetryPolicy(max_retries=3))
    assert calls == [1]


def test_policy_from_model_config():
    cfg = ModelConfig(name="m", max_retries=2, retry_base_delay=0.2, retry_max_delay=3, max_retry_after=9,
                      retry_timeout=0)
    p = RetryPolicy.from_model_config(cfg)
    assert (p.max_retries, p.base_delay, p.max_delay, p.max_retry_after, p.total_timeout) == (2, 0.2, 3.0, 9.0, None)
    assert RetryPolicy.from_model_config(ModelConfig(name="m")).total_timeout == 120.0
    assert "retry_timeout" not in ModelConfig(name="m", retry_timeout=3).settings()
