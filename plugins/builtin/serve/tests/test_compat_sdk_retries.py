"""The official ``openai`` SDK with its DEFAULT retries (2) never makes a second turn or a second
side effect: a client timeout shorter than an approval wait, an upstream 502, a retry after the
turn ended, an ``Idempotency-Key``. Counted in the agent's state database (sessions, runs, tool
steps) and on disk (a shell command appending to a file)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from clawkit.testing.server import Fault, ModelServer, Reply
from clawkit_serve.testing import make_key, respond, serve, write_agent


def _wait(fn, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = fn()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def counts(served, agent: str = "helper") -> dict[str, int]:
    """Sessions, runs (turns) and tool executions the agent's state database holds."""
    store = served.server_obj.runner.agents[agent].store
    sessions = [r["id"] for r in store.list(limit=1000) if r["agent"] == agent]
    runs = [run for sid in sessions for run in store.runs(sid)]
    tools = [s for run in runs for s in store.steps(run["id"]) if s["kind"] == "tool"]
    user = [m for sid in sessions for m in store.messages(sid) if m.role == "user"]
    return {"sessions": len(sessions), "runs": len(runs), "tools": len(tools), "user_messages": len(user)}


@pytest.fixture
def site(model, tmp_path):
    agent = write_agent(tmp_path, model, "helper", tools=["shell_exec", "list_dir"])
    db = tmp_path / "server.db"
    key = make_key(db, "sdk")
    served = serve([agent], db)
    try:
        yield served, key, tmp_path / "ws-helper"
    finally:
        served.stop()


def test_a_client_timeout_shorter_than_the_approval_wait_leaves_one_session_and_one_approval(site):
    served, key, ws = site
    client = openai.OpenAI(base_url=served.url + "/v1", api_key=key, timeout=0.5)  # default max_retries: 2
    assert client.max_retries == 2
    body = {"model": "helper", "messages": [{"role": "user", "content": "run: echo hit >> hits.txt"}]}
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(**body)  # three attempts, each cut by the client
    broker = served.server_obj.broker
    pending = broker.list("pending")
    assert len(pending) == 1, pending  # not three sessions with three pending shell_exec approvals
    assert counts(served)["sessions"] == 1 and counts(served)["user_messages"] == 1
    auth = {"Authorization": f"Bearer {key}"}
    r = httpx.post(f"{served.url}/api/approvals/{pending[0]['id']}", json={"decision": "approve"}, headers=auth)
    assert r.status_code == 200, r.text
    sid = pending[0]["session_id"]
    _wait(lambda: not served.server_obj.runner.busy(sid) and counts(served)["tools"] == 1)
    # a late retry of the same request gets the finished turn's answer, not a new turn
    again = httpx.post(f"{served.url}/v1/chat/completions", json=body, headers={**auth, "x-stainless-retry-count": "2"})
    assert again.status_code == 200 and again.headers["x-clawkit-replayed"] == "true", again.text
    assert again.json()["session_id"] == sid and again.json()["choices"][0]["message"]["content"].startswith("done:")
    assert counts(served) == {"sessions": 1, "runs": 1, "tools": 1, "user_messages": 1}
    assert (ws / "hits.txt").read_text().splitlines() == ["hit"]  # the side effect happened once
    # the same message sent again on purpose (a first attempt) is a new turn, as it should be
    client.with_options(timeout=60).chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: x"}])
    client.with_options(timeout=60).chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: x"}])
    assert counts(served)["runs"] == 3


