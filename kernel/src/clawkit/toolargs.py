"""A model's tool-call arguments, from the text on the wire to a checked ``dict``.

Every provider plugin turns the argument text a model wrote into :class:`ToolCall`
through :func:`tool_call`, so the same limits hold whichever provider serves the
model: text that is not JSON, a 5,000-digit integer, nesting deeper than
:data:`MAX_ARGUMENT_DEPTH` or anything but an object becomes an ``argument_error``
(the tool is not run; the model gets the error as the result), never an exception.
"""

from __future__ import annotations

import json
from typing import Any

from .types import ToolCall

MAX_ARGUMENT_DEPTH = 64


def too_deep(value: Any, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Is ``value`` nested more than ``limit`` levels (checked without recursion)?"""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """``(arguments, error)`` from a tool call's argument text; never raises.

    Empty text means no arguments; a JSON string holding a JSON object (some models
    double-encode) is unwrapped.
    """
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    except (ValueError, RecursionError) as exc:  # a 5,000-digit integer, nesting deeper than the parser's stack
        return {}, f"arguments are not usable JSON ({type(exc).__name__}: {str(exc)[:160]})"
    if isinstance(value, (dict, list)) and too_deep(value):
        return {}, f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except (ValueError, RecursionError):
            inner = None
        if isinstance(inner, dict) and not too_deep(inner):
            value = inner
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def tool_call(call_id: str | None, name: str | None, raw: str | None) -> ToolCall:
    """The :class:`ToolCall` for one call on the wire (``raw``: its argument text)."""
    arguments, error = parse_arguments(raw)
    fields: dict[str, Any] = {"name": name or "", "arguments": arguments, "raw_arguments": raw,
                              "argument_error": error}
    if call_id:
        fields["id"] = call_id
    return ToolCall(**fields)
