"""The OpenAI chat-completions wire format: request bodies, whole answers and SSE chunks."""

from __future__ import annotations

from typing import Any

from clawkit.openai_wire import StreamAssembler, response_from_completion  # noqa: F401  (StreamAssembler: this wire module's interface, as in anthropic_format)
from clawkit.types import LlmRequest

PATH = "/chat/completions"


def build_body(request: LlmRequest, model: str, config: Any, extras: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": request.openai_messages()}
    if request.tools:
        body["tools"] = [t.openai_schema() for t in request.tools]
    body.update(structured_output(request))
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


def structured_output(request: LlmRequest) -> dict[str, Any]:
    """``response_format`` and ``tool_choice`` in the OpenAI form (typed output, clawkit.output)."""
    out: dict[str, Any] = {}
    if request.response_format:
        out["response_format"] = request.response_format
    choice = request.tool_choice
    if isinstance(choice, dict) and choice.get("name"):
        out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    elif choice:
        out["tool_choice"] = choice
    return out


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
