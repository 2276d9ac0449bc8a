"""Turning litellm's responses (whole or streamed) into clawkit's :class:`LlmResponse`.

Everything here reads litellm objects by attribute *or* key, so it also works on
plain OpenAI-shaped dicts (and is testable without litellm).
"""

from __future__ import annotations

from typing import Any

from clawkit.toolargs import tool_call
from clawkit.types import LlmResponse, Usage


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


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
        tool_call(_get(c, "id"), _get(_get(c, "function"), "name"), _get(_get(c, "function"), "arguments"))
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
            tool_call(c["id"], c["name"], "".join(c["args"]))
            for _, c in sorted(self.calls.items())
        ]
        return LlmResponse(content=self.text, tool_calls=calls, usage=self.usage or Usage(),
                           finish_reason=self.finish_reason, model=self.model)
