"""The litellm model provider: one ``complete`` call = one model answer, retried as needed.

clawkit does the retrying (the OpenAI SDK's and litellm's own retries are turned
off, else a 429 is retried twice over): 429, 5xx, connection errors and timeouts
are retried with exponential backoff and jitter, honouring ``Retry-After``, up to
``ModelConfig.max_retries`` times. A stream that breaks after text reached the
user is not retried (the user would see the text twice).

Provider-only settings, read from the model config's extra keys (not sent to the
model): ``retry_base_delay`` (seconds, default 0.5), ``retry_max_delay`` (30),
``max_retry_after`` (the longest ``Retry-After`` worth waiting for, 120),
``input_cost_per_token`` / ``output_cost_per_token`` (prices for models litellm
does not know). Every other extra key is passed to ``litellm.acompletion``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Awaitable, Callable

from clawkit.providers import OnText, ProviderError
from clawkit.types import LlmRequest, LlmResponse, Usage

from ._litellm import load_litellm
from .assemble import StreamAssembler, response_from_completion
from .errors import Failure, backoff_delay, classify

log = logging.getLogger("clawkit.litellm")

PROVIDER_ONLY = ("retry_base_delay", "retry_max_delay", "max_retry_after", "input_cost_per_token",
                 "output_cost_per_token")
LOCAL_API_KEY = "sk-clawkit-no-key"


class _CallbackError(Exception):
    """Wraps an exception raised by ``on_text`` so it is not mistaken for a model failure."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


class _Attempt:
    """What one attempt delivered before it failed."""

    def __init__(self) -> None:
        self.delivered_chars = 0


