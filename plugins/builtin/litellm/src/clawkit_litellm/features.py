"""Anthropic features through litellm, in litellm's documented form (docs/anthropic.md):

* extended thinking: ``thinking={"type": "enabled", "budget_tokens": N}`` for ``/think`` on a
  Claude model (budgets: :data:`clawkit.provider_features.THINKING_BUDGETS`), and the kept
  thinking blocks sent back as the assistant message's ``thinking_blocks``;
* prompt caching: ``cache_control: {"type": "ephemeral"}`` on the last tool, on the system
  message's content part, and on the last content part of the last two user/tool messages (at
  most 4 breakpoints), unless ``model.cache: off``.

Other models keep litellm's ``reasoning_effort`` and get no breakpoints.
"""

from __future__ import annotations

from typing import Any

from clawkit.provider_features import (CACHE_CONTROL, MAX_BREAKPOINTS, caching_on, forced_tool,
                                       thinking_budget, thinking_limits)

DEFAULT_MAX_TOKENS = 4096


def is_claude(model: str) -> bool:
    """Anthropic's models, however litellm routes them (``anthropic/``, ``bedrock/``, ``vertex_ai/``…)."""
    return "claude" in model.lower()


def apply(params: dict[str, Any], request: Any, config: Any) -> dict[str, Any]:
    """Add thinking and cache breakpoints to ``litellm.acompletion``'s keyword arguments (in place)."""
    model = str(params.get("model") or "")
    if not is_claude(model):
        return params
    budget = thinking_budget(params.get("reasoning_effort"))
    if budget and "thinking" not in params and not forced_tool(params.get("tool_choice")):
        params.pop("reasoning_effort", None)
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    thinking = isinstance(params.get("thinking"), dict) and params["thinking"].get("type") == "enabled"
    if thinking:
        thinking_limits(params, int(params["thinking"].get("budget_tokens") or 0), DEFAULT_MAX_TOKENS)
        _thinking_history(params["messages"], request)
    if caching_on(config, model):
        _breakpoints(params)
    return params


def _thinking_history(messages: list[dict[str, Any]], request: Any) -> None:
    """Each assistant message's kept thinking blocks as its ``thinking_blocks``."""
    offset = len(messages) - len(request.messages)  # the system message litellm gets first
    for i, m in enumerate(request.messages):
        kept = (m.metadata or {}).get("thinking") if m.role == "assistant" else None
        if kept and 0 <= i + offset < len(messages):
            messages[i + offset]["thinking_blocks"] = [dict(b) for b in kept if isinstance(b, dict)]


def _parts(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    content = message.get("content")
    if isinstance(content, str) and content:
        message["content"] = content = [{"type": "text", "text": content}]
    return content if isinstance(content, list) and content else None


def _breakpoints(params: dict[str, Any]) -> None:
    placed = 0
    if params.get("tools"):
        params["tools"][-1]["cache_control"] = dict(CACHE_CONTROL)
        placed += 1
    msgs = params["messages"]
    if msgs and msgs[0].get("role") == "system":
        parts = _parts(msgs[0])
        if parts:
            parts[-1]["cache_control"] = dict(CACHE_CONTROL)
            placed += 1
    turns = [m for m in msgs if m.get("role") in ("user", "tool")]
    for m in reversed(turns[-2:]):
        if placed >= MAX_BREAKPOINTS:
            break
        parts = _parts(m)
        if parts and isinstance(parts[-1], dict):
            parts[-1]["cache_control"] = dict(CACHE_CONTROL)
            placed += 1
