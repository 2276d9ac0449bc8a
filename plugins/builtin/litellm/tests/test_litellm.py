"""The litellm provider against the real loopback model server (real HTTP, no internet)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import pytest

import clawkit_litellm
from clawkit.config import ModelConfig
from clawkit.plugins import get_plugin_manager
from clawkit.providers import ProviderError, ProviderRegistry
from clawkit.testing.server import Fault, Reply
from clawkit.types import LlmRequest, Message, ToolDef
from clawkit_litellm import LitellmProvider

# litellm's types make pydantic warn on first use; the plugin filters it, pytest resets filters per test
pytestmark = pytest.mark.filterwarnings("ignore:.*is using the `ReadOnly` qualifier:UserWarning")

WEATHER = ToolDef(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any connection that is not to the loopback server fails the test."""
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and self.family != socket.AF_UNIX:
            raise AssertionError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    def getaddrinfo(host, *args, **kw):
        if host not in (None, "127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"test tried to resolve {host!r}")
        return real_getaddrinfo(host, *args, **kw)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def provider(server, model="openai/gpt-4o-mini", **kw) -> LitellmProvider:
    kw.setdefault("retry_base_delay", 0.001)
    kw.setdefault("timeout", 5)
    return LitellmProvider(ModelConfig(name=model, api_base=server.url, **kw))


def request(text="What is the weather in Paris?", *, model="openai/gpt-4o-mini", **kw) -> LlmRequest:
    return LlmRequest(model=model, messages=[Message(role="user", content=text)], **kw)


def complete(p, req, on_text=None):
    return asyncio.run(p.complete(req, on_text))


# --- answers ---------------------------------------------------------------------------


def test_plain_reply(model_server):
    model_server.script("Hello from the model.")
    resp = complete(provider(model_server), request(stream=False, system="Be brief."))
    assert resp.content == "Hello from the model."
    assert resp.finish_reason == "stop" and resp.tool_calls == []
    body = model_server.requests[0].body
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][1]["content"] == "What is the weather in Paris?"
    assert "stream" not in body or body["stream"] is False
    assert model_server.requests[0].headers["authorization"] == "Bearer sk-clawkit-no-key"


def test_streamed_deltas_arrive_in_order(model_server):
    model_server.script("warm-up", Reply.text("one two three four five", chunk_delay=0.05))
    p = provider(model_server)
    complete(p, request())  # a cold first call can be CPU-bound long enough to read chunks in a batch
    seen: list[tuple[str, float]] = []
    resp = complete(p, request(), lambda d: seen.append((d, time.monotonic())))
    assert [d for d, _ in seen] == ["one ", "two ", "three ", "four ", "five"]
    assert resp.content == "one two three four five"
    assert seen[-1][1] - seen[0][1] >= 0.1  # delivered as they came (0.2 s apart), not all at the end
    body = model_server.requests[1].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_async_on_text_is_awaited(model_server):
    model_server.script("a b c")
    got: list[str] = []

    async def on_text(delta):
        await asyncio.sleep(0)
        got.append(delta)

    complete(provider(model_server), request(), on_text)
    assert "".join(got) == "a b c"


