"""clawkit.openai_wire: the OpenAI chat-completions format read the same way for every provider."""

from __future__ import annotations

from types import SimpleNamespace

from clawkit.openai_wire import StreamAssembler, response_from_completion


def test_a_whole_completion_from_a_dict_or_an_sdk_object():
    data = {"model": "m", "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            "choices": [{"finish_reason": "tool_calls", "message": {"content": "Checking.", "tool_calls": [
                {"id": "c1", "function": {"name": "add", "arguments": '{"a": 1}'}}]}}]}
    r = response_from_completion(data)
    assert r.content == "Checking." and r.tool_calls[0].arguments == {"a": 1} and r.usage.total_tokens == 5
    sdk = SimpleNamespace(model="m", usage=None, choices=[SimpleNamespace(
        finish_reason="stop", message=SimpleNamespace(content="hi", tool_calls=None))])
    assert response_from_completion(sdk).content == "hi"


def test_a_malformed_answer_gives_empty_fields_not_an_exception():
    for junk in ([1, 2], "text", None, {"choices": "x", "usage": "y"}, {"choices": [None]}):
        r = response_from_completion(junk)
        assert r.content == "" and r.tool_calls == [] and r.usage.total_tokens == 0


def test_stream_fragments_join_into_parallel_calls_with_or_without_an_index():
    s = StreamAssembler()
    s.add({"choices": [{"delta": {"content": "On it. "}}]})
    s.add({"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "add", "arguments": '{"a":'}}]}}]})
    s.add({"choices": [{"delta": {"tool_calls": [{"id": "b", "function": {"name": "mul", "arguments": '{"b": 2}'}}]}}]})
    s.add({"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"arguments": " 1}"}}]}}]})
    assert not s.complete
    s.add({"choices": [{"delta": {}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 4, "completion_tokens": 6}})
    r = s.response()
    assert s.complete and r.content == "On it. " and r.usage.total_tokens == 10
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("add", {"a": 1}), ("mul", {"b": 2})]
