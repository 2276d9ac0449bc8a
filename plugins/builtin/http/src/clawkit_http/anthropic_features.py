"""Anthropic features on a Messages request body: prompt caching and extended thinking.

Decided by :mod:`clawkit.provider_features` (shared with clawkit-litellm); placed here in the
Messages shape (docs/anthropic.md):

* cache breakpoints (``cache_control: {type: ephemeral}``, at most 4): the last tool, the
  system prompt, the last block of the conversation so far, and the last block of the user
  turn before it (so the next call reads what this one wrote); none with ``model.cache: off``;
* ``thinking: {type: enabled, budget_tokens}`` from ``/think`` (``request.reasoning_effort``)
  unless a tool is forced or the body already names ``thinking``; thinking blocks kept on
  assistant messages are sent back while thinking is on, and dropped when it is off.
"""

from __future__ import annotations

from typing import Any

from clawkit.provider_features import (CACHE_CONTROL, MAX_BREAKPOINTS, caching_on, forced_tool,
                                       thinking_budget, thinking_limits)

THINKING_TYPES = ("thinking", "redacted_thinking")


def history_blocks(message: Any) -> list[dict[str, Any]]:
    """The thinking blocks an assistant message keeps (``metadata["thinking"]``), in Anthropic's shape."""
    kept = (getattr(message, "metadata", None) or {}).get("thinking") or []
    return [dict(b) for b in kept if isinstance(b, dict) and b.get("type") in THINKING_TYPES]


def apply(body: dict[str, Any], request: Any, config: Any, model: str, default_max_tokens: int) -> dict[str, Any]:
    """Add thinking and cache breakpoints to ``body`` (in place; returned for convenience)."""
    budget = thinking_budget(getattr(request, "reasoning_effort", None))
    if budget and "thinking" not in body and not forced_tool(body.get("tool_choice")):
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    thinking = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"
    if thinking:
        thinking_limits(body, int(body["thinking"].get("budget_tokens") or 0), default_max_tokens)
    else:
        for m in body.get("messages") or ():
            if m.get("role") == "assistant" and isinstance(m.get("content"), list):
                m["content"] = [b for b in m["content"] if b.get("type") not in THINKING_TYPES] or \
                    [{"type": "text", "text": "(empty)"}]
    if caching_on(config, str(getattr(request, "model", "") or model)):
        add_breakpoints(body)
    return body


def _mark(block: dict[str, Any]) -> bool:
    if block.get("type") in THINKING_TYPES or block.get("cache_control"):
        return False
    block["cache_control"] = dict(CACHE_CONTROL)
    return True


def _last_markable(content: Any) -> dict[str, Any] | None:
    if not isinstance(content, list):
        return None
    for block in reversed(content):
        if isinstance(block, dict) and block.get("type") not in THINKING_TYPES:
            return block
    return None


def add_breakpoints(body: dict[str, Any]) -> int:
    """Place up to :data:`MAX_BREAKPOINTS` ``cache_control`` markers; returns how many were placed."""
    placed = sum(1 for b in _all_blocks(body) if b.get("cache_control"))  # a caller's own count too
    if body.get("tools") and placed < MAX_BREAKPOINTS:
        placed += _mark(body["tools"][-1])
    system = body.get("system")
    if isinstance(system, str) and system and placed < MAX_BREAKPOINTS:
        body["system"] = [{"type": "text", "text": system, "cache_control": dict(CACHE_CONTROL)}]
        placed += 1
    elif isinstance(system, list) and system and placed < MAX_BREAKPOINTS:
        placed += _mark(system[-1])
    msgs = body.get("messages") or []
    users = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
    for i in (users[-1:] + users[-2:-1]) if users else ():  # the conversation so far, then the turn before
        if placed >= MAX_BREAKPOINTS:
            break
        if isinstance(msgs[i].get("content"), str):
            msgs[i]["content"] = [{"type": "text", "text": msgs[i]["content"] or "(empty)"}]
        block = _last_markable(msgs[i].get("content"))
        if block is not None:
            placed += _mark(block)
    return placed


def _all_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    out = [t for t in body.get("tools") or () if isinstance(t, dict)]
    if isinstance(body.get("system"), list):
        out += [b for b in body["system"] if isinstance(b, dict)]
    for m in body.get("messages") or ():
        if isinstance(m.get("content"), list):
            out += [b for b in m["content"] if isinstance(b, dict)]
    return out
