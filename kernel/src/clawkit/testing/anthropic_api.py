"""The model server's Anthropic Messages dialect (``POST /v1/messages``).

Same script, same faults, answered the way Anthropic's API answers, so the
``anthropic/...`` path through litellm is tested over real HTTP as well. Pass
``server.base_url`` (no ``/v1``) as the ``api_base``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Iterator

from .replies import Fault, Reply

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}


def error_body(fault: Fault) -> dict[str, Any]:
    """Anthropic's error envelope; a context overflow reads like Anthropic's own."""
    message = fault.message
    if (fault.body or {}).get("error", {}).get("code") == "context_length_exceeded":
        message = "prompt is too long: 200000 tokens > 128000 maximum"
    return {"type": "error", "error": {"type": ERROR_TYPES.get(fault.code, "api_error"), "message": message}}


def _tool_input(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # malformed: sent as a bare string, which no client can use as an object


def _message(reply: Reply, body: dict[str, Any], usage: dict[str, int], content: list[Any]) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
        "model": reply.model or str(body.get("model") or "scripted-model"), "content": content,
        "stop_reason": STOP_REASONS.get(reply.resolved_finish_reason(), reply.resolved_finish_reason()),
        "stop_sequence": None,
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                  **_cache_usage(reply)},
    }


def _cache_usage(reply: Reply) -> dict[str, int]:
    """Anthropic's prompt-cache counters, when the reply scripts them."""
    out = {}
    if reply.cache_write_tokens:
        out["cache_creation_input_tokens"] = reply.cache_write_tokens
    if reply.cache_read_tokens:
        out["cache_read_input_tokens"] = reply.cache_read_tokens
    return out


def _events(reply: Reply) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """``(event name, payload, is_delta)`` for every content block of the reply."""
    index = 0
    for block in reply.thinking:
        if block.get("type") == "thinking":
            yield "content_block_start", {"index": index, "content_block": {"type": "thinking", "thinking": ""}}, False
            yield "content_block_delta", {"index": index, "delta": {"type": "thinking_delta",
                                                                    "thinking": block.get("thinking", "")}}, True
            yield "content_block_delta", {"index": index, "delta": {"type": "signature_delta",
                                                                    "signature": block.get("signature", "")}}, True
        else:
            yield "content_block_start", {"index": index, "content_block": dict(block)}, False
        yield "content_block_stop", {"index": index}, False
        index += 1
    if reply.content:
        yield "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}, False
        for piece in reply.text_chunks():
            yield "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}}, True
        yield "content_block_stop", {"index": index}, False
        index += 1
    for call in reply.calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield "content_block_start", {"index": index, "content_block": block}, False
        for start in range(0, len(call.arguments), 12):
            delta = {"type": "input_json_delta", "partial_json": call.arguments[start : start + 12]}
            yield "content_block_delta", {"index": index, "delta": delta}, True
        yield "content_block_stop", {"index": index}, False
        index += 1


def respond(handler: Any, reply: Reply, body: dict[str, Any], cut_after: int | None, usage: dict[str, int]) -> None:
    """Answer ``reply`` on ``handler`` (the server's request handler), whole or streamed."""
    if not body.get("stream"):
        content: list[Any] = [dict(b) for b in reply.thinking]
        content += [{"type": "text", "text": reply.content}] if reply.content else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
                    for c in reply.calls]
        payload = _message(reply, body, usage, content)
        if cut_after is None:
            handler._send_json(200, payload)
        else:
            handler._send_truncated_json(payload)
        return
    handler._start_sse()
    start = _message(reply, body, usage, [])
    start.update(stop_reason=None, usage={"input_tokens": usage["prompt_tokens"],
                                         "output_tokens": min(1, usage["completion_tokens"]), **_cache_usage(reply)})
    handler._event({"type": "message_start", "message": start}, "message_start")
    deltas = 0
    for name, payload, is_delta in _events(reply):
        if is_delta:
            if cut_after is not None and deltas >= cut_after:
                handler._cut()
                return
            deltas += 1
        handler._event({"type": name, **payload}, name)
    if cut_after is not None:
        handler._cut()
        return
    stop = STOP_REASONS.get(reply.resolved_finish_reason(), reply.resolved_finish_reason())
    handler._event({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage["completion_tokens"]}}, "message_delta")
    handler._event({"type": "message_stop"}, "message_stop")
    handler._write_chunk(b"")