class LitellmProvider:
    """A :class:`clawkit.providers.Provider` backed by ``litellm.acompletion``.

    ``config`` is a :class:`clawkit.config.ModelConfig`. ``on_retry(attempt, delay,
    failure)`` (optional) is told about each retry before its wait, e.g. to emit an
    ``llm.retry`` event; ``sleep`` is injectable for tests.
    """

    def __init__(self, config: Any, *, on_retry: Callable[..., Any] | None = None,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.config = config
        extras = dict(config.settings()) if hasattr(config, "settings") else {}
        self.retry_base_delay = float(extras.pop("retry_base_delay", 0.5))
        self.retry_max_delay = float(extras.pop("retry_max_delay", 30.0))
        self.max_retry_after = float(extras.pop("max_retry_after", 120.0))
        self.prices = (extras.pop("input_cost_per_token", None), extras.pop("output_cost_per_token", None))
        self.extra_params = extras
        self.on_retry = on_retry
        self.sleep = sleep

    # --- the call -----------------------------------------------------------------------

    def build_params(self, request: LlmRequest) -> dict[str, Any]:
        """The keyword arguments for ``litellm.acompletion`` (without ``stream``)."""
        cfg = self.config
        model = request.model or cfg.name
        params: dict[str, Any] = {
            "model": model,
            "messages": request.openai_messages(),
            "timeout": cfg.timeout,
            "max_retries": 0,  # the OpenAI SDK's own retries: clawkit retries instead
            "num_retries": 0,  # litellm's (would need tenacity)
            "drop_params": True,  # a setting the model does not take is dropped, not an error
        }
        if request.tools:
            params["tools"] = [t.openai_schema() for t in request.tools]
        if cfg.api_base:
            base = cfg.api_base.rstrip("/")
            if model.startswith("anthropic/") and base.endswith("/v1"):
                base = base[:-3]  # litellm appends /v1/messages itself
            params["api_base"] = base
        api_key = cfg.api_key or (LOCAL_API_KEY if cfg.api_base else None)
        if api_key:
            params["api_key"] = api_key
        if cfg.temperature is not None:
            params["temperature"] = cfg.temperature
        if cfg.max_tokens is not None:
            params["max_tokens"] = cfg.max_tokens
        params.update(self.extra_params)
        params.update(request.settings)
        for key in ("stream", "stream_options"):  # request.stream decides, not a stray setting
            params.pop(key, None)
        effort = request.reasoning_effort or params.pop("reasoning_effort", None)
        if effort:
            params["reasoning_effort"] = effort
        return params

    async def warm(self) -> None:
        """Import litellm in a thread (seconds on a cold, busy machine) without blocking the
        event loop; callers time their request from after this (the classifier does)."""
        from . import _litellm

        if _litellm._module is None:
            await asyncio.to_thread(load_litellm)

    async def complete(self, request: LlmRequest, on_text: OnText | None = None) -> LlmResponse:
        """One model answer; retries transient failures; raises :class:`ProviderError`."""
        await self.warm()  # a no-op once imported; never a multi-second stall of the loop
        litellm = load_litellm()
        params = self.build_params(request)
        attempts = max(0, int(self.config.max_retries)) + 1
        for attempt in range(1, attempts + 1):
            state = _Attempt()
            try:
                if request.stream:
                    response = await self._stream(litellm, params, on_text, state)
                else:
                    response = response_from_completion(await litellm.acompletion(**params))
            except _CallbackError as exc:
                raise exc.error from None
            except Exception as exc:
                failure = classify(exc)
                if state.delivered_chars:
                    raise self._error(params, attempt, failure, cut_after=state.delivered_chars) from exc
                if not failure.retryable or attempt == attempts:
                    raise self._error(params, attempt, failure) from exc
                if failure.retry_after is not None and failure.retry_after > self.max_retry_after:
                    raise self._error(params, attempt, failure) from exc
                delay = backoff_delay(attempt, self.retry_base_delay, self.retry_max_delay, failure.retry_after)
                log.info("model %s: attempt %d failed (%s); retrying in %.2fs", params["model"], attempt,
                         failure.summary(120), delay)
                await self._notify_retry(attempt, delay, failure)
                await self.sleep(delay)
                continue
            response.usage.cost = self._cost(litellm, params["model"], response.usage)
            response.model = response.model or params["model"]
            return response
        raise AssertionError("unreachable: the retry loop returns or raises")

    async def _notify_retry(self, attempt: int, delay: float, failure: Failure) -> None:
        if self.on_retry is None:
            return
        try:
            result = self.on_retry(attempt, delay, failure)
            if inspect.isawaitable(result):
                await result
        except Exception:  # an observer must not turn a retry into a failure
            log.exception("on_retry callback failed")

    async def _stream(self, litellm: Any, params: dict[str, Any], on_text: OnText | None,
                      state: _Attempt) -> LlmResponse:
        stream = await litellm.acompletion(**{**params, "stream": True, "stream_options": {"include_usage": True}})
        assembler = StreamAssembler()
        async for chunk in stream:
            delta = assembler.add(chunk)
            if delta and on_text is not None:
                try:
                    result = on_text(delta)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:
                    raise _CallbackError(exc) from exc
                state.delivered_chars += len(delta)
        return assembler.response()

    # --- reporting ----------------------------------------------------------------------

    def _error(self, params: dict[str, Any], attempt: int, failure: Failure, *,
               cut_after: int | None = None) -> ProviderError:
        model = params["model"]
        where = f" at {params['api_base']}" if params.get("api_base") else ""
        status = f"HTTP {failure.status}" if failure.status else "no HTTP status"
        tries = f"{attempt} attempt{'s' if attempt != 1 else ''}"
        if failure.context_overflow:
            head = f"model {model}{where}: the request exceeds the model's context window ({status})"
        elif cut_after is not None:
            head = (f"model {model}{where}: the stream broke after {cut_after} characters had been delivered "
                    f"(not retried, the text would repeat)")
        elif failure.timed_out:
            head = f"model {model}{where}: timed out after {params['timeout']:g}s ({tries})"
        elif failure.retry_after is not None and failure.retry_after > self.max_retry_after:
            head = (f"model {model}{where}: {status}, the server asks to retry after "
                    f"{failure.retry_after:g}s (more than max_retry_after={self.max_retry_after:g}s)")
        elif failure.retryable:
            head = f"model {model}{where}: {status}, gave up after {tries}"
        else:
            head = f"model {model}{where}: {status} ({tries}, not retryable)"
        return ProviderError(f"{head}; last error: {failure.summary()}", retryable=failure.retryable,
                             context_overflow=failure.context_overflow, status=failure.status)

    def _cost(self, litellm: Any, model: str, usage: Usage) -> float | None:
        """USD cost from configured prices or litellm's local cost map; None when unknown."""
        if not usage.total_tokens:
            return None
        inp, out = self.prices
        if inp is not None or out is not None:
            return usage.prompt_tokens * float(inp or 0) + usage.completion_tokens * float(out or 0)
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=model, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)
        except Exception:  # unknown model: no price, not an error
            return None
        return float(prompt_cost) + float(completion_cost)
