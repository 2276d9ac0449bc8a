"""A server that reports no usage (``ModelServer(report_usage=False)``): the native provider asks for
it on streamed OpenAI requests, then counts the call itself, marks it estimated and prices it."""

from __future__ import annotations

import asyncio

import pytest
from clawkit.config import ModelConfig
from clawkit.testing.replies import Reply
from clawkit.testing.server import ModelServer
from clawkit.types import LlmRequest, Message
from clawkit_http.provider import HttpProvider


@pytest.fixture(scope="module")
def quiet():
    with ModelServer(report_usage=False) as srv:
        yield srv


@pytest.mark.parametrize("fmt, stream", [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)])
def test_no_usage_reported_is_estimated_and_priced(quiet, fmt, stream):
    quiet.reset()
    quiet.script(Reply.tool_calls([("get_weather", {"city": "Paris"})], text="Let me look that up for you."))
    base = {"name": "openai/test-model", "api_base": quiet.url} if fmt == "openai" else \
        {"name": "anthropic/claude-test", "api_base": quiet.base_url}
    cfg = ModelConfig(**base, api_key="sk-test", timeout=5, max_retries=0, input_cost_per_token=0.5,
                      output_cost_per_token=1.0)
    req = LlmRequest(model="", messages=[Message(role="user", content="What is the weather in Paris today? " * 20)],
                     system="be brief", stream=stream)
    out = asyncio.run(HttpProvider(cfg).complete(req))
    u = out.usage
    assert u.estimated and u.prompt_tokens > 100 and u.completion_tokens > 5
    assert u.cost == pytest.approx(u.prompt_tokens * 0.5 + u.completion_tokens * 1.0)
    body = quiet.requests[0].body
    if fmt == "openai" and stream:
        assert body["stream_options"] == {"include_usage": True}


def test_reported_usage_is_not_marked(model_server):
    model_server.script("Hello there.")
    cfg = ModelConfig(name="openai/test-model", api_base=model_server.url, api_key="sk-test", timeout=5, max_retries=0)
    out = asyncio.run(HttpProvider(cfg).complete(LlmRequest(model="", messages=[Message(role="user", content="hi")])))
    assert out.usage.total_tokens > 0 and not out.usage.estimated
