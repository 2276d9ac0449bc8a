"""The text protocol for tools (issue 27 item 14): encoding a request, decoding an answer."""

from __future__ import annotations

from clawkit.errors import ProviderError
from clawkit.tooltext import HEADER, decode, encode, refuses_tools
from clawkit.types import LlmRequest, ToolDef, LlmResponse, Message, ToolCall, ToolResult


READ = ToolDef(name="read_file", description="Read a file.",
               parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})


def test_encode_moves_tools_and_history_into_text():
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a"})
    req = LlmRequest(model="m", system="Be brief.", tools=[READ], messages=[
        Message(role="user", content="read a and b"),
        Message(role="assistant", content="ok", tool_calls=[call, ToolCall(id="c2", name="read_file", arguments={"path": "b"})]),
        Message(role="tool", content="A", tool_result=ToolResult(call_id="c1", name="read_file", content="A")),
        Message(role="tool", content="B", tool_result=ToolResult(call_id="c2", name="read_file", content="B")),
    ])
    out = encode(req)
    assert out.tools == [] and out.stream is False
    assert out.system.startswith("Be brief.") and HEADER in out.system and "`read_file`: Read a file." in out.system
    assert [m.role for m in out.messages] == ["user", "assistant", "user"]
    assert out.messages[1].content.count("<tool_call>") == 2 and not out.messages[1].tool_calls
    assert '<tool_result name="read_file" id="c1">\nA\n</tool_result>' in out.messages[2].content
    assert '<tool_result name="read_file" id="c2">\nB\n</tool_result>' in out.messages[2].content
    assert req.tools and req.messages[1].tool_calls  # the original request is untouched


def test_decode_reads_blocks_and_reports_bad_ones():
    text = ('I will read both.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>\n'
            '<tool_call>{"name": "read_file", "arguments": {"path": }</tool_call>')
    out = decode(LlmResponse(content=text))
    assert out.content == "I will read both." and out.finish_reason == "tool_calls"
    good, bad = out.tool_calls
    assert good.name == "read_file" and good.arguments == {"path": "a"}
    assert bad.name == "read_file" and bad.argument_error and "not valid JSON" in bad.argument_error
    assert decode(LlmResponse(content="plain answer")).tool_calls == []


def test_refusals_are_recognised():
    assert refuses_tools(ProviderError("HTTP 400: model x does not support tools", kind="bad_request"))
    assert refuses_tools(ProviderError("HTTP 400: tool calling is not enabled for this model", kind="bad_request"))
    assert not refuses_tools(ProviderError("HTTP 400: context too long", kind="bad_request"))
    assert not refuses_tools(ProviderError("does not support tools", kind="rate_limit", retryable=True))
