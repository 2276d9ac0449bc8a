"""The loopback model server, spoken to with plain HTTP (no SDK in the way)."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from clawkit.testing.server import Fault, ModelServer, Reply


def post(server, body, path="/v1/chat/completions", timeout=5.0):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", "X-Test": "yes"})
    resp = conn.getresponse()
    return conn, resp


def chat(server, stream=False, **extra):
    body = {"model": "m", "messages": [{"role": "user", "content": "hello there"}], "stream": stream, **extra}
    conn, resp = post(server, body)
    data = resp.read()
    conn.close()
    return resp, data


def sse_events(data: bytes) -> list:
    events = [line[6:] for line in data.decode().splitlines() if line.startswith("data: ")]
    return [e if e == "[DONE]" else json.loads(e) for e in events]


def test_url_and_plain_reply_and_recording(model_server):
    assert model_server.url == f"http://127.0.0.1:{model_server.port}/v1"
    model_server.script("Hello, world.")
    resp, data = chat(model_server)
    body = json.loads(data)
    assert resp.status == 200
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello, world."}
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] == 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    (req,) = model_server.requests
    assert req.path == "/v1/chat/completions" and req.headers["x-test"] == "yes"
    assert req.messages == [{"role": "user", "content": "hello there"}] and req.body["model"] == "m"


def test_streaming_with_usage_and_tool_calls(model_server):
    model_server.script(Reply.tool_calls([("a", {"x": 1}), ("b", {"y": "z"})], text="Let me check."))
    resp, data = chat(model_server, stream=True, stream_options={"include_usage": True})
    assert resp.getheader("Content-Type") == "text/event-stream"
    events = sse_events(data)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Let me check."
    calls: dict[int, dict] = {}
    for c in chunks:
        for frag in (c["choices"][0]["delta"].get("tool_calls") or []) if c["choices"] else []:
            call = calls.setdefault(frag["index"], {"name": "", "args": ""})
            call["name"] += frag.get("function", {}).get("name") or ""
            call["args"] += frag.get("function", {}).get("arguments") or ""
    assert {i: (c["name"], json.loads(c["args"])) for i, c in calls.items()} == {0: ("a", {"x": 1}), 1: ("b", {"y": "z"})}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_stream_without_usage_request_has_no_usage_chunk(model_server):
    model_server.script("hi")
    _, data = chat(model_server, stream=True)
    assert all("usage" not in e for e in sse_events(data)[:-1])


def test_script_function_and_shorter_path(model_server):
    model_server.script(lambda req: Reply.text(f"you said {req.messages[-1]['content']}"))
    conn, resp = post(model_server, {"model": "m", "messages": [{"role": "user", "content": "ping"}]},
                      path="/chat/completions")
    assert json.loads(resp.read())["choices"][0]["message"]["content"] == "you said ping"
    conn.close()


def test_exhausted_script_says_so(model_server):
    resp, data = chat(model_server)
    assert resp.status == 400 and "script exhausted" in json.loads(data)["error"]["message"]


def test_rate_limit_and_status_faults(model_server):
    model_server.script(Fault.rate_limit(retry_after=1.5), Fault.status(503), Fault.context_overflow())
    resp, data = chat(model_server)
    assert resp.status == 429 and resp.getheader("Retry-After") == "1.5"
    assert json.loads(data)["error"]["code"] == "rate_limit_exceeded"
    resp, _ = chat(model_server)
    assert resp.status == 503
    resp, data = chat(model_server)
    assert resp.status == 400 and json.loads(data)["error"]["code"] == "context_length_exceeded"


def test_delay_outlasts_a_client_timeout(model_server):
    model_server.script(Fault.delay(10.0, then="late"), "prompt")  # abandoned at stop
    with pytest.raises(TimeoutError):
        chat_timeout = post(model_server, {"model": "m", "messages": []}, timeout=0.2)
        chat_timeout[1].read()
    started = time.monotonic()
    _, data = chat(model_server)  # the server still serves others while one answer waits
    assert json.loads(data)["choices"][0]["message"]["content"] == "prompt"
    assert time.monotonic() - started < 5  # not the 10 s of the delayed answer


def test_cut_stream_breaks_the_body(model_server):
    model_server.script(Fault.cut_stream(after_chunks=2, reply="one two three four"), Fault.cut_stream(1))
    conn, resp = post(model_server, {"model": "m", "messages": [], "stream": True})
    with pytest.raises(http.client.IncompleteRead) as err:
        resp.read()
    partial = sse_events(err.value.partial)
    assert [e["choices"][0]["delta"].get("content") for e in partial] == ["", "one ", "two "]
    conn.close()
    conn, resp = post(model_server, {"model": "m", "messages": []})
    with pytest.raises(http.client.IncompleteRead):
        resp.read()
    conn.close()


def test_malformed_tool_call_is_sent_verbatim(model_server):
    model_server.script(Reply.malformed_tool_call("f", "{not json"))
    _, data = chat(model_server)
    call = json.loads(data)["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "f", "arguments": "{not json"}


def test_reset_and_context_manager():
    with ModelServer() as server:
        server.script("a", "b")
        chat(server)
        assert server.pending == 1 and len(server.requests) == 1
        server.reset()
        assert server.pending == 0 and server.requests == []
    with pytest.raises(OSError):
        chat(server)


def test_anthropic_messages_dialect(model_server):
    model_server.script(Reply.tool_calls([("f", {"a": 1})], text="ok"), "streamed", Fault.rate_limit(2))
    conn, resp = post(model_server, {"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]},
                      path="/v1/messages")
    body = json.loads(resp.read())
    conn.close()
    assert body["type"] == "message" and body["stop_reason"] == "tool_use"
    assert body["content"] == [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "call_0_f", "name": "f",
                                                                "input": {"a": 1}}]
    assert body["usage"]["input_tokens"] > 0
    conn, resp = post(model_server, {"model": "claude", "stream": True, "messages": []}, path="/v1/messages")
    data = resp.read().decode()
    conn.close()
    names = [line[7:] for line in data.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert "text_delta" in data
    conn, resp = post(model_server, {"model": "claude", "messages": []}, path="/v1/messages")
    err = json.loads(resp.read())
    conn.close()
    assert resp.status == 429 and err["error"]["type"] == "rate_limit_error" and resp.getheader("Retry-After") == "2"
