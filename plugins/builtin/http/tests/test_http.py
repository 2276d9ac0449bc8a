"""The native provider against the loopback model_server, in both wire formats, over real HTTP."""

from __future__ import annotations

import asyncio
import json

import clawkit_http
import pytest
from clawkit.config import ModelConfig
from clawkit.providers import ProviderError, ProviderRegistry
from clawkit.testing.replies import Fault, Reply
from clawkit.types import LlmRequest, Message, ToolDef
from clawkit_http.prices import _table_text, price_per_token
from clawkit_http.provider import HttpProvider

FORMATS = ("openai", "anthropic")


def model_config(server, fmt: str, **extra) -> ModelConfig:
    if fmt == "openai":
        data = {"name": "openai/test-model", "api_base": server.url}
    else:
        data = {"name": "anthropic/claude-test", "api_base": server.base_url}
    return ModelConfig(**{**data, "api_key": "sk-test", "timeout": 5, "max_retries": 2, "retry_base_delay": 0.01,
                          **extra})


class Sleeps:
    """Records the waits between retries (and waits a token amount, so the test stays fast)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


def provider(server, fmt, **extra) -> tuple[HttpProvider, Sleeps]:
    sleeps = Sleeps()
    return HttpProvider(model_config(server, fmt, **extra), sleep=sleeps), sleeps


def request(stream: bool = True, tools: bool = False, text: str = "hi") -> LlmRequest:
    defs = [ToolDef(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}}),
            ToolDef(name="get_time")] if tools else []
    return LlmRequest(model="", messages=[Message(role="user", content=text)], system="be brief", tools=defs,
                      stream=stream)


def call(prov: HttpProvider, req: LlmRequest, deltas: list[str] | None = None):
    return asyncio.run(prov.complete(req, deltas.append if deltas is not None else None))


@pytest.mark.parametrize("fmt", FORMATS)
def test_plain_and_streamed_text(model_server, fmt):
    model_server.script("Hello there, friend.", Reply.text("Streamed words arrive one by one."))
    prov, _ = provider(model_server, fmt)
    whole = call(prov, request(stream=False))
    assert whole.content == "Hello there, friend." and whole.finish_reason == "stop"
    deltas: list[str] = []
    streamed = call(prov, request(stream=True), deltas)
    assert streamed.content == "Streamed words arrive one by one." and len(deltas) > 3
    assert "".join(deltas) == streamed.content
    first = model_server.requests[0]
    if fmt == "openai":
        assert first.path == "/v1/chat/completions" and first.headers["authorization"] == "Bearer sk-test"
        assert first.body["model"] == "test-model" and first.messages[0] == {"role": "system", "content": "be brief"}
        assert model_server.requests[1].body["stream_options"] == {"include_usage": True}
    else:
        assert first.path == "/v1/messages" and first.headers["x-api-key"] == "sk-test"
        assert first.body["model"] == "claude-test" and first.body["system"] == "be brief"
        assert first.body["max_tokens"] > 0 and first.messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", (True, False))
def test_parallel_tool_calls_and_usage(model_server, fmt, stream):
    model_server.script(Reply.tool_calls([("get_weather", {"city": "Paris"}), ("get_time", {})], text="Checking."))
    prov, _ = provider(model_server, fmt)
    resp = call(prov, request(stream=stream, tools=True))
    assert [(c.name, c.arguments) for c in resp.tool_calls] == [("get_weather", {"city": "Paris"}), ("get_time", {})]
    assert [c.id for c in resp.tool_calls] == ["call_0_get_weather", "call_1_get_time"]
    assert resp.finish_reason == "tool_calls" and resp.content == "Checking."
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    sent = model_server.requests[0].tools
    names = [t["function"]["name"] for t in sent] if fmt == "openai" else [t["name"] for t in sent]
    assert names == ["get_weather", "get_time"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", (True, False))
def test_malformed_tool_arguments_are_reported_not_raised(model_server, fmt, stream):
    model_server.script(Reply.malformed_tool_call("get_weather", '{"city": "Par'))
    prov, _ = provider(model_server, fmt)
    (bad,) = call(prov, request(stream=stream, tools=True)).tool_calls
    assert bad.name == "get_weather" and bad.arguments == {} and bad.argument_error
    assert bad.raw_arguments == '{"city": "Par'


@pytest.mark.parametrize("fmt", FORMATS)
def test_arguments_nested_past_the_limit_are_an_argument_error(model_server, fmt):
    """The same bound as every provider (clawkit.toolargs): 100 levels pass the JSON parser
    but not the argument check, so no tool ever walks them."""
    deep = '{"city": ' + "[" * 100 + "]" * 100 + "}"
    model_server.script(Reply.malformed_tool_call("get_weather", deep))
    prov, _ = provider(model_server, fmt)
    (bad,) = call(prov, request(stream=True, tools=True)).tool_calls
    assert bad.arguments == {} and bad.argument_error == "arguments are nested deeper than 64 levels"


@pytest.mark.parametrize("fmt", FORMATS)
def test_tool_round_trip_through_an_agent(model_server, make_agent, fmt):
    """Parallel calls run, their results go back in the format's own shape, the reply streams."""
    model_server.script(Reply.tool_calls([("shout", {"text": "a"}), ("shout", {"text": "b"})]), "Done: A B.")
    cfg = model_config(model_server, fmt).model_dump()

    class Tools:
        @clawkit_http.hookimpl
        def register_tools(self, register):
            def shout(text: str) -> str:
                """Upper-case the text."""
                return text.upper()

            register(shout)

    agent = make_agent(plugins=(clawkit_http, Tools()), provider="config", model=cfg, tools=["shout"])
    chunks: list[str] = []
    result = agent.run("go", deliver=lambda o: chunks.append(o.content) if o.kind == "stream_chunk" else None)
    assert result.reply == "Done: A B." and "".join(chunks) == "Done: A B."
    assert [c["name"] for c in result.tool_calls] == ["shout", "shout"]
    second = model_server.requests[1]
    if fmt == "openai":
        tool_msgs = [m for m in second.messages if m["role"] == "tool"]
        assert [(m["tool_call_id"], m["content"]) for m in tool_msgs] == [("call_0_shout", "A"), ("call_1_shout", "B")]
    else:
        results = second.messages[-1]["content"]
        assert second.messages[-1]["role"] == "user"
        assert [(b["tool_use_id"], b["content"]) for b in results] == [("call_0_shout", "A"), ("call_1_shout", "B")]
        assert [b["type"] for b in second.messages[-2]["content"]] == ["tool_use", "tool_use"]
    assert result.usage.total_tokens > 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_429_honours_retry_after_then_succeeds(model_server, fmt):
    model_server.script(Fault.rate_limit(retry_after=2), "after the wait")
    prov, sleeps = provider(model_server, fmt)
    retries: list[tuple] = []
    prov.on_retry = lambda notice: retries.append((notice.attempt, notice.error.kind))
    assert call(prov, request()).content == "after the wait"
    assert sleeps.delays and sleeps.delays[0] >= 2.0
    assert retries == [(1, "rate_limit")] and len(model_server.requests) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_retry_after_beyond_the_limit_fails_at_once(model_server, fmt):
    model_server.script(Fault.rate_limit(retry_after=600), "never")
    prov, sleeps = provider(model_server, fmt, max_retry_after=5)
    with pytest.raises(ProviderError, match="wait 600s, more than max_retry_after") as info:
        call(prov, request())
    assert info.value.kind == "rate_limit" and info.value.retry_after == 600 and sleeps.delays == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_5xx_is_retried_and_then_given_up(model_server, fmt):
    model_server.script(Fault.status(503), "recovered")
    prov, sleeps = provider(model_server, fmt)
    assert call(prov, request(stream=False)).content == "recovered" and len(sleeps.delays) == 1
    model_server.script(Fault.status(500), Fault.status(502), Fault.status(500))
    with pytest.raises(ProviderError, match="gave up after 3 attempts") as info:
        call(prov, request())
    err = info.value
    assert err.kind == "http" and err.retryable and err.status == 500 and err.endpoint == prov.endpoint