def test_an_upstream_502_is_one_turn_and_one_tool_execution(tmp_path):
    def upstream(request):
        if request.messages and request.messages[-1].get("role") == "tool":
            return Fault.status(502, "bad gateway upstream")
        return Reply.tool_calls([("list_dir", {"path": "."})])

    with ModelServer() as model:
        model.script(upstream)
        agent = write_agent(tmp_path, model, "helper", tools=["list_dir"])
        db = tmp_path / "server.db"
        key = make_key(db, "sdk")
        served = serve([agent], db)
        try:
            client = openai.OpenAI(base_url=served.url + "/v1", api_key=key)  # default retries and timeout
            body = {"model": "helper", "messages": [{"role": "user", "content": "list the files"}]}
            with pytest.raises(openai.APIStatusError) as caught:
                client.chat.completions.create(**body)
            assert caught.value.status_code == 502 and caught.value.body["code"] == "model_error"
            assert counts(served) == {"sessions": 1, "runs": 1, "tools": 1, "user_messages": 1}
            assert len(model.requests) == 2  # one tool round, one failed call: not 3 turns of them
            # a client that retries anyway (it ignores x-should-retry) gets the same 502 replayed
            retry = httpx.post(f"{served.url}/v1/chat/completions", json=body,
                               headers={"Authorization": f"Bearer {key}", "x-stainless-retry-count": "1"})
            assert retry.status_code == 502 and retry.headers["x-clawkit-replayed"] == "true"
            assert retry.json()["error"]["code"] == "model_error"
            assert counts(served)["runs"] == 1 and len(model.requests) == 2
        finally:
            served.stop()


def test_an_idempotency_key_answers_a_repeat_from_the_first_turn(site, model):
    served, key, _ = site
    client = openai.OpenAI(base_url=served.url + "/v1", api_key=key)
    body = {"model": "helper", "messages": [{"role": "user", "content": "say: once only"}]}
    first = client.chat.completions.create(**body, extra_headers={"Idempotency-Key": "order-42"})
    calls = len(model.requests)
    second = client.chat.completions.with_raw_response.create(**body, extra_headers={"Idempotency-Key": "order-42"})
    assert second.headers["x-clawkit-replayed"] == "true"
    assert second.parse().session_id == first.session_id and second.parse().id == first.id
    assert len(model.requests) == calls and counts(served)["runs"] == 1
    with pytest.raises(openai.BadRequestError) as caught:  # the same key for another request is a client bug
        client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: other"}],
                                       extra_headers={"Idempotency-Key": "order-42"})
    assert caught.value.body["code"] == "idempotency_key_reused"


def test_a_retry_while_the_turn_runs_waits_for_it_instead_of_a_409(site):
    """A retry with the session header (the turn still waiting for approval) attaches to it."""
    served, key, ws = site
    auth = {"Authorization": f"Bearer {key}"}
    sid = httpx.post(served.url + "/api/sessions", json={"agent": "helper"}, headers=auth).json()["session_id"]
    body = {"model": "helper", "messages": [{"role": "user", "content": "run: echo once >> once.txt"}]}
    headers = {**auth, "X-Clawkit-Session": sid}
    out = {}

    def post(name, extra):
        out[name] = httpx.post(f"{served.url}/v1/chat/completions", json=body, headers={**headers, **extra}, timeout=60)

    first = threading.Thread(target=post, args=("first", {}))
    first.start()
    row = _wait(lambda: (served.server_obj.broker.list("pending") or [None])[0])
    retry = threading.Thread(target=post, args=("retry", {"x-stainless-retry-count": "1"}))
    retry.start()
    _wait(lambda: served.server_obj.replays._by_print and next(iter(served.server_obj.replays._by_print.values())).replays)
    httpx.post(f"{served.url}/api/approvals/{row['id']}", json={"decision": "approve"}, headers=auth)
    first.join(60)
    retry.join(60)
    assert out["first"].status_code == out["retry"].status_code == 200, (out["first"].text, out["retry"].text)
    assert out["first"].json()["choices"] == out["retry"].json()["choices"]
    assert (ws / "once.txt").read_text().splitlines() == ["once"]
    assert counts(served)["runs"] == 1


def test_a_streamed_request_repeated_with_its_idempotency_key_streams_the_first_reply(site, model):
    served, key, _ = site
    client = openai.OpenAI(base_url=served.url + "/v1", api_key=key)
    body = {"model": "helper", "messages": [{"role": "user", "content": "say: one two three"}], "stream": True,
            "extra_headers": {"Idempotency-Key": "stream-1"}}
    texts, calls = [], len(model.requests)
    for _ in range(2):
        texts.append("".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**body) if c.choices))
    assert texts == ["one two three", "one two three"]
    assert counts(served)["runs"] == 1 and len(model.requests) == calls + 1
