"""Compaction's implementation: config, the window arithmetic, compact() and the hook bodies.

The entry point names this module: the kernel reads its ``@hookimpl`` functions from the source
and imports it on the first hook call, so ``clawkit --help`` loads no pydantic.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clawkit import Message, hook_order, hookimpl
from clawkit.config import ModelConfig

from .compactor import (
    SUMMARY_FLAG,
    Summarizer,
    identifiers,
    message_tokens,
    missing_identifiers,
    request_tokens,
    split_point,
)
from .swap import _persist, _summarizer
from clawkit.tokens import get_counter, max_request_tokens

log = logging.getLogger("clawkit.compaction")
_LIMIT = re.compile(r"maximum context length is (\d[\d,]*)", re.IGNORECASE)

__all__ = ["CompactionConfig", "compact", "SUMMARY_FLAG"]


class CompactionConfig(BaseModel):
    """``plugins.compaction`` in the agent YAML."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    reserve_share: float | None = Field(None, gt=0, lt=0.9, description="share of the window kept free (overrides the agent's context.summarize_at)")
    reserve_tokens: int | None = Field(None, gt=0, description="absolute reserve in tokens (overrides reserve_share)")
    keep_recent_share: float = Field(0.2, gt=0, lt=0.9, description="share of the window the most recent turns keep verbatim")
    model: ModelConfig | None = Field(None, description="summarizer model (a cheaper one); default: the agent's model")
    summary_max_tokens: int = Field(2000, ge=100, description="longest summary")
    summarizer_input_share: float = Field(0.5, gt=0, le=0.9, description="share of the summarizer's window one summarization request may use")
    keep_identifiers: int = Field(150, ge=0, description="identifiers (paths, URLs, ids, hashes) kept verbatim even if the summary drops them")
    persist: bool = Field(True, description="store the compacted history in the session (else only the request is compacted)")
    retry_on_overflow: bool = Field(True, description="compact and retry once when the provider says the context overflowed")
    background: bool = Field(True, description="prepare the summary in the background from prepare_share of the threshold "
                                               "on; the turn crossing the threshold never waits for the summarizer (it "
                                               "truncates when the summary is not ready). false: summarize at the threshold, waiting")
    prepare_share: float = Field(0.6, gt=0, le=1, description="share of the threshold past which the summary is prepared")

    @field_validator("model", mode="before")
    @classmethod
    def _model_string(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v


@hookimpl
def register_config(register):
    register("compaction", CompactionConfig)


def _config(ctx: Any) -> CompactionConfig:
    cfg = ctx.plugin_config("compaction") if ctx is not None else None
    if cfg is None:
        return CompactionConfig()
    if isinstance(cfg, dict):
        return CompactionConfig(**{k: v for k, v in cfg.items() if k != "enabled"})
    return cfg


def _window(ctx: Any, request: Any) -> int:
    window = request.metadata.get("context_window")
    if window:
        return int(window)
    return int(ctx.agent.model.context_window or ctx.agent.limits.context_window)


def _limit(cfg: CompactionConfig, ctx: Any, window: int) -> int:
    """Request size past which history is summarised: the context budget's ``summarize_at``
    (default 70 % of the window), unless this section sets its own reserve."""
    if cfg.reserve_tokens or cfg.reserve_share:
        reserve = cfg.reserve_tokens or int(window * cfg.reserve_share)
        return window - max(reserve, int(getattr(ctx.agent.model, "max_tokens", None) or 0))
    from clawkit.budget import ContextBudget

    return min(ContextBudget(window, ctx.agent.context).summarize_at_tokens, window - int(getattr(ctx.agent.model, "max_tokens", None) or 0))


def _marks(cfg: CompactionConfig, ctx: Any, window: int) -> tuple[int, int]:
    """``(limit, mark)``: :func:`_limit`, and the size from which the summary is prepared (``background``)
    or the limit itself."""
    limit = _limit(cfg, ctx, window)
    return limit, (int(limit * cfg.prepare_share) if cfg.background else limit)


# id(agent config) -> (agent config, its plugins, the window the request named, (section, window, limit, mark)):
# what every model call of an agent compares with, looked up once (config objects are not changed once loaded;
# a reloaded config is a new object, and so is a replaced ``plugins``)
_AGENTS: dict[int, tuple[Any, Any, Any, tuple[CompactionConfig, int, int, int]]] = {}


def _settings(ctx: Any, request: Any) -> tuple[CompactionConfig, int, int, int]:
    """``(section, window, limit, mark)`` for ``request``: :func:`_config`, :func:`_window` and :func:`_marks`."""
    agent = ctx.agent
    named = request.metadata.get("context_window")
    plugins = getattr(agent, "plugins", None)
    hit = _AGENTS.get(id(agent))
    if hit is not None and hit[0] is agent and hit[1] is plugins and hit[2] == named:
        return hit[3]
    cfg = _config(ctx)
    window = _window(ctx, request)
    out = (cfg, window, *_marks(cfg, ctx, window))
    if len(_AGENTS) >= 256:
        _AGENTS.clear()
    _AGENTS[id(agent)] = (agent, plugins, named, out)
    return out


async def compact(ctx: Any, request: Any, cfg: CompactionConfig, *, window: int, trigger: str, keep_share: float | None = None) -> bool:
    """Summarize the older part of ``request.messages`` in place; False when there was nothing to compact."""
    counter = get_counter(request.model)
    counts = [message_tokens(m, counter) for m in request.messages]
    before = request_tokens(request, counter)
    b = split_point(request.messages, counts, int(window * (keep_share or cfg.keep_recent_share)))
    old, recent = request.messages[:b], request.messages[b:]
    if not old or (len(old) == 1 and old[0].metadata.get(SUMMARY_FLAG)):
        return False
    ctx.emit("compaction.before", trigger=trigger, tokens=before, window=window, messages=len(request.messages),
             summarizing=len(old), keeping=len(recent))
    idents = identifiers(old, cfg.keep_identifiers) if cfg.keep_identifiers else []
    old_tokens = sum(counts[:b])
    method, reason = "summary", ""
    try:
        summarizer = _summarizer(ctx, cfg, window)
        if summarizer is None:
            raise RuntimeError("no runtime to call a summarizer model")
        summary = await summarizer(old)
        lost = missing_identifiers(summary, idents)
        body = summary + ("\n\nIdentifiers from the summarized messages (verbatim): " + ", ".join(lost) if lost else "")
        content = f"[Summary of {len(old)} earlier messages (~{old_tokens:,} tokens), compacted by clawkit to fit the context window]\n{body}"
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        method, reason = "drop", f"{type(exc).__name__}: {exc}"
        log.warning("session %s: summarizing failed (%s); dropping the %d oldest messages", ctx.session.id, reason, len(old))
        ctx.emit("compaction.failed", error=reason, dropped=len(old))
        ids = ("\nIdentifiers they mentioned (verbatim): " + ", ".join(idents)) if idents else ""
        content = (f"[{len(old)} earlier messages (~{old_tokens:,} tokens) were dropped to fit the context window: "
                   f"summarizing them failed ({reason[:300]}).]{ids}")
    summary_msg = Message(role="user", content=content, metadata={SUMMARY_FLAG: True, "method": method,
                                                                   "summarized_messages": len(old), "tokens_summarized": old_tokens})
    request.messages = [summary_msg] + recent
    persisted = _persist(ctx, summary_msg, recent) if cfg.persist else False
    after = request_tokens(request, counter)
    ctx.emit("compaction.after", trigger=trigger, method=method, tokens_before=before, tokens_after=after, window=window,
             summarized_messages=len(old), kept_messages=len(recent), summary_tokens=message_tokens(summary_msg, counter),
             persisted=persisted, error=reason or None)
    return True


def over_limit(ctx, request) -> tuple[CompactionConfig, int] | None:
    """``(config, window)`` when the request exceeds the window minus the reserve and the summary
    is to be awaited (``background: false``), else None (synchronous: most model calls are far
    below the limit and need no coroutine). With ``background`` (the default) the summary is
    prepared from ``prepare_share`` of the limit on, and a request over the limit takes it if it
    is ready, else is truncated — both here, without awaiting anything."""
    cfg, window, limit, mark = _settings(ctx, request)
    if max_request_tokens(request) <= mark:
        return None
    tokens = request_tokens(request, get_counter(request.model))
    if tokens <= mark:
        return None
    if not cfg.background:
        return (cfg, window) if tokens > limit else None
    from . import background

    background.prepare(ctx, request, cfg, window)
    if tokens > limit:
        background.apply(ctx, request, cfg, window, tokens)
    return None


async def compact_over_limit(ctx, request, cfg: CompactionConfig, window: int):
    await compact(ctx, request, cfg, window=window, trigger="threshold")
    return request


@hookimpl
@hook_order(60)
def before_llm_call(ctx, request):
    """Compact when the request would exceed the window minus the reserve (an awaitable then;
    the usual call, far below the limit, returns None without a coroutine)."""
    over = over_limit(ctx, request)
    return None if over is None else compact_over_limit(ctx, request, *over)


@hookimpl
async def llm_call_failed(ctx, request, error):
    """Compact harder and retry once when the provider says the context overflowed."""
    cfg = _config(ctx)
    if not cfg.retry_on_overflow or not getattr(error, "context_overflow", False):
        return None
    window = _window(ctx, request)
    m = _LIMIT.search(str(error))
    if m:
        window = min(window, int(m.group(1).replace(",", "")))
    changed = await compact(ctx, request, cfg, window=window, trigger="overflow", keep_share=cfg.keep_recent_share / 2)
    return True if changed else None


@hookimpl
def forget_sessions(store, session_ids):
    """A summary prepared in the background for one of these sessions (held in this process until the
    turn that crosses the threshold takes it) goes with them: it is the conversation, summarised."""
    from .background import _PREPARED

    return {"prepared_summaries": sum(1 for sid in session_ids if _PREPARED.pop(sid, None) is not None)}
