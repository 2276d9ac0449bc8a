"""The OpenAI chat-completions wire format: request bodies, whole answers and SSE chunks."""

from __future__ import annotations

from typing import Any

from clawkit.toolargs import tool_call
from clawkit.types import LlmRequest, LlmResponse, Usage

PATH = "/chat/completions"


def usage_from(data: Any) -> Usage | None:
    if not isinstance(data, dict):
        return None
    prompt = int(data.get("prompt_tokens") or 0)
    completion = int(data.get("completion_tokens") or 0)
    return Usage(prompt_tokens=prompt, completion_tokens=completion,
                 total_tokens=int(data.get("total_tokens") or 0) or prompt + completion)


def build_body(request: LlmRequest, model: str, config: Any, extras: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": request.openai_messages()}
    if request.tools:
        body["tools"] = [t.openai_schema() for t in request.tools]
    if config.temperature is not None:
        body["temperature"] = config.temperature
    if config.max_tokens is not None:
        body["max_tokens"] = config.max_tokens
    body.update(extras)
    body.update(request.settings)
    effort = request.reasoning_effort or body.pop("reasoning_effort", None)
    if effort:
        body["reasoning_effort"] = effort
    body.pop("stream_options", None)
    body["stream"] = bool(request.stream)
    if request.stream:
        body["stream_options"] = {"include_usage": True}
    return body


def parse_response(data: Any) -> LlmResponse:
    """A whole (non-streamed) chat completion."""
    choices = data.get("choices") or [] if isinstance(data, dict) else []
    choice = choices[0] if choices else {}
    message = choice.get("message") or {}
    calls = [tool_call(c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
             for c in message.get("tool_calls") or []]
    return LlmResponse(content=message.get("content") or "", tool_calls=calls,
                       usage=usage_from(data.get("usage")) or Usage(), finish_reason=choice.get("finish_reason"),
                       model=data.get("model"))


class StreamAssembler:
    """Accumulates streamed chunks: text deltas, parallel tool-call fragments, finish, usage."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.done = False

    def add(self, chunk: dict[str, Any]) -> str:
        """Take one decoded SSE ``data`` payload; return its text delta."""
        self.model = self.model or chunk.get("model")
        usage = usage_from(chunk.get("usage"))
        if usage is not None and usage.total_tokens:
            self.usage = usage
        text = ""
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text += delta["content"]
            for frag in delta.get("tool_calls") or []:
                self._fragment(frag)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        if text:
            self.parts.append(text)
        return text

    def _fragment(self, frag: dict[str, Any]) -> None:
        index = frag.get("index")
        frag_id = frag.get("id")
        if index is None:  # some servers omit the index: a new id starts a new call
            known = [i for i, c in self.calls.items() if frag_id and c["id"] == frag_id]
            index = known[0] if known else (len(self.calls) if frag_id or not self.calls else max(self.calls))
        call = self.calls.setdefault(index, {"id": None, "name": "", "args": []})
        if frag_id:
            call["id"] = frag_id
        fn = frag.get("function") or {}
        if fn.get("name"):
            call["name"] = fn["name"] if call["name"] in ("", fn["name"]) else call["name"] + fn["name"]
        if fn.get("arguments"):
            call["args"].append(fn["arguments"])

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def complete(self) -> bool:
        return self.done or self.finish_reason is not None

    def response(self) -> LlmResponse:
        calls = [tool_call(c["id"], c["name"], "".join(c["args"])) for _, c in sorted(self.calls.items())]
        return LlmResponse(content=self.text, tool_calls=calls, usage=self.usage or Usage(),
                           finish_reason=self.finish_reason, model=self.model)


def error_message(data: Any) -> str:
    """The server's error text from an OpenAI-style error body (or the body itself)."""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if data.get("message"):
            return str(data["message"])
    return str(data)[:500]
