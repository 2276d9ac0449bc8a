"""The litellm model provider: one ``complete`` call = one model answer, retried as needed.

clawkit does the retrying (the OpenAI SDK's and litellm's own retries are turned
off, else a 429 is retried twice over) through the kernel's
:func:`clawkit.retry.call_with_retries`: every failure is classified
(:mod:`clawkit_litellm.errors`) into a :class:`ProviderError` kind; connection
failures, timeouts, 408/409/429 and 5xx are retried with backoff and jitter,
honouring ``Retry-After``, within ``max_retries`` and ``retry_timeout``; missing
keys, 401/403, unknown models and other 4xx fail on the first attempt. A stream that
breaks after text reached the user is not retried (the user would see the text
twice): it raises ``kind="stream_cut"`` with the text in ``partial_text``.

Streamed requests ask for usage (``stream_options.include_usage``); when the server
reports none anyway, prompt and completion tokens are counted locally
(:func:`clawkit.tokens.estimate_usage`, marked ``usage.estimated``) and priced like reported ones.

Provider-only settings, read from the model config's extra keys (not sent to the
model): ``input_cost_per_token`` / ``output_cost_per_token`` (prices for models
litellm does not know). Every other extra key is passed to ``litellm.acompletion``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from clawkit.openai_wire import StreamAssembler, request_keys, response_from_completion
from clawkit.providers import DeliveryError, OnText, ProviderError, deliver_text
from clawkit.retry import OnRetry, RetryPolicy, call_with_retries
from clawkit.types import LlmRequest, LlmResponse, Usage

from ._litellm import load_litellm
from .errors import classify

log = logging.getLogger("clawkit.litellm")

PROVIDER_ONLY = ("input_cost_per_token", "output_cost_per_token")
LOCAL_API_KEY = "sk-clawkit-no-key"


def litellm_api_base(api_base: str, model: str) -> str:
    """``api_base`` in the form litellm extends to the endpoint, so a full endpoint URL is used as
    given: litellm (the OpenAI SDK) appends ``/chat/completions`` to an OpenAI-style base, so a base
    that already ends in it loses it here; for ``anthropic/…`` it appends ``/v1/messages`` unless the
    base ends in it, so a trailing ``/v1`` is dropped and a ``…/v1/messages`` URL kept."""
    base = api_base.rstrip("/")
    if model.startswith("anthropic/"):
        return base[:-3] if base.endswith("/v1") else base
    head, sep, query = base.partition("?")
    if head.rstrip("/").endswith("/chat/completions"):
        head = head.rstrip("/")[: -len("/chat/completions")]
        return head + (sep + query if query else "")
    return base


def _server_reported_usage(stream: Any) -> bool:
    """Whether the server sent usage in this stream. litellm answers ``include_usage`` itself when
    the server did not (with its own count, indistinguishable from a reported one); the chunks it
    kept say whether a usage chunk came from the server. Unknown (no ``chunks``): assume it did."""
    chunks = getattr(stream, "chunks", None)
    if not isinstance(chunks, list):
        return True
    return any(getattr(c, "usage", None) for c in chunks)


class LitellmProvider:
    """A :class:`clawkit.providers.Provider` backed by ``litellm.acompletion``.

    ``config`` is a :class:`clawkit.config.ModelConfig`. ``on_retry(notice)``
    (optional, a :class:`clawkit.retry.RetryNotice`) is told about each retry before
    its wait — the agent sets it to emit an ``llm.retry`` event; ``sleep`` is
    injectable for tests.
    """

    def __init__(self, config: Any, *, on_retry: OnRetry | None = None,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.config = config
        extras = dict(config.settings()) if hasattr(config, "settings") else {}
        for legacy in ("retry_base_delay", "retry_max_delay", "max_retry_after", "retry_timeout"):
            extras.pop(legacy, None)  # retry settings are ModelConfig fields; never send them to the model
        self.policy = RetryPolicy.from_model_config(config)
        self.prices = (extras.pop("input_cost_per_token", None), extras.pop("output_cost_per_token", None))
        self.extra_params = extras
        self.on_retry = on_retry
        self.sleep = sleep

    # --- the call -----------------------------------------------------------------------

    def build_params(self, request: LlmRequest) -> dict[str, Any]:
        """The keyword arguments for ``litellm.acompletion`` (without ``stream``)."""
        cfg = self.config
        model = request.model or cfg.name
        params = request_keys(request, model, cfg)  # the OpenAI form litellm takes and translates per provider
        params.update({
            "timeout": cfg.timeout,
            "max_retries": 0,  # the OpenAI SDK's own retries: clawkit retries instead
            "num_retries": 0,  # litellm's (would need tenacity)
            "drop_params": True,  # a setting the model does not take is dropped, not an error
        })
        if cfg.api_base:
            params["api_base"] = litellm_api_base(cfg.api_base, model)
        api_key = cfg.api_key or (LOCAL_API_KEY if cfg.api_base else None)
        if api_key:
            params["api_key"] = api_key
        params.update(self.extra_params)
        params.update(request.settings)
        for key in ("stream", "stream_options"):  # request.stream decides, not a stray setting
            params.pop(key, None)
        effort = request.reasoning_effort or params.pop("reasoning_effort", None)
        if effort:
            params["reasoning_effort"] = effort
        from .features import apply  # Anthropic: thinking and prompt-cache breakpoints (docs/anthropic.md)

        return apply(params, request, cfg)

    async def warm(self) -> None:
        """Import litellm in a thread (seconds on a cold, busy machine) without blocking the
        event loop; callers time their request from after this (the classifier does)."""
        from . import _litellm

        if _litellm._module is None:
            await asyncio.to_thread(load_litellm)

    def endpoint(self, params: dict[str, Any]) -> str:
        """Where the call goes: the api_base, else the provider litellm routes the model to."""
        return params.get("api_base") or f"{params['model'].split('/', 1)[0]} (litellm default endpoint)"

    async def complete(self, request: LlmRequest, on_text: OnText | None = None) -> LlmResponse:
        """One model answer; retries transient failures; raises :class:`ProviderError`."""
        await self.warm()  # a no-op once imported; never a multi-second stall of the loop
        litellm = load_litellm()
        params = self.build_params(request)
        endpoint = self.endpoint(params)

        async def attempt(n: int) -> LlmResponse:
            received: list[str] = []
            delivered = [0]  # characters handed to on_text: seen by the user
            try:
                if request.stream:
                    return await self._stream(litellm, params, on_text, received, delivered)
                return response_from_completion(await litellm.acompletion(**params))
            except DeliveryError:
                raise
            except Exception as exc:
                error = classify(exc, model=params["model"], endpoint=endpoint, timeout=params.get("timeout"))
                if received and error.kind in ("connection", "timeout"):
                    # text arrived, then the stream broke. Shown to the user: not retried (the text
                    # would repeat); not shown yet: retried, and the partial text kept if all attempts break
                    text = "".join(received)
                    shown = delivered[0] > 0
                    why = "not retried, the text would repeat" if shown else "nothing was shown yet"
                    error = ProviderError(
                        f"model {params['model']} at {endpoint}: the stream broke after {len(text)} characters "
                        f"({why}): {error.message}", kind="stream_cut", endpoint=endpoint, model=params["model"],
                        retryable=not shown, partial_text=text, reason="stream cut")
                raise error from exc

        try:
            response = await call_with_retries(attempt, policy=self.policy, classify=self._classify(params, endpoint),
                                               on_retry=self.on_retry, sleep=self.sleep)
        except DeliveryError as exc:
            raise exc.error from None
        if not response.usage.total_tokens:  # the server sent none (even when asked): counted here, marked estimated
            from clawkit.tokens import estimate_usage

            response.usage = estimate_usage(request, response, params["model"])
        if response.thinking and not response.usage.reasoning_tokens:  # counted from the thinking text
            from clawkit.provider_features import approx_tokens

            response.usage.reasoning_tokens = min(response.usage.completion_tokens,
                                                  sum(approx_tokens(b.get("thinking") or "") for b in response.thinking))
        response.usage.cost = self._cost(litellm, params["model"], response.usage)
        response.model = response.model or params["model"]
        return response

    def _classify(self, params: dict[str, Any], endpoint: str):
        def fn(exc: BaseException) -> ProviderError:
            if isinstance(exc, DeliveryError):
                raise exc  # a display failure is the caller's, not the model's
            return classify(exc, model=params["model"], endpoint=endpoint, timeout=params.get("timeout"))

        return fn

    async def _stream(self, litellm: Any, params: dict[str, Any], on_text: OnText | None,
                      received: list[str], delivered: list[int]) -> LlmResponse:
        stream = await litellm.acompletion(**{**params, "stream": True, "stream_options": {"include_usage": True}})
        assembler = StreamAssembler()
        async for chunk in stream:
            delta = assembler.add(chunk)
            if not delta:
                continue
            received.append(delta)
            if on_text is not None:
                await deliver_text(on_text, delta)
                delivered[0] += len(delta)
        if not _server_reported_usage(stream):
            assembler.usage = None  # litellm's own count, unmarked: counted (and marked estimated) by complete()
        return assembler.response()

    # --- reporting ----------------------------------------------------------------------

    def _cost(self, litellm: Any, model: str, usage: Usage) -> float | None:
        """USD cost from configured prices or litellm's local cost map; None when unknown."""
        if not usage.total_tokens:
            return None
        inp, out = self.prices
        if inp is not None or out is not None:
            if usage.cache_read_tokens or usage.cache_write_tokens:
                from clawkit.provider_features import cost

                return cost(usage, float(inp or 0), float(out or 0), model)
            return usage.prompt_tokens * float(inp or 0) + usage.completion_tokens * float(out or 0)
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=model, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                cache_creation_input_tokens=usage.cache_write_tokens, cache_read_input_tokens=usage.cache_read_tokens)
        except Exception:  # unknown model: no price, not an error
            return None
        return float(prompt_cost) + float(completion_cost)
