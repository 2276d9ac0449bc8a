"""Building the summarizer for an agent and swapping the session's history for the summary:
used by the compaction hooks (:mod:`.plugin`) and by the background preparer (:mod:`.background`),
which import this module rather than each other."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from clawkit import Message

from .compactor import Summarizer

if TYPE_CHECKING:
    from .plugin import CompactionConfig

log = logging.getLogger("clawkit.compaction")


def _summarizer(ctx: Any, cfg: CompactionConfig, window: int) -> Summarizer | None:
    runtime = ctx.runtime
    if runtime is None:
        return None
    if cfg.model is not None:
        provider, model, s_window = runtime.provider_for(cfg.model), cfg.model.name, cfg.model.context_window or window
    else:
        provider, model, s_window = runtime.provider, ctx.agent.model.name, window
    input_chars = max(4000, int(s_window * cfg.summarizer_input_share * 3.5) - cfg.summary_max_tokens * 4)
    return Summarizer(provider, model, input_chars, cfg.summary_max_tokens)


def _persist(ctx: Any, summary: Message, recent: list[Message]) -> bool:
    """Swap the session's history for summary + recent, when recent maps onto it."""
    history = ctx.session.history
    first = recent[0] if recent else None
    idx = next((i for i, m in enumerate(history) if m is first), None)
    if idx is None or len(history) - idx != len(recent):
        log.info("session %s: request does not map onto the stored history; compacted the request only", ctx.session.id)
        return False
    ctx.session.replace_history([summary] + history[idx:])
    return True
