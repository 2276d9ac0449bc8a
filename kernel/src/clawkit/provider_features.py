"""Provider features that change cost and quality, decided once for every provider plugin.

* Prompt caching (:func:`caching_on`): ``model.cache`` — ``auto`` (the default) caches where
  litellm's model table says the model supports it (``supports_prompt_caching``, or a
  ``cache_read_input_token_cost`` price; a Claude model the table does not list: yes),
  ``on`` always, ``off`` (YAML ``false``) never.
  Providers place Anthropic ``cache_control`` breakpoints (at most :data:`MAX_BREAKPOINTS`):
  the tools, the system prompt and the conversation so far.
* Extended thinking (:func:`thinking_budget`): ``/think <level>`` sets ``reasoning_effort``;
  on Anthropic models the provider sends ``thinking: {type: enabled, budget_tokens: N}`` with
  N from :data:`THINKING_BUDGETS`, raises ``max_tokens`` above the budget, and drops the
  sampling settings thinking does not allow (``temperature``, ``top_k``; ``top_p`` below 0.95).
* Cost with cache tokens (:func:`cost`): cache writes and reads priced from the table's
  ``cache_creation_input_token_cost`` / ``cache_read_input_token_cost`` (Anthropic's own
  multipliers, 1.25× and 0.1× the input price, where the table has no entry).
"""

from __future__ import annotations

import re
from typing import Any

#: ``budget_tokens`` per ``/think`` level (Anthropic's minimum is 1024)
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 10_000, "high": 24_000}
CLAUDE = re.compile(r"claude-(?:[3-9]|opus|sonnet|haiku)")  # Anthropic's model names since Claude 3
MAX_BREAKPOINTS = 4  # Anthropic allows at most four cache_control breakpoints per request
CACHE_CONTROL = {"type": "ephemeral"}
WRITE_MULTIPLIER, READ_MULTIPLIER = 1.25, 0.1


def caching_on(model_config: Any, model: str | None = None) -> bool:
    """Whether to send cache breakpoints for ``model`` (default ``model_config.name``)."""
    mode = getattr(model_config, "cache", "auto")
    if mode in ("off", False):
        return False
    if mode in ("on", True):
        return True
    from .capabilities import table_entry

    name = model or str(getattr(model_config, "name", "") or "")
    entry = table_entry(name)
    if entry is None:  # a Claude the table does not list yet (an alias, a new release): every Claude 3+ caches
        return CLAUDE.search(name.lower()) is not None
    return bool(entry.get("supports_prompt_caching") or entry.get("cache_read_input_token_cost"))


def thinking_budget(effort: str | None) -> int | None:
    """Tokens of extended thinking for a ``/think`` level (None: no thinking)."""
    if not effort or effort == "off":
        return None
    return THINKING_BUDGETS.get(str(effort), THINKING_BUDGETS["medium"])


def thinking_limits(params: dict[str, Any], budget: int, default_max_tokens: int) -> None:
    """Make ``params`` (a request body or keyword arguments) valid with thinking on: ``max_tokens``
    above the budget, no ``temperature``/``top_k``, ``top_p`` at least 0.95 (Anthropic's rules)."""
    max_tokens = int(params.get("max_tokens") or default_max_tokens)
    if max_tokens <= budget:
        params["max_tokens"] = budget + max_tokens
    params.pop("temperature", None)
    params.pop("top_k", None)
    if params.get("top_p") is not None and float(params["top_p"]) < 0.95:
        params["top_p"] = 0.95


def forced_tool(tool_choice: Any) -> bool:
    """A ``tool_choice`` that forces a tool (thinking cannot be combined with one)."""
    if isinstance(tool_choice, dict):
        return tool_choice.get("type") in ("any", "tool", "function")
    return tool_choice in ("any", "required")


def cache_prices(model: str) -> tuple[float | None, float | None]:
    """``(write, read)`` USD per cache token from litellm's table (None where it has none)."""
    from .capabilities import table_entry

    entry = table_entry(model) or {}
    w, r = entry.get("cache_creation_input_token_cost"), entry.get("cache_read_input_token_cost")
    return (float(w) if w is not None else None, float(r) if r is not None else None)


def cost(usage: Any, input_price: float, output_price: float, model: str = "") -> float:
    """USD for ``usage`` whose ``prompt_tokens`` include its cache reads and writes."""
    write_price, read_price = cache_prices(model) if (usage.cache_read_tokens or usage.cache_write_tokens) else (None, None)
    if write_price is None:
        write_price = input_price * WRITE_MULTIPLIER
    if read_price is None:
        read_price = input_price * READ_MULTIPLIER
    plain = max(0, usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    return (plain * input_price + usage.cache_write_tokens * write_price + usage.cache_read_tokens * read_price
            + usage.completion_tokens * output_price)


def approx_tokens(text: str) -> int:
    """Tokens of thinking text when the provider does not count them (about four characters each)."""
    return (len(text) + 3) // 4 if text else 0