@pytest.mark.parametrize("fmt", FORMATS)
def test_errors_that_are_not_retried(model_server, fmt):
    model_server.script(Fault.status(401, "bad key"))
    prov, sleeps = provider(model_server, fmt)
    with pytest.raises(ProviderError, match="bad key") as info:
        call(prov, request())
    assert info.value.kind == "auth" and not info.value.retryable and sleeps.delays == []
    model_server.script(Fault.context_overflow())
    with pytest.raises(ProviderError, match="context window") as info:
        call(prov, request(stream=False))
    assert info.value.kind == "context_overflow" and info.value.context_overflow and len(model_server.requests) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_cut_stream_after_text_keeps_the_partial_text(model_server, fmt):
    model_server.script(Fault.cut_stream(after_chunks=3, reply="one two three four five six"))
    prov, sleeps = provider(model_server, fmt)
    deltas: list[str] = []
    with pytest.raises(ProviderError, match="stream broke after") as info:
        call(prov, request(), deltas)
    err = info.value
    assert err.kind == "stream_cut" and err.partial_text == "one two three " == "".join(deltas)
    assert sleeps.delays == [] and len(model_server.requests) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_cut_before_any_text_is_retried(model_server, fmt):
    model_server.script(Fault.cut_stream(after_chunks=0), "whole answer")
    prov, sleeps = provider(model_server, fmt)
    assert call(prov, request()).content == "whole answer" and len(sleeps.delays) == 1
    model_server.script(Fault.cut_stream(after_chunks=0), "whole answer")
    assert call(prov, request(stream=False)).content == "whole answer"