@pytest.mark.parametrize("stream", [True, False])
def test_two_tool_calls_in_one_response(model_server, stream):
    model_server.script(Reply.tool_calls([("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]))
    resp = complete(provider(model_server), request(stream=stream, tools=[WEATHER]))
    assert [(c.name, c.arguments) for c in resp.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Oslo"}),
    ]
    assert len({c.id for c in resp.tool_calls}) == 2 and all(c.argument_error is None for c in resp.tool_calls)
    assert resp.finish_reason == "tool_calls"
    assert model_server.requests[0].tools == [WEATHER.openai_schema()]


@pytest.mark.parametrize("stream", [True, False])
def test_malformed_tool_arguments_are_kept_not_fatal(model_server, stream):
    model_server.script(Reply.malformed_tool_call("get_weather", '{"city": "Par'))
    resp = complete(provider(model_server), request(stream=stream, tools=[WEATHER]))
    (call,) = resp.tool_calls
    assert call.name == "get_weather" and call.arguments == {}
    assert call.raw_arguments == '{"city": "Par'
    assert "not valid JSON" in call.argument_error


def test_usage_and_cost_recorded(model_server):
    model_server.script(Reply.text("four words right here", prompt_tokens=120, completion_tokens=4), "x")
    resp = complete(provider(model_server), request())
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (120, 4, 124)
    assert resp.usage.cost is not None and resp.usage.cost > 0  # gpt-4o-mini is in the local cost map
    unknown = complete(provider(model_server, model="openai/in-house-model"), request(model="openai/in-house-model"))
    assert unknown.usage.total_tokens > 0 and unknown.usage.cost is None


def test_configured_prices_win(model_server):
    model_server.script(Reply.text("ok", prompt_tokens=1000, completion_tokens=10))
    p = provider(model_server, model="openai/in-house", input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    resp = complete(p, request(model="openai/in-house", stream=False))
    assert resp.usage.cost == pytest.approx(1000 * 1e-6 + 10 * 2e-6)


def test_settings_reach_the_model(model_server):
    model_server.script("ok")
    p = provider(model_server, model="openai/in-house", temperature=0.2, max_tokens=64, seed=7, api_key="sk-test")
    complete(p, request(model="openai/in-house", reasoning_effort="high", settings={"top_p": 0.5}))
    req = model_server.requests[0]
    body = req.body
    assert (body["temperature"], body["max_tokens"], body["seed"], body["top_p"]) == (0.2, 64, 7, 0.5)
    assert body["reasoning_effort"] == "high"
    assert "retry_base_delay" not in body and "max_retries" not in body
    assert req.headers["authorization"] == "Bearer sk-test"


def test_reasoning_effort_dropped_for_models_without_it(model_server):
    model_server.script("ok")
    complete(provider(model_server), request(reasoning_effort="high"))  # gpt-4o-mini does not reason
    assert "reasoning_effort" not in model_server.requests[0].body


# --- retries and failures ---------------------------------------------------------------


def test_rate_limit_honours_retry_after(model_server):
    model_server.script(Fault.rate_limit(retry_after=0.3), "after the wait")
    waits: list[float] = []
    p = provider(model_server)
    p.on_retry = lambda notice: waits.append(notice.delay)
    resp = complete(p, request())
    assert resp.content == "after the wait"
    assert len(model_server.requests) == 2
    assert waits and waits[0] >= 0.3
    assert model_server.requests[1].received - model_server.requests[0].received >= 0.3


def test_server_error_then_success(model_server):
    model_server.script(Fault.status(500), "fine now")
    assert complete(provider(model_server), request(stream=False)).content == "fine now"
    assert len(model_server.requests) == 2


def test_503_exhausted_raises_clear_error(model_server):
    model_server.script(*[Fault.status(503)] * 3)
    with pytest.raises(ProviderError) as err:
        complete(provider(model_server, max_retries=2), request())
    msg = str(err.value)
    assert "openai/gpt-4o-mini" in msg and "HTTP 503" in msg and "3 attempts" in msg and "scripted HTTP 503" in msg
    assert model_server.url in msg and err.value.endpoint == model_server.url
    assert err.value.status == 503 and err.value.retryable and not err.value.context_overflow
    assert err.value.kind == "http" and err.value.attempts == 3
    assert len(model_server.requests) == 3


@pytest.mark.parametrize("code,kind", [(401, "auth"), (403, "auth"), (404, "not_found"), (400, "bad_request"),
                                       (422, "bad_request")])
def test_client_errors_are_not_retried(model_server, code, kind):
    model_server.script(Fault.status(code, "invalid api key"), "never")
    with pytest.raises(ProviderError, match=f"{code}.*invalid api key.*not retryable") as err:
        complete(provider(model_server), request())
    assert err.value.kind == kind and err.value.attempts == 1
    assert len(model_server.requests) == 1


@pytest.mark.parametrize("code", [408, 409, 429, 500, 502])
def test_retryable_statuses(model_server, code):
    model_server.script(Fault.status(code), "ok")
    assert complete(provider(model_server), request()).content == "ok"
    assert len(model_server.requests) == 2


def test_timeout_is_retried_then_reported(model_server):
    model_server.script(Fault.delay(10), Fault.delay(10))  # abandoned at stop
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"timed out after 0.5s.*\(gave up after 2 attempts\)"):
        complete(provider(model_server, timeout=0.5, max_retries=1), request(stream=False))
    assert len(model_server.requests) == 2
    assert time.monotonic() - started < 6  # two 0.5 s timeouts and a backoff, not a 10 s delay


def test_timeout_then_success(model_server):
    model_server.script(Fault.delay(10), "on time")
    assert complete(provider(model_server, timeout=0.5), request()).content == "on time"


def test_stream_cut_after_text_is_not_retried(model_server):
    model_server.script(Fault.cut_stream(after_chunks=2, reply="one two three four"), "never sent")
    seen: list[str] = []
    with pytest.raises(ProviderError, match="stream broke after 8 characters") as err:
        complete(provider(model_server), request(), seen.append)
    assert seen == ["one ", "two "]
    assert err.value.kind == "stream_cut" and err.value.partial_text == "one two " and not err.value.retryable
    assert len(model_server.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
def test_cut_before_any_text_is_retried(model_server, stream):
    model_server.script(Fault.cut_stream(after_chunks=0), "recovered")
    seen: list[str] = []
    resp = complete(provider(model_server), request(stream=stream), seen.append)
    assert resp.content == "recovered" and "".join(seen) in ("recovered", "")
    assert len(model_server.requests) == 2


def test_context_overflow(model_server):
    model_server.script(Fault.context_overflow(), "never")
    with pytest.raises(ProviderError) as err:
        complete(provider(model_server), request())
    assert err.value.context_overflow and err.value.status == 400
    assert "context window" in str(err.value)
    assert len(model_server.requests) == 1


def _free_port() -> int:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_is_named_with_the_endpoint():
    base = f"http://127.0.0.1:{_free_port()}/v1"
    p = LitellmProvider(ModelConfig(name="openai/gpt-4o-mini", api_base=base, max_retries=1, retry_base_delay=0.001))
    notices = []
    p.on_retry = notices.append
    with pytest.raises(ProviderError, match="connection refused.*2 attempts") as err:
        complete(p, request())
    assert err.value.kind == "connection" and err.value.endpoint == base and base in str(err.value)
    assert err.value.status is None and "HTTP 500" not in str(err.value)
    assert [n.error.kind for n in notices] == ["connection"]


def test_missing_api_key_fails_at_once(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    p = LitellmProvider(ModelConfig(name="openai/gpt-4o-mini", max_retries=5))
    started = time.monotonic()
    with pytest.raises(ProviderError, match="no API key") as err:
        complete(p, request())
    assert err.value.kind == "auth" and err.value.attempts == 1 and not err.value.retryable
    assert time.monotonic() - started < 5  # no backoff: five retries would wait 15 s


def test_on_text_errors_propagate_unchanged(model_server):
    model_server.script("some text", "never")

    def boom(delta):
        raise KeyError("display failed")

    with pytest.raises(KeyError, match="display failed"):
        complete(provider(model_server), request(), boom)
    assert len(model_server.requests) == 1


# --- plugin wiring -----------------------------------------------------------------------


def test_registered_through_the_hook(model_server):
    # narrow: litellm's own registration hook, alone in the provider registry
    pm = get_plugin_manager(extra=[clawkit_litellm], load_entry_points=False)
    registry = ProviderRegistry()
    pm.hook.register_providers(register=registry.register)
    p = registry.create("litellm", ModelConfig(name="openai/gpt-4o-mini", api_base=model_server.url))
    model_server.script("via the registry")
    assert complete(p, request()).content == "via the registry"


def test_anthropic_base_loses_v1():
    p = LitellmProvider(ModelConfig(name="anthropic/claude-sonnet-4-5", api_base="http://127.0.0.1:9/v1/"))
    params = p.build_params(request(model="anthropic/claude-sonnet-4-5"))
    assert params["api_base"] == "http://127.0.0.1:9"
    assert params["max_retries"] == 0 and params["num_retries"] == 0


def test_importing_the_plugin_does_not_import_litellm():
    code = (
        "import sys, clawkit_litellm\n"
        "from clawkit.config import ModelConfig\n"
        "clawkit_litellm.LitellmProvider(ModelConfig(name='openai/x'))\n"
        "print(sorted(m for m in ('litellm', 'tiktoken', 'openai') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the Anthropic format, over the server's /v1/messages --------------------------------

CLAUDE = "anthropic/claude-sonnet-4-5"


def test_anthropic_streamed_text_and_tool_calls(model_server):
    model_server.script(
        "Hello from Claude.",
        Reply.tool_calls([("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})], text="Checking."),
    )
    p = provider(model_server, model=CLAUDE)  # api_base ends in /v1: the provider strips it
    seen: list[str] = []
    resp = complete(p, request(model=CLAUDE, system="Be brief."), seen.append)
    assert resp.content == "Hello from Claude." and "".join(seen) == "Hello from Claude."
    assert resp.usage.prompt_tokens > 0 and resp.usage.cost is not None
    req = model_server.requests[0]
    assert req.path == "/v1/messages" and req.headers["x-api-key"] == "sk-clawkit-no-key"
    assert req.body["system"][0]["text"] == "Be brief."
    resp = complete(p, request(model=CLAUDE, tools=[WEATHER]))
    assert resp.content == "Checking."
    assert [c.arguments for c in resp.tool_calls] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert model_server.requests[1].body["tools"][0]["name"] == "get_weather"


def test_anthropic_rate_limit_then_success_and_overflow(model_server):
    model_server.script(Fault.rate_limit(retry_after=0.2), "fine", Fault.context_overflow())
    p = LitellmProvider(ModelConfig(name=CLAUDE, api_base=model_server.base_url, retry_base_delay=0.001))
    started = time.monotonic()
    assert complete(p, request(model=CLAUDE, stream=False)).content == "fine"
    assert time.monotonic() - started >= 0.2
    with pytest.raises(ProviderError) as err:
        complete(p, request(model=CLAUDE))
    assert err.value.context_overflow
