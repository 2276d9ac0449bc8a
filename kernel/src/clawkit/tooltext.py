"""The text protocol for tools, for a model without native tool calling.

When :func:`clawkit.capabilities.model_capabilities` says ``supports_tools: false`` the
request goes out with no ``tools``: the system prompt gains a ``## Tool calls (text
protocol)`` section listing each tool (name, description, JSON-schema parameters) and the
format, past tool calls and results in the history are written in the same format, and the
model's answer is read back into tool calls. The format::

    <tool_call>
    {"name": "read_file", "arguments": {"path": "notes.txt"}}
    </tool_call>

one block per call, several allowed, nothing after the last. Results come back in a user
message, one block per call::

    <tool_result name="read_file" id="call_1">
    …the tool's output…
    </tool_result>

The text before the first block is the reply's text. A block whose JSON does not parse
becomes a call with an argument error, reported back to the model like any malformed
call. The call is made without streaming (the protocol's blocks are not the user's to see);
the reply's text is handed to ``on_text`` once it is known. A model the flags say can call tools
but whose server refuses a request with tools saying so (:func:`refuses_tools`) is switched to the
protocol for the rest of the agent's life, the refused call retried through it.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any, Awaitable, Callable

from .types import LlmRequest, LlmResponse, Message, ToolCall, new_id

BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
HEADER = "## Tool calls (text protocol)"


def instructions(request: LlmRequest) -> str:
    lines = [HEADER, "",
             "You call tools by writing, for each call, a block exactly like this (the arguments a JSON object):",
             "", "<tool_call>", '{"name": "TOOL_NAME", "arguments": {"ARG": "VALUE"}}', "</tool_call>", "",
             "Write the blocks at the end of your answer, nothing after the last one, and wait: each result comes "
             "back in the next user message as <tool_result name=\"TOOL_NAME\" id=\"ID\">…</tool_result>. "
             "Answer without a block when you need no tool. The tools:", ""]
    for tool in request.tools:
        schema = tool.openai_schema().get("function", {})
        lines.append(f"- `{schema.get('name', tool.name)}`: {schema.get('description') or ''}".rstrip())
        lines.append(f"  parameters: {json.dumps(schema.get('parameters') or {}, sort_keys=True)}")
    return "\n".join(lines)


def _call_block(call: ToolCall) -> str:
    args = call.raw_arguments if call.argument_error and call.raw_arguments is not None else json.dumps(call.arguments)
    return f'<tool_call>\n{{"name": {json.dumps(call.name)}, "arguments": {args}}}\n</tool_call>'


def _result_block(message: Message) -> str:
    result = message.tool_result
    name = result.name if result is not None else "tool"
    call_id = result.call_id if result is not None else ""
    return f'<tool_result name="{name}" id="{call_id}">\n{message.content}\n</tool_result>'


def encode(request: LlmRequest) -> LlmRequest:
    """``request`` as a model without native tool calling gets it: no ``tools``, the protocol in the
    system prompt, past calls and results as text (consecutive results in one user message)."""
    messages: list[Message] = []
    for m in request.messages:
        if m.role == "assistant" and m.tool_calls:
            text = m.content or ""
            blocks = "\n".join(_call_block(c) for c in m.tool_calls)
            messages.append(Message(role="assistant", content=(text + "\n" if text else "") + blocks))
        elif m.role == "tool":
            block = _result_block(m)
            if messages and messages[-1].role == "user" and messages[-1].metadata.get("tool_results"):
                last = messages[-1]
                messages[-1] = last.model_copy(update={"content": last.content + "\n" + block})
            else:
                messages.append(Message(role="user", content=block, metadata={"tool_results": True}))
        else:
            messages.append(m)
    system = (request.system + "\n\n" if request.system else "") + instructions(request)
    return request.model_copy(update={"messages": messages, "system": system, "tools": [], "tool_choice": None, "stream": False})


def decode(response: LlmResponse) -> LlmResponse:
    """The model's text answer read back into text and tool calls."""
    text = response.content or ""
    first = text.find("<tool_call>")
    if first < 0:
        return response
    calls: list[ToolCall] = []
    for raw in BLOCK.findall(text[first:]):
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or not isinstance(data.get("name"), str):
                raise ValueError('a block must be {"name": "...", "arguments": {...}}')
            args = data.get("arguments") or {}
            if isinstance(args, str):
                args = json.loads(args)
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
            calls.append(ToolCall(id=new_id("call"), name=data["name"], arguments=args))
        except ValueError as exc:
            name = _name_in(raw) or "unknown"
            calls.append(ToolCall(id=new_id("call"), name=name, raw_arguments=raw,
                                  argument_error=f"the <tool_call> block is not valid JSON of the form "
                                                 f'{{"name": ..., "arguments": {{...}}}}: {exc}'))
    return response.model_copy(update={"content": text[:first].strip(), "tool_calls": calls,
                                       "finish_reason": "tool_calls"})


_REFUSAL = re.compile(r"(does not|doesn't|do not|not) support(s|ed)? (native )?(tools|tool[ _]calls|tool[ _]calling|"
                      r"tool[ _]use|function[ _]calling|functions)|tools? (are|is) not supported|"
                      r"(tool[ _]calling|function[ _]calling|tool[ _]use) is not (supported|enabled|available)", re.I)


def refuses_tools(error: Any) -> bool:
    """Whether a provider error is the server saying the model takes no native tools (a 4xx that says
    so: Ollama's "… does not support tools", vLLM's "tool calling is not enabled", …)."""
    if getattr(error, "kind", None) not in ("bad_request", "http", "not_found") or getattr(error, "retryable", False):
        return False
    return bool(_REFUSAL.search(str(error)))


def _name_in(raw: str) -> str | None:
    found = re.search(r'"name"\s*:\s*"([^"]+)"', raw)
    return found.group(1) if found else None


async def complete(complete_fn: Callable[[LlmRequest, Any], Awaitable[LlmResponse]], request: LlmRequest,
                   on_text: Any) -> LlmResponse:
    """One model call through the text protocol: ``complete_fn(encoded_request, None)``, then decoded;
    the reply's text goes to ``on_text`` when the caller streams."""
    response = decode(await complete_fn(encode(request), None))
    if on_text is not None and response.content:
        result = on_text(response.content)
        if inspect.isawaitable(result):
            await result
    return response
