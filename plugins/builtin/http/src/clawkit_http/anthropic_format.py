"""The Anthropic Messages wire format: request bodies, whole answers and SSE events."""

from __future__ import annotations

import json
from typing import Any

from clawkit.provider_features import approx_tokens
from clawkit.toolargs import tool_call
from clawkit.types import LlmRequest, LlmResponse, Message, Usage

from . import anthropic_features


PATH = "/v1/messages"
VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add a turn, merging with the previous one of the same role (Anthropic wants alternation)."""
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"] = _blocks(out[-1]["content"]) + blocks
    else:
        out.append({"role": role, "content": blocks})


def messages(history: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """``(extra system text, messages)`` in Anthropic's shape from clawkit's history."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in history:
        if m.role == "system":
            system.append(m.content)
        elif m.role == "tool":
            call_id = m.tool_result.call_id if m.tool_result is not None else ""
            block = {"type": "tool_result", "tool_use_id": call_id, "content": m.content or "(empty)"}
            if m.tool_result is not None and m.tool_result.is_error:
                block["is_error"] = True
            _append(out, "user", [block])
        elif m.role == "assistant":
            blocks = anthropic_features.history_blocks(m) + _blocks(m.content)
            for c in m.tool_calls:
                blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
            _append(out, "assistant", blocks)
        else:
            blocks = _blocks(m.content)
            if m.blocks:  # attachments: image / document blocks (clawkit.attachments)
                from clawkit.attachments import anthropic_part, attached

                blocks = blocks + [anthropic_part(b) for b in attached(m)]
            _append(out, "user", blocks or [{"type": "text", "text": "(empty)"}])
    return "\n\n".join(system), out


def build_body(request: LlmRequest, model: str, config: Any, extras: dict[str, Any]) -> dict[str, Any]:
    extra_system, msgs = messages(request.messages)
    body: dict[str, Any] = {"model": model, "max_tokens": config.max_tokens or DEFAULT_MAX_TOKENS, "messages": msgs}
    system = "\n\n".join(s for s in (request.system, extra_system) if s)
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                         for t in request.tools]
    if request.tool_choice:
        body["tool_choice"] = tool_choice(request.tool_choice)
    if config.temperature is not None:
        body["temperature"] = config.temperature
    body.update(extras)
    body.update(request.settings)
    body.pop("reasoning_effort", None)  # OpenAI's knob; Anthropic's is ``thinking`` (pass it in settings)
    body.pop("stream_options", None)
    body["stream"] = bool(request.stream)
    return anthropic_features.apply(body, request, config, model, DEFAULT_MAX_TOKENS)


def tool_choice(choice: Any) -> dict[str, Any]:
    """clawkit's ``tool_choice`` (typed output's forced final tool) in Anthropic's form."""
    if isinstance(choice, dict) and choice.get("name"):
        return {"type": "tool", "name": choice["name"]}
    return {"type": {"required": "any", "none": "none"}.get(str(choice), "auto")}


def _usage(data: Any, thinking: list[dict[str, Any]] | None = None) -> Usage:
    data = data if isinstance(data, dict) else {}
    prompt = sum(int(data.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    completion = int(data.get("output_tokens") or 0)
    # Anthropic counts thinking inside output_tokens and reports no split: counted from the visible thinking
    reasoning = min(completion, sum(approx_tokens(b.get("thinking") or "") for b in thinking or ()))
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                 cache_write_tokens=int(data.get("cache_creation_input_tokens") or 0),
                 cache_read_tokens=int(data.get("cache_read_input_tokens") or 0), reasoning_tokens=reasoning)


def _raw_input(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def parse_response(data: Any) -> LlmResponse:
    text: list[str] = []
    calls = []
    thinking = []
    for block in data.get("content") or []:
        if block.get("type") in anthropic_features.THINKING_TYPES:
            thinking.append(block)
        elif block.get("type") == "text":
            text.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            calls.append(tool_call(block.get("id"), block.get("name"), _raw_input(block.get("input"))))
    stop = data.get("stop_reason")
    return LlmResponse(content="".join(text), tool_calls=calls, usage=_usage(data.get("usage"), thinking),
                       finish_reason=FINISH.get(stop, stop), model=data.get("model"), id=data.get("id"), thinking=thinking)


class StreamError(Exception):
    """An ``error`` event inside an otherwise successful stream (e.g. ``overloaded_error``)."""

    def __init__(self, data: dict[str, Any]):
        err = data.get("error") or {}
        super().__init__(str(err.get("message") or data))
        self.type = str(err.get("type") or "")


class StreamAssembler:
    """Accumulates Messages stream events: text and tool-use blocks, stop reason, usage."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.blocks: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.model: str | None = None
        self.id: str | None = None
        self.input: dict[str, Any] = {}
        self.output_tokens = 0
        self.done = False

    def add(self, event: dict[str, Any]) -> str:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model")
            self.id = message.get("id")
            self.input = message.get("usage") or {}
            self.output_tokens = int(self.input.get("output_tokens") or 0)
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            self.blocks[int(event.get("index", len(self.blocks)))] = {
                "type": block.get("type"), "id": block.get("id"), "name": block.get("name"), "json": [],
                "thinking": [block.get("thinking") or ""], "signature": block.get("signature") or "",
                "data": block.get("data")}
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            block = self.blocks.setdefault(int(event.get("index", 0)), {"type": "text", "json": []})
            if delta.get("type") == "text_delta" and delta.get("text"):
                self.parts.append(delta["text"])
                return delta["text"]
            if delta.get("type") == "input_json_delta":
                block["json"].append(delta.get("partial_json") or "")
            elif delta.get("type") == "thinking_delta":
                block.setdefault("thinking", []).append(delta.get("thinking") or "")
            elif delta.get("type") == "signature_delta":
                block["signature"] = block.get("signature", "") + (delta.get("signature") or "")
        elif kind == "message_delta":
            stop = (event.get("delta") or {}).get("stop_reason")
            self.finish_reason = FINISH.get(stop, stop) or self.finish_reason
            self.output_tokens = int((event.get("usage") or {}).get("output_tokens") or self.output_tokens)
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise StreamError(event)
        return ""

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def complete(self) -> bool:
        return self.done

    def response(self) -> LlmResponse:
        calls = [tool_call(b.get("id"), b.get("name"), "".join(b["json"]))
                 for _, b in sorted(self.blocks.items()) if b.get("type") == "tool_use"]
        thinking = []
        for _, b in sorted(self.blocks.items()):
            if b.get("type") == "thinking":
                thinking.append({"type": "thinking", "thinking": "".join(b.get("thinking") or ()),
                                 "signature": b.get("signature") or ""})
            elif b.get("type") == "redacted_thinking":
                thinking.append({"type": "redacted_thinking", "data": b.get("data") or ""})
        usage = _usage({**self.input, "output_tokens": self.output_tokens}, thinking)
        return LlmResponse(content=self.text, tool_calls=calls, usage=usage, finish_reason=self.finish_reason,
                           model=self.model, id=self.id, thinking=thinking)


def error_message(data: Any) -> str:
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        err = data["error"]
        return f"{err.get('type', 'error')}: {err.get('message', '')}"
    return str(data)[:500]
