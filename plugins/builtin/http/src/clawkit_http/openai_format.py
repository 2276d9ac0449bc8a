"""The OpenAI chat-completions wire format: request bodies, whole answers and SSE chunks."""

from __future__ import annotations

from typing import Any

from clawkit.openai_wire import StreamAssembler, request_keys, response_from_completion, structured_output  # noqa: F401  (StreamAssembler: this wire module's interface, as in anthropic_format)
from clawkit.types import LlmRequest

PATH = "/chat/completions"


def build_body(request: LlmRequest, model: str, config: Any, extras: dict[str, Any]) -> dict[str, Any]:
    body = request_keys(request, model, config)
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


parse_response = response_from_completion  # a whole (non-streamed) chat completion


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
