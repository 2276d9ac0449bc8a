"""OpenAI compatibility through the official ``openai`` client: every field works or is refused
with a JSON 400 saying why; history with tool calls reaches the model intact; text parts keep
their separation; ``models.retrieve``; every error (unknown routes too) in OpenAI's shape;
``--dev`` takes the bearer the SDKs always send."""

from __future__ import annotations

import httpx
import openai
import pytest

from clawkit_serve.testing import make_key, serve, write_agent


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compat")
    helper = write_agent(tmp, model, "helper", tools=["list_dir"])
    capped = write_agent(tmp, model, "capped", tools=[])
    data = capped.read_text().replace('"max_retries": 0', '"max_retries": 0, "max_tokens": 20')
    capped.write_text(data)
    db = tmp / "server.db"
    key = make_key(db, "compat")
    served = serve([helper, capped], db)
    try:
        yield served, key
    finally:
        served.stop()


def client(site) -> openai.OpenAI:
    served, key = site
    return openai.OpenAI(base_url=served.url + "/v1", api_key=key, max_retries=0, timeout=60)


def test_models_retrieve_and_an_unknown_model(site):
    c = client(site)
    assert c.models.retrieve("helper").id == "helper"
    with pytest.raises(openai.NotFoundError) as caught:
        c.models.retrieve("nobody")
    assert caught.value.body["code"] == "model_not_found"


def test_every_error_is_json_in_openais_shape(site):
    served, key = site
    auth = {"Authorization": f"Bearer {key}"}
    for method, path, status in (("GET", "/v1/nothing", 404), ("POST", "/v1/models", 405), ("GET", "/v1/chat/completions", 405),
                                 ("GET", "/nowhere", 404)):
        r = httpx.request(method, served.url + path, headers=auth)
        assert r.status_code == status and r.headers["content-type"] == "application/json", (path, r.text)
        error = r.json()["error"]
        assert error["message"] and error["type"] and error["code"], error


def test_history_with_tool_calls_and_tool_messages_reaches_the_model_intact(site, model):
    history = [
        {"role": "system", "content": "ignored: the agent has its instructions"},
        {"role": "user", "content": "what files are there?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_abc", "type": "function", "function": {"name": "list_dir", "arguments": '{"path": "."}'}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "a.txt\nb.txt"},
        {"role": "assistant", "content": "Two files: a.txt and b.txt."},
        {"role": "user", "content": "say: noted"},
    ]
    reply = client(site).chat.completions.create(model="helper", messages=history)
    assert reply.choices[0].message.content == "noted"
    sent = [m for m in model.requests[-1].messages if m["role"] != "system"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]  # not two users in a row
    call = sent[1]["tool_calls"][0]
    assert call["id"] == "call_abc" and call["function"]["name"] == "list_dir"
    assert call["function"]["arguments"] in ('{"path": "."}', '{"path":"."}')
    assert sent[2]["tool_call_id"] == "call_abc" and "a.txt\nb.txt" in str(sent[2]["content"])
    assert sent[3]["content"] == "Two files: a.txt and b.txt."


def test_text_parts_are_joined_with_a_newline(site):
    parts = [{"type": "text", "text": "say: first line"}, {"type": "text", "text": "second line"}]
    reply = client(site).chat.completions.create(model="helper", messages=[{"role": "user", "content": parts}])
    assert reply.choices[0].message.content == "first line\nsecond line"


def test_sampling_fields_reach_the_model_within_the_agents_limits(site, model):
    c = client(site)
    c.chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: {}"}], temperature=0.3,
                              max_tokens=50, top_p=0.9, stop=["END"], seed=7, response_format={"type": "json_object"})
    body = model.requests[-1].body
    assert body["temperature"] == 0.3 and body["max_tokens"] == 50 and body["top_p"] == 0.9 and body["seed"] == 7
    assert body["response_format"] == {"type": "json_object"} and body["stop"] == ["END"]
    c.chat.completions.create(model="capped", messages=[{"role": "user", "content": "say: short"}], max_completion_tokens=500)
    assert model.requests[-1].body["max_tokens"] == 20  # the agent's own cap wins
    c.chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: plain"}])
    assert "temperature" not in model.requests[-1].body  # one request's settings stay with its turn


@pytest.mark.parametrize("extra, code, words", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}, "unsupported_parameter", "tools"),
    ({"n": 2}, "unsupported_parameter", "'n' must be 1"),
    ({"logprobs": True}, "unsupported_parameter", "logprobs"),
    ({"temperature": 7}, "invalid_parameter", "temperature"),
    ({"response_format": {"type": "xml"}}, "invalid_parameter", "response_format"),
    ({"extra_body": {"frobnicate": 1}}, "unknown_parameter", "frobnicate"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]},
     "unsupported_content", "input_audio"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]},
     "bad_attachment", "data: or https://"),
    ({"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}, {"role": "user", "content": "hi"}]},
     "bad_messages", "tool_call_id"),
])
def test_fields_the_agent_cannot_honour_are_refused_with_a_json_400(site, model, extra, code, words):
    calls = len(model.requests)
    kwargs = {"model": "helper", "messages": [{"role": "user", "content": "say: hi"}], **extra}
    with pytest.raises(openai.BadRequestError) as caught:
        client(site).chat.completions.create(**kwargs)
    assert caught.value.body["code"] == code and words in caught.value.body["message"], caught.value.body
    assert len(model.requests) == calls  # refused before any turn


def test_dev_mode_accepts_the_bearer_the_sdk_always_sends(model, tmp_path):
    agent = write_agent(tmp_path, model, "helper", tools=[])
    served = serve([agent], tmp_path / "state.db", dev=True)
    try:
        c = openai.OpenAI(base_url=served.url + "/v1", api_key="anything", max_retries=0, timeout=60)
        assert c.chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: hi"}]).choices[0].message.content == "hi"
        assert [m.id for m in c.models.list()] == ["helper"]
    finally:
        served.stop()
