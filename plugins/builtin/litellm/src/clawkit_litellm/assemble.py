"""Turning litellm's responses (whole or streamed) into clawkit's :class:`LlmResponse`.

Everything here reads litellm objects by attribute *or* key, so it also works on
plain OpenAI-shaped dicts (and is testable without litellm).
"""

from __future__ import annotations

import json
from typing import Any

from clawkit.types import LlmResponse, ToolCall, Usage


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


MAX_ARGUMENT_DEPTH = 64


def _too_deep(value: Any, limit: int) -> bool:
    """Is ``value`` nested more than ``limit`` levels (checked without recursion)?"""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """``(arguments, error)`` from a tool call's argument text; never raises.

    Empty text means no arguments. A JSON string that itself holds a JSON object
    (some models double-encode) is unwrapped.
    """
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    except (ValueError, RecursionError) as exc:  # a 5,000-digit integer, nesting deeper than the parser's stack
        return {}, f"arguments are not usable JSON ({type(exc).__name__}: {str(exc)[:160]})"
    if _too_deep(value, MAX_ARGUMENT_DEPTH):
        return {}, f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            value = inner
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def make_tool_call(call_id: str | None, name: str | None, raw: str | None) -> ToolCall:
    arguments, error = parse_arguments(raw)
    fields: dict[str, Any] = {"name": name or "", "arguments": arguments, "raw_arguments": raw,
                              "argument_error": error}
    if call_id:
        fields["id"] = call_id
    return ToolCall(**fields)


def usage_from(obj: Any) -> Usage | None:
    """Token counts from a litellm/OpenAI usage object, or None when absent."""
    if obj is None:
        return None
    prompt = int(_get(obj, "prompt_tokens", 0) or 0)
    completion = int(_get(obj, "completion_tokens", 0) or 0)
    total = int(_get(obj, "total_tokens", 0) or 0) or prompt + completion
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


def response_from_completion(resp: Any) -> LlmResponse:
    """A non-streamed chat completion → :class:`LlmResponse` (usage cost filled in later)."""
    choices = _get(resp, "choices") or []
    choice = choices[0] if choices else None
    message = _get(choice, "message")
    calls = [
        make_tool_call(_get(c, "id"), _get(_get(c, "function"), "name"), _get(_get(c, "function"), "arguments"))
        for c in (_get(message, "tool_calls") or [])
    ]
    return LlmResponse(
        content=_get(message, "content") or "",
        tool_calls=calls,
        usage=usage_from(_get(resp, "usage")) or Usage(),
        finish_reason=_get(choice, "finish_reason"),
        model=_get(resp, "model"),
    )


class StreamAssembler:
    """Accumulates streamed chunks: text deltas, tool-call fragments, finish reason, usage."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.chunks = 0

    def add(self, chunk: Any) -> str:
        """Take one chunk; return its text delta ("" when it has none)."""
        self.chunks += 1
        self.model = self.model or _get(chunk, "model")
        usage = usage_from(_get(chunk, "usage"))
        if usage is not None and usage.total_tokens:
            self.usage = usage
        text = ""
        for choice in _get(chunk, "choices") or []:
            delta = _get(choice, "delta")
            piece = _get(delta, "content")
            if piece:
                text += piece
            for frag in _get(delta, "tool_calls") or []:
                self._add_call_fragment(frag)
            self.finish_reason = _get(choice, "finish_reason") or self.finish_reason
        if text:
            self.parts.append(text)
        return text

    def _add_call_fragment(self, frag: Any) -> None:
        index = _get(frag, "index")
        frag_id = _get(frag, "id")
        if index is None:  # some providers omit the index: a new id starts a new call
            known = [i for i, c in self.calls.items() if c["id"] == frag_id] if frag_id else []
            index = known[0] if known else (len(self.calls) if frag_id or not self.calls else max(self.calls))
        call = self.calls.setdefault(index, {"id": None, "name": "", "args": []})
        if frag_id:
            call["id"] = frag_id
        fn = _get(frag, "function")
        name = _get(fn, "name")
        if name:
            call["name"] = name if not call["name"] or call["name"] == name else call["name"] + name
        arguments = _get(fn, "arguments")
        if arguments:
            call["args"].append(arguments)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def response(self) -> LlmResponse:
        calls = [
            make_tool_call(c["id"], c["name"], "".join(c["args"]))
            for _, c in sorted(self.calls.items())
        ]
        return LlmResponse(content=self.text, tool_calls=calls, usage=self.usage or Usage(),
                           finish_reason=self.finish_reason, model=self.model)
