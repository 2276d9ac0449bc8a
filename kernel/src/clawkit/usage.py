"""Adding one model call's (or a tool's) token usage into a total: the loop and the tool
executor both count usage, and neither imports the other for it."""

from __future__ import annotations

from .types import Usage


def add_usage(total: Usage, u: Usage | dict) -> None:
    """Add ``u`` (a :class:`Usage` or its dict) into ``total`` in place."""
    if isinstance(u, dict):
        u = Usage.model_validate(u)
    # straight into the fields (both sides are validated Usage objects): pydantic's __setattr__ costs
    # ~2 us a field, four times per model call
    d, add = total.__dict__, u.__dict__
    d["prompt_tokens"] += add["prompt_tokens"]
    d["completion_tokens"] += add["completion_tokens"]
    d["total_tokens"] += add["total_tokens"]
    if add["cost"] is not None:
        d["cost"] = (d["cost"] or 0.0) + add["cost"]
    if add["estimated"]:
        d["estimated"] = True
    for key in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
        if add.get(key):
            d[key] = (d.get(key) or 0) + add[key]
