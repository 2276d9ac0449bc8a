"""Usage when the provider reports none: the loopback server's no-usage mode, the local estimate
(:func:`clawkit.tokens.estimate_usage`), and the kernel's fallback for any provider."""

from __future__ import annotations

import http.client
import json

from clawkit.testing.server import ModelServer
from clawkit.types import LlmRequest, LlmResponse, Message, ToolCall, ToolDef, Usage


def _post(server, body, path="/v1/chat/completions"):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    data = conn.getresponse().read()
    conn.close()
    return data


def _events(data: bytes) -> list:
    return [json.loads(line[6:]) for line in data.decode().splitlines()
            if line.startswith("data: ") and line[6:] != "[DONE]"]


def test_server_without_usage_ignores_include_usage_in_every_format():
    body = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}
    with ModelServer(report_usage=False) as server:
        server.script("one", "two", "three")
        whole = json.loads(_post(server, body))
        assert whole["choices"][0]["message"]["content"] == "one" and "usage" not in whole
        streamed = _events(_post(server, {**body, "stream": True, "stream_options": {"include_usage": True}}))
        assert streamed and all("usage" not in e for e in streamed)  # asked for, never sent
        assert server.requests[1].body["stream_options"] == {"include_usage": True}
        anthropic = json.loads(_post(server, {**body, "max_tokens": 10}, path="/v1/messages"))
        assert anthropic["usage"] == {"input_tokens": 0, "output_tokens": 0}
    with ModelServer() as server:  # the default still reports it
        server.script("one")
        assert json.loads(_post(server, body))["usage"]["total_tokens"] > 0


def test_estimate_counts_prompt_and_completion_and_says_so():
    request = LlmRequest(model="openai/gpt-4o-mini", system="You are terse.",
                         messages=[Message(role="user", content="What is in notes.txt? " * 50),
                                   Message(role="assistant", content="",
                                           tool_calls=[ToolCall(name="read_file", arguments={"path": "notes.txt"})])],
                         tools=[ToolDef(name="read_file", description="Read a file.")])
    response = LlmResponse(content="It holds the plan for the week.",
                           tool_calls=[ToolCall(name="write_file", arguments={"path": "a", "content": "b" * 40})])
    from clawkit.tokens import estimate_usage

    u = estimate_usage(request, response)
    assert u.estimated and u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert 250 < u.prompt_tokens < 600  # ~300 tokens of question plus overheads
    assert 15 < u.completion_tokens < 80
    bigger = estimate_usage(request.model_copy(update={"system": "You are terse. " * 400}), response)
    assert bigger.prompt_tokens > u.prompt_tokens + 800


def test_estimate_is_bounded_on_huge_input():
    from clawkit.tokens import ESTIMATE_MAX_CHARS, estimate_usage

    huge = "word " * (ESTIMATE_MAX_CHARS // 2)  # 2.5x the exactly-counted prefix: scaled past it
    u = estimate_usage(LlmRequest(model="m", messages=[Message(role="user", content=huge)]), LlmResponse(content="ok"))
    assert u.estimated and u.prompt_tokens > ESTIMATE_MAX_CHARS // 5


def test_a_sum_is_estimated_when_any_part_is():
    from clawkit.loop import _add_usage

    total = Usage()
    _add_usage(total, Usage(prompt_tokens=5, completion_tokens=1, total_tokens=6))
    assert not total.estimated
    _add_usage(total, {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "estimated": True})
    assert total.estimated and total.total_tokens == 11


def test_the_kernel_estimates_for_a_provider_that_reports_nothing(make_agent):
    from clawkit.testing import ScriptedReply

    # a provider that says nothing (the scripted one otherwise invents a count)
    silent = ScriptedReply(text="a plain answer with no usage at all", usage=Usage())
    agent = make_agent([silent])
    r = agent.run("hello")
    assert r.usage.estimated and r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    calls = [e["data"] for e in agent.store.events(r.session_id) if e["type"] == "llm.call"]
    assert calls[0]["usage"]["estimated"] is True
