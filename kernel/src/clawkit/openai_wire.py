"""The OpenAI chat-completions format, for every provider plugin that speaks it (the native HTTP
provider sends and parses the JSON itself; litellm takes the same request keys and hands over its
own objects of the same shape): the request's common keys (:func:`request_keys`), and whole
answers and streamed chunks read into :class:`~clawkit.types.LlmResponse`.

Every field is read by key *or* attribute (:func:`field`), so plain dicts and SDK objects go
through the same code, and a malformed answer yields empty fields, never an exception.
Tool-call arguments go through :func:`clawkit.toolargs.tool_call`.
"""

from __future__ import annotations

from typing import Any

from .toolargs import tool_call
from .types import LlmResponse, Usage


def structured_output(request: Any) -> dict[str, Any]:
    """``response_format`` and ``tool_choice`` in the OpenAI form (typed output, :mod:`clawkit.output`)."""
    out: dict[str, Any] = {}
    if request.response_format:
        out["response_format"] = request.response_format
    choice = request.tool_choice
    if isinstance(choice, dict) and choice.get("name"):
        out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    elif choice:
        out["tool_choice"] = choice
    return out


def request_keys(request: Any, model: str, config: Any) -> dict[str, Any]:
    """What every OpenAI-format request says: model, messages, tools, structured output, and the
    model config's temperature and max_tokens. Each provider adds its own keys (endpoint, retries,
    the model's extra settings, streaming) after these."""
    body: dict[str, Any] = {"model": model, "messages": request.openai_messages()}
    if request.tools:
        body["tools"] = [t.openai_schema() for t in request.tools]
    body.update(structured_output(request))
    if config.temperature is not None:
        body["temperature"] = config.temperature
    if config.max_tokens is not None:
        body["max_tokens"] = config.max_tokens
    return body


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` otherwise; ``default`` when absent or ``obj`` is None."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def usage_from(obj: Any) -> Usage | None:
    """Token counts from a usage object or mapping, or None when there is none."""
    if obj is None or isinstance(obj, (str, bytes, int, float, list)):
        return None
    prompt = int(field(obj, "prompt_tokens", 0) or 0)
    completion = int(field(obj, "completion_tokens", 0) or 0)
    total = int(field(obj, "total_tokens", 0) or 0) or prompt + completion
    # prompt-cache and reasoning counters, all included in the totals above: litellm's Anthropic fields,
    # else OpenAI's details (cached_tokens are cache reads; OpenAI reports no cache writes)
    read = field(obj, "cache_read_input_tokens")
    if not isinstance(read, int):
        read = field(field(obj, "prompt_tokens_details"), "cached_tokens")
    write = field(obj, "cache_creation_input_tokens")
    reasoning = field(field(obj, "completion_tokens_details"), "reasoning_tokens")
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total,
                 cache_read_tokens=read if isinstance(read, int) else 0,
                 cache_write_tokens=write if isinstance(write, int) else 0,
                 reasoning_tokens=reasoning if isinstance(reasoning, int) else 0)


def thinking_blocks(obj: Any) -> list[dict[str, Any]]:
    """litellm's ``thinking_blocks`` (Anthropic's thinking / redacted_thinking, with signatures) as dicts."""
    out = []
    for b in field(obj, "thinking_blocks") or []:
        kind = field(b, "type")
        if kind == "thinking":
            out.append({"type": "thinking", "thinking": field(b, "thinking") or "", "signature": field(b, "signature") or ""})
        elif kind == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": field(b, "data") or ""})
    return out


def response_from_completion(resp: Any) -> LlmResponse:
    """A whole (non-streamed) chat completion → :class:`LlmResponse` (the cost is the provider's to add)."""
    choices = field(resp, "choices") or []
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = field(choice, "message")
    calls = [tool_call(field(c, "id"), field(field(c, "function"), "name"), field(field(c, "function"), "arguments"))
             for c in (field(message, "tool_calls") or [])]
    return LlmResponse(content=field(message, "content") or "", tool_calls=calls,
                       usage=usage_from(field(resp, "usage")) or Usage(),
                       finish_reason=field(choice, "finish_reason"), model=field(resp, "model"), id=field(resp, "id"),
                       thinking=thinking_blocks(message))


class StreamAssembler:
    """Accumulates streamed chunks: text deltas, parallel tool-call fragments, finish reason, usage.

    ``done`` is set by the caller when the stream said so (SSE ``[DONE]``); ``complete`` is
    true once the stream ended properly (``done`` or a finish reason), so a cut stream can be told
    from a finished one.
    """

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.id: str | None = None
        self.chunks = 0
        self.done = False
        self.thinking: list[dict[str, Any]] = []

    def add(self, chunk: Any) -> str:
        """Take one chunk (a decoded SSE ``data`` payload or an SDK chunk); return its text delta."""
        self.chunks += 1
        self.model = self.model or field(chunk, "model")
        self.id = self.id or field(chunk, "id")
        usage = usage_from(field(chunk, "usage"))
        if usage is not None and usage.total_tokens:
            self.usage = usage
        text = ""
        for choice in field(chunk, "choices") or []:
            delta = field(choice, "delta")
            piece = field(delta, "content")
            if piece:
                text += piece
            for frag in field(delta, "tool_calls") or []:
                self._fragment(frag)
            for block in thinking_blocks(delta):
                self._thinking(block)
            self.finish_reason = field(choice, "finish_reason") or self.finish_reason
        if text:
            self.parts.append(text)
        return text

    def _thinking(self, block: dict[str, Any]) -> None:
        """A streamed thinking fragment: text and signature join the open block (a signature ends it)."""
        last = self.thinking[-1] if self.thinking else None
        if block["type"] == "thinking" and last is not None and last["type"] == "thinking" and not last["signature"]:
            last["thinking"] += block["thinking"]
            last["signature"] = block["signature"]
        else:
            self.thinking.append(block)

    def _fragment(self, frag: Any) -> None:
        index = field(frag, "index")
        frag_id = field(frag, "id")
        if index is None:  # some servers omit the index: a new id starts a new call
            known = [i for i, c in self.calls.items() if c["id"] == frag_id] if frag_id else []
            index = known[0] if known else (len(self.calls) if frag_id or not self.calls else max(self.calls))
        call = self.calls.setdefault(index, {"id": None, "name": "", "args": []})
        if frag_id:
            call["id"] = frag_id
        fn = field(frag, "function")
        name = field(fn, "name")
        if name:
            call["name"] = name if call["name"] in ("", name) else call["name"] + name
        arguments = field(fn, "arguments")
        if arguments:
            call["args"].append(arguments)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def complete(self) -> bool:
        return self.done or self.finish_reason is not None

    def response(self) -> LlmResponse:
        calls = [tool_call(c["id"], c["name"], "".join(c["args"])) for _, c in sorted(self.calls.items())]
        return LlmResponse(content=self.text, tool_calls=calls, usage=self.usage or Usage(),
                           finish_reason=self.finish_reason, model=self.model, id=self.id, thinking=self.thinking)
