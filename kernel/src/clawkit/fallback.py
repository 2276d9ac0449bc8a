"""Fallback models: when the configured model fails for good, the same request goes to the next.

``model: {name: A, fallbacks: [B, {name: C, api_base: …}]}``. The kernel does this once, in
the agent's model-call path (:meth:`clawkit.agent_model.ModelSide._call_model`), so every
provider gets it and budgets, usage, the ledger and telemetry see the model that answered.

* Which failures fall back (:func:`falls_back`): nothing answered (``connection``, ``dns``,
  ``tls``, ``timeout``), a 5xx (``http``) or a 429 (``rate_limit``) after the model's own
  retries, and ``context_overflow`` — which goes to the next model whose context window
  (``context_window`` in its mapping, else litellm's table) is larger than the failed one's.
  Credentials (401/403), a bad request (400), an unknown model (404) and configuration
  errors do not: the next model would most likely be refused the same way, or hide a mistake.
* Streaming: a failure before the first text chunk reached the user falls back transparently;
  after text was shown, the call fails (``stream_cut``) — a second model's answer would repeat
  or contradict what the user already read.
* A fallback entry takes the keys of ``model``. It inherits the primary's call settings
  (:data:`INHERITED`: timeouts, retries, temperature, max_tokens, cache) unless it sets them,
  and nothing that says which model or endpoint it is (api_base, api_key, provider,
  context_window, capability flags, extra keys such as ``api_format`` or prices).
* Each model that fails emits ``llm.failed`` (with ``fallback_to``) and then ``llm.fallback``
  (``from_model``, ``to_model``, ``error_type``, ``status``, ``reason``); the answering call's
  ``llm.call`` names the answering model, and ``request.model`` is set to it.
"""

from __future__ import annotations

import time
from typing import Any

from .errors import ProviderError
from .types import LlmRequest, LlmResponse

FALLS_BACK = frozenset({"connection", "dns", "tls", "timeout", "http", "rate_limit", "context_overflow"})
INHERITED = ("timeout", "call_timeout", "max_retries", "retry_base_delay", "retry_max_delay", "max_retry_after",
             "retry_timeout", "temperature", "max_tokens", "cache")


def chain(model_config: Any) -> list[Any]:
    """The primary model config followed by its fallbacks, each with the inherited settings filled in."""
    out = [model_config]
    for fb in getattr(model_config, "fallbacks", None) or ():
        inherit = {k: getattr(model_config, k) for k in INHERITED if k not in fb.model_fields_set}
        out.append(fb.model_copy(update=inherit))
    return out


def falls_back(error: ProviderError, shown: bool = False) -> bool:
    """Whether ``error`` sends the request on to the next model (never once text was shown)."""
    if shown or error.partial_text:
        return False
    if error.kind == "http" and error.status is not None and error.status < 500:
        return False  # 408/409 and friends after retries: the request itself is the problem
    return error.kind in FALLS_BACK


def context_window(model_config: Any) -> int | None:
    """Tokens the model accepts: its mapping's ``context_window``, else litellm's table."""
    configured = getattr(model_config, "context_window", None)
    if configured:
        return int(configured)
    from .capabilities import table_entry

    entry = table_entry(str(model_config.name)) or {}
    for key in ("max_input_tokens", "max_tokens"):
        if isinstance(entry.get(key), int) and entry[key] > 0:
            return int(entry[key])
    return None


def next_model(models: list[Any], index: int, error: ProviderError) -> int | None:
    """Index of the model to try after ``models[index]`` failed with ``error`` (None: stop)."""
    if error.kind != "context_overflow":
        return index + 1 if index + 1 < len(models) else None
    failed = context_window(models[index])
    for i in range(index + 1, len(models)):
        window = context_window(models[i])
        if window is not None and (failed is None or window > failed):
            return i
    return None


async def complete(agent: Any, ctx: Any, request: LlmRequest, on_text: Any, heard: list[str] | None) -> LlmResponse:
    """``request`` answered by the agent's model or, when it fails for good, by its fallbacks in order.

    On success through a fallback ``request.model`` names the model that answered (so the
    caller's ``llm.call`` event, ledger row and telemetry span say so) and
    ``request.metadata["fallback_from"]`` lists the models that failed."""
    models = chain(agent.config.model)
    if len(models) == 1:
        return await agent._complete_within_deadline(request, on_text, heard)
    primary = request.metadata.setdefault("fallback.requested", request.model)  # a retried call starts over
    models[0] = models[0].model_copy(update={"name": primary}) if primary != models[0].name else models[0]
    index, failures = 0, []
    providers: dict[int, Any] = agent.__dict__.setdefault("_fallback_providers", {})
    while True:
        cfg = models[index]
        attempt = request if index == 0 else request.model_copy(update={"model": cfg.name})
        if index == 0:
            attempt.model = primary
        started = time.time()
        try:
            if index == 0:
                response = await agent._complete_within_deadline(attempt, on_text, heard)
            else:
                if index not in providers:
                    providers[index] = agent.provider_for(cfg)
                response = await agent._complete_within_deadline(attempt, on_text, heard, provider=providers[index],
                                                                 model_config=cfg)
        except ProviderError as exc:
            nxt = next_model(models, index, exc) if falls_back(exc, bool(heard)) else None
            if nxt is None:
                if failures:
                    request.model = cfg.name  # the caller's llm.failed names the last model tried
                    request.metadata["fallback.endpoint"] = cfg.api_base
                    raise exc.with_message(f"{exc.message} (after falling back from {', '.join(failures)})") from exc
                raise
            failures.append(cfg.name)
            to = models[nxt]
            ctx.emit("llm.failed", model=cfg.name, started=started, duration=time.time() - started,
                     error_type=exc.kind, status=exc.status, endpoint=exc.endpoint or cfg.api_base,
                     stream=request.stream, fallback_to=to.name)
            ctx.emit("llm.fallback", from_model=cfg.name, to_model=to.name, error_type=exc.kind, status=exc.status,
                     reason=exc.reason or exc.message[:200], line=f"model {cfg.name} failed ({exc.reason or exc.kind}"
                     f"{f', HTTP {exc.status}' if exc.status else ''}); falling back to {to.name}")
            try:  # the run's steps show the failed call too (the answering one is recorded by the caller)
                from .types import new_id

                ctx.session.store.step(ctx.run_id, new_id("step"), "llm", cfg.name, started, time.time(), "failed",
                                       {"error_type": exc.kind, "status": exc.status, "fallback_to": to.name})
            except Exception:  # noqa: BLE001 - a store without steps must not stop the fallback
                pass
            ctx.state.setdefault("_fallbacks", []).append({"from": cfg.name, "to": to.name, "error_type": exc.kind,
                                                           "status": exc.status})
            index = nxt
            continue
        if index:
            request.model = cfg.name
            request.metadata["fallback_from"] = failures
            request.metadata["fallback.endpoint"] = cfg.api_base
            request.metadata["fallback.started"] = started
        return response