def test_connection_refused_and_missing_key(model_server):
    cfg = ModelConfig(name="openai/x", api_base="http://127.0.0.1:9/v1", api_key="k", timeout=2, max_retries=0)
    with pytest.raises(ProviderError, match="127.0.0.1:9") as info:
        call(HttpProvider(cfg), request())
    assert info.value.kind == "connection" and info.value.retryable
    bare = ModelConfig(name="openai/gpt-4o-mini")
    prov = HttpProvider(bare)
    prov.api_key = None
    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as info:
        call(prov, request())
    assert info.value.kind == "auth" and not info.value.retryable


def _table_price(model: str) -> tuple[float, float]:
    entry = json.loads(_table_text())[model]
    return entry["input_cost_per_token"], entry["output_cost_per_token"]


@pytest.mark.parametrize("fmt,model", [("openai", "gpt-4o-mini"), ("anthropic", "claude-sonnet-4-5")])
def test_cost_from_the_bundled_price_table(model_server, fmt, model):
    if _table_text() is None:
        pytest.skip("litellm's price table is not installed")
    model_server.script(Reply.text("priced", prompt_tokens=1000, completion_tokens=200))
    cfg = model_config(model_server, fmt)
    prov = HttpProvider(cfg.model_copy(update={"name": f"{fmt}/{model}"}))
    resp = call(prov, request())
    inp, out = _table_price(model)
    assert resp.usage.prompt_tokens == 1000 and resp.usage.completion_tokens == 200
    assert resp.usage.cost == pytest.approx(1000 * inp + 200 * out)
    assert price_per_token("no-such-model-anywhere", fmt) is None


def test_configured_prices_win_and_unknown_models_cost_nothing(model_server):
    model_server.script(Reply.text("a", prompt_tokens=10, completion_tokens=5), "b")
    prov, _ = provider(model_server, "openai", input_cost_per_token=0.5, output_cost_per_token=1)
    assert call(prov, request()).usage.cost == pytest.approx(10 * 0.5 + 5 * 1)
    plain, _ = provider(model_server, "openai")
    assert call(plain, request()).usage.cost is None


def test_extra_settings_and_headers_reach_the_server(model_server):
    model_server.script("ok")
    prov, _ = provider(model_server, "openai", headers={"X-Team": "blue"}, top_p=0.5, temperature=0.2)
    call(prov, request())
    sent = model_server.requests[0]
    assert sent.body["top_p"] == 0.5 and sent.body["temperature"] == 0.2 and sent.headers["x-team"] == "blue"
    assert "retry_base_delay" not in sent.body and "headers" not in sent.body


@pytest.mark.parametrize("name,api_base,extra,expected", [
    ("openai/gpt-4o-mini", None, {}, "http"),
    ("anthropic/claude-sonnet-4-5", None, {}, "http"),
    ("scripted", "http://127.0.0.1:1/v1", {}, "http"),
    ("my-model", "http://127.0.0.1:1", {"api_format": "anthropic"}, "http"),
    ("gemini/gemini-2.0-flash", None, {}, "litellm"),
    ("ollama/llama3", "http://127.0.0.1:11434", {}, "litellm"),
    ("gpt-4o-mini", None, {}, "litellm"),
])
def test_auto_selection(name, api_base, extra, expected):
    registry = ProviderRegistry()
    registry.register("litellm", lambda cfg: "litellm")
    clawkit_http.register_providers(register=registry.register)
    cfg = ModelConfig(name=name, api_base=api_base, **extra)
    assert registry.choose(cfg) == expected
    assert registry.create("litellm", cfg) == "litellm"  # an explicit name always wins
    lone = ProviderRegistry()
    clawkit_http.register_providers(register=lone.register)
    if expected == "litellm":
        with pytest.raises(ProviderError, match="no installed model provider serves"):
            lone.create("auto", cfg)


def test_warm_builds_the_pool_off_the_loop_and_the_call_reuses_it(model_server):
    """``warm()`` (awaited by the kernel and the classifier before a budgeted call) leaves the call
    nothing to import or build: the pool it made is the one the request uses."""
    import sys

    model_server.script("warm and ready")
    prov, _ = provider(model_server, "openai")

    async def go():
        await prov.warm()
        pool = prov._client
        assert pool is not None and "anyio._backends._asyncio" in sys.modules
        await prov.warm()  # idempotent on the same loop
        assert prov._client is pool
        out = await prov.complete(request(stream=False))
        assert prov._client is pool
        await prov.aclose()
        return out

    assert asyncio.run(go()).content == "warm and ready"
