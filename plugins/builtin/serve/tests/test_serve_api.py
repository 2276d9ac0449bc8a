"""The server through real HTTP: the official openai client, the native API, auth and limits."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import openai
import pytest

from clawkit_serve.testing import make_key, serve, write_agent


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    helper = write_agent(tmp, model, "helper", tools=["shell_exec", "list_dir"])
    other = write_agent(tmp, model, "other", tools=[])
    db = tmp / "server.db"
    keys = {
        "full": make_key(db, "full"),
        "other": make_key(db, "other-only", agents=["other"]),
        "read": make_key(db, "reader", role="read"),
        "approver": make_key(db, "approver", role="approver"),
        "slow": make_key(db, "slow", rate_per_minute=3),
    }
    served = serve([helper, other], db, max_body=64_000)
    try:
        yield served, keys, tmp
    finally:
        served.stop()


def client(site, key="full", **kw) -> openai.OpenAI:
    served, keys, _ = site
    return openai.OpenAI(base_url=served.url + "/v1", api_key=keys[key], max_retries=0, timeout=60, **kw)


def api(site, key="full") -> httpx.Client:
    served, keys, _ = site
    return httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {keys[key]}"}, timeout=60)


def test_openai_client_plain_reply_names_its_session(site):
    resp = client(site).chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: hello there"}])
    assert resp.choices[0].message.content == "hello there"
    assert resp.model == "helper"
    assert resp.session_id.startswith("ses")  # an extra field the client keeps
    assert resp.usage.total_tokens > 0


def test_openai_client_streams_the_reply(site):
    stream = client(site).chat.completions.create(
        model="helper", messages=[{"role": "user", "content": "say: one two three four"}], stream=True,
        stream_options={"include_usage": True})
    deltas, usage = [], None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            deltas.append(chunk.choices[0].delta.content)
        if chunk.usage:
            usage = chunk.usage
    assert len(deltas) >= 2, deltas  # really streamed, not one block
    assert "".join(deltas) == "one two three four"
    assert usage is not None and usage.completion_tokens > 0


def test_a_session_continues_through_the_header_and_the_body_field(site, model):
    c = client(site)
    first = c.chat.completions.with_raw_response.create(model="helper", messages=[{"role": "user", "content": "say: remember kiwi"}])
    sid = first.headers["x-clawkit-session"]
    c.chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: again"}], extra_headers={"X-Clawkit-Session": sid})
    seen = [m.get("content") for m in model.requests[-1].messages]
    assert "say: remember kiwi" in seen and "remember kiwi" in seen  # the agent kept the first exchange
    third = c.chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: third"}], extra_body={"session_id": sid})
    assert third.session_id == sid
    transcript = api(site).get(f"/api/sessions/{sid}").json()
    assert [m["content"] for m in transcript["messages"] if m["role"] == "user"] == ["say: remember kiwi", "say: again", "say: third"]


def test_a_stateless_client_history_seeds_a_new_session(site, model):
    resp = client(site).chat.completions.create(model="helper", messages=[
        {"role": "system", "content": "ignored: the agent has its own instructions"},
        {"role": "user", "content": "my name is Ada"}, {"role": "assistant", "content": "Hello Ada"},
        {"role": "user", "content": "say: ok"}])
    sent = [m.get("content") for m in model.requests[-1].messages]
    assert "my name is Ada" in sent and "Hello Ada" in sent and "ignored" not in " ".join(map(str, sent))
    assert resp.choices[0].message.content == "ok"


def test_a_tool_using_turn_runs_the_tool_inside(site, model):
    served, _, tmp = site
    (tmp / "ws-helper" / "notes.txt").write_text("x")
    resp = client(site).chat.completions.create(model="helper", messages=[{"role": "user", "content": 'call: list_dir {"path": "."}'}])
    assert resp.choices[0].message.content.startswith("done: ") and "notes.txt" in resp.choices[0].message.content
    assert resp.choices[0].message.tool_calls is None  # the client sees the reply, not the calls
    transcript = api(site).get(f"/api/sessions/{resp.session_id}").json()
    assert [m["tool_calls"][0]["name"] for m in transcript["messages"] if m.get("tool_calls")] == ["list_dir"]


def test_401_without_or_with_a_wrong_key(site):
    served, _, _ = site
    r = httpx.post(served.url + "/v1/chat/completions", json={"model": "helper", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=served.url + "/v1", api_key="ck_nope_nope", max_retries=0).models.list()
    assert httpx.get(served.url + "/api/sessions").status_code == 401


def test_403_for_a_key_scoped_elsewhere_or_without_the_role(site):
    with pytest.raises(openai.PermissionDeniedError) as err:
        client(site, "other").chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: x"}])
    assert "not scoped to agent 'helper'" in str(err.value)
    assert [m.id for m in client(site, "other").models.list().data] == ["other"]
    with pytest.raises(openai.PermissionDeniedError):
        client(site, "read").chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: x"}])
    assert api(site, "read").get("/api/sessions").status_code == 200
    sid = client(site).chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: mine"}]).session_id
    assert api(site, "other").get(f"/api/sessions/{sid}").status_code == 403


def test_413_on_an_oversized_request(site):
    with pytest.raises(openai.APIStatusError) as err:
        client(site).chat.completions.create(model="helper", messages=[{"role": "user", "content": "say: " + "x" * 100_000}])
    assert err.value.status_code == 413
    served, keys, _ = site

    def chunked():  # no Content-Length: the limit is counted as the body streams
        for _ in range(100):
            yield b"x" * 1000

    r = httpx.post(served.url + "/v1/chat/completions", content=chunked(), headers={"Authorization": f"Bearer {keys['full']}"})
    assert r.status_code == 413


def test_429_past_the_key_rate_limit(site):
    c = client(site, "slow")
    for _ in range(3):
        c.models.list()
    with pytest.raises(openai.RateLimitError) as err:
        c.models.list()
    assert int(err.value.response.headers["retry-after"]) >= 1
    client(site).models.list()  # other keys are unaffected


def _pending(site, sid, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = api(site).get("/api/approvals", params={"session": sid}).json()["approvals"]
        if rows:
            return rows[0]
        time.sleep(0.05)
    raise AssertionError("no pending approval appeared")


def _turn_in_thread(site, text, key="full"):
    served, keys, _ = site
    sid = api(site, key).post("/api/sessions", json={"agent": "helper"}).json()["session_id"]
    out = {}

    def go():
        out["response"] = api(site, key).post(f"/api/sessions/{sid}/messages", json={"message": text})

    t = threading.Thread(target=go)
    t.start()
    return sid, t, out


def test_an_approval_answered_through_the_api_finishes_the_turn(site):
    sid, t, out = _turn_in_thread(site, "run: echo approved-run")
    row = _pending(site, sid)
    assert row["tool"] == "shell_exec" and row["arguments"] == {"command": "echo approved-run"} and row["risk"] == "unsafe"
    busy = client(site).chat.completions.with_raw_response
    with pytest.raises(openai.ConflictError):  # one turn per session: 409
        busy.create(model="helper", messages=[{"role": "user", "content": "say: x"}], extra_headers={"X-Clawkit-Session": sid})
    assert api(site, "read").post(f"/api/approvals/{row['id']}", json={"decision": "approve"}).status_code == 403
    assert api(site).post(f"/api/approvals/{row['id']}", json={"decision": "approve", "call_hash": "0" * 64}).status_code == 409
    r = api(site, "approver").post(f"/api/approvals/{row['id']}", json={"decision": "approve", "call_hash": row["call_hash"]})
    assert r.status_code == 200 and r.json()["status"] == "approved"
    t.join(60)
    reply = out["response"].json()["reply"]
    assert reply.startswith("done: ") and "exit code 0\napproved-run" in reply  # shell output arrives wrapped as untrusted data
    assert api(site).post(f"/api/approvals/{row['id']}", json={"decision": "deny"}).status_code == 409  # answered once


def test_a_denied_approval_tells_the_model(site):
    sid, t, out = _turn_in_thread(site, "run: echo never")
    row = _pending(site, sid)
    api(site).post(f"/api/approvals/{row['id']}", json={"decision": "deny", "note": "not today"})
    t.join(60)
    reply = out["response"].json()["reply"]
    assert reply.startswith("done: Error: not approved") and "never" not in reply.split("(")[0]


def test_the_audit_ledger_is_read_and_verified(site):
    # its own approved call: under pytest-xdist another test's may have run in another process
    sid, t, out = _turn_in_thread(site, "run: echo audited-run")
    row = _pending(site, sid)
    api(site, "approver").post(f"/api/approvals/{row['id']}", json={"decision": "approve", "call_hash": row["call_hash"]})
    t.join(60)
    assert "audited-run" in out["response"].json()["reply"]
    listed = api(site, "read").get("/api/audit", params={"agent": "helper", "tool": "shell_exec"}).json()
    assert any(r.get("approval_result") == "approved" and r.get("session_id") == sid for r in listed["records"]), listed
    verified = api(site, "read").get("/api/audit/verify", params={"agent": "helper"}).json()
    assert verified["ok"] is True and verified["records"] >= len(listed["records"])


def test_native_stream_sends_deltas_then_the_result(site):
    served, keys, _ = site
    sid = api(site).post("/api/sessions", json={"agent": "helper"}).json()["session_id"]
    with httpx.stream("POST", f"{served.url}/api/sessions/{sid}/messages", json={"message": "say: a b c", "stream": True},
                      headers={"Authorization": f"Bearer {keys['full']}"}, timeout=60) as r:
        kinds = [line[7:] for line in r.iter_lines() if line.startswith("event: ")]
    assert "delta" in kinds and kinds[-1] == "result" and "turn.end" in kinds


def test_fifty_concurrent_sessions_are_never_mixed_up(site):
    served, keys, _ = site

    async def main():
        c = openai.AsyncOpenAI(base_url=served.url + "/v1", api_key=keys["full"], max_retries=0, timeout=120)

        async def one(i):
            r = await c.chat.completions.create(model="helper", messages=[{"role": "user", "content": f"say: token-{i}"}])
            return i, r.session_id, r.choices[0].message.content

        return await asyncio.gather(*(one(i) for i in range(50)))

    results = asyncio.run(main())
    assert sorted(reply for _, _, reply in results) == sorted(f"token-{i}" for i in range(50))
    assert all(reply == f"token-{i}" for i, _, reply in results)
    assert len({sid for _, sid, _ in results}) == 50
    a = api(site)
    for i, sid, _ in results[::7]:
        msgs = a.get(f"/api/sessions/{sid}").json()["messages"]
        assert [m["content"] for m in msgs] == [f"say: token-{i}", f"token-{i}"]
