"""The no-count fast path of history trimming and compaction: a cheap bound that never
under-estimates the tokens the plugins count."""

from __future__ import annotations

import json

from clawkit import LlmRequest, Message, ToolCall, ToolDef
from clawkit.tokens import get_counter, max_request_tokens
from clawkit_truncator.history import message_tokens
from hypothesis import given, settings
from hypothesis import strategies as st

TEXT = st.text(min_size=0, max_size=300)


@settings(max_examples=60, deadline=None)
@given(system=TEXT, contents=st.lists(TEXT, max_size=6), args=st.lists(TEXT, max_size=3))
def test_the_bound_never_underestimates_the_real_count(system, contents, args):
    counter = get_counter("gpt-4o-mini")
    messages = [Message(role="user", content=c) for c in contents]
    messages.append(Message(role="assistant", tool_calls=[ToolCall(name="t", arguments={"a": a}) for a in args]))
    tools = [ToolDef(name="read_file", description="Read a file … ünïcode", parameters={"type": "object"})]
    request = LlmRequest(model="m", messages=messages, system=system, tools=tools)
    real = counter.count(system) + sum(counter.count(t.model_dump_json()) for t in tools)
    real += sum(message_tokens(m, counter) for m in messages)
    if max_request_tokens(request) < real:
        raise AssertionError(f"bound said under {real} tokens: {json.dumps([system, contents, args])[:300]}")
    assert max_request_tokens(request) < 10 * real + 100_000


def test_the_bound_follows_a_tool_schema_edited_in_place():
    # the schema's size is remembered per dict: a schema that grows must be measured again
    request = LlmRequest(model="m", messages=[], system="", tools=[
        ToolDef(name="t", description="", parameters={"type": "object", "properties": {"path": {"type": "string"}}})])
    params = request.tools[0].parameters
    before = max_request_tokens(request)
    assert max_request_tokens(request) == before
    params["properties"]["pattern"] = {"type": "string", "description": "x" * 500}
    grown = max_request_tokens(request)
    assert grown >= before + 4 * 500
    params["description"] = "y" * 300
    assert max_request_tokens(request) >= grown + 4 * 300
