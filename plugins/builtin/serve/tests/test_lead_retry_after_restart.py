"""A client's retry that reaches a *restarted* server is still recognised (issue 25, goal 1: "whatever
fails"): the requests that started turns are kept in the server's state database, so a retry after
a restart replays the finished turn's answer, and one whose turn was cut short by the restart is
answered once the turn finished (resumed when its approval was answered) or refused with
``409 turn_interrupted`` — never run a second time. Before, the memory of earlier attempts died
with the process and the retry started a second session, a second approval, a second side effect."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from clawkit_serve.testing import make_key, serve, write_agent

pytestmark = pytest.mark.e2e


def _wait(fn, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = fn()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def _counts(served, agent="helper"):
    store = served.server_obj.runner.agents[agent].store
    sessions = [r["id"] for r in store.list(limit=1000) if r["agent"] == agent]
    runs = [run for sid in sessions for run in store.runs(sid)]
    users = [m for sid in sessions for m in store.messages(sid) if m.role == "user"]
    return {"sessions": len(sessions), "runs": len(runs), "user_messages": len(users)}


def test_retries_that_reach_a_restarted_server_never_run_the_turn_again(model, tmp_path, monkeypatch):
    import clawkit_serve.api_openai as api

    monkeypatch.setattr(api, "ELSEWHERE_WAIT", 0.5)  # how long a retry waits for another process's outcome
    agent = write_agent(tmp_path, model, "helper", tools=["shell_exec"])
    db = tmp_path / "server.db"
    key = make_key(db, "sdk")
    auth = {"Authorization": f"Bearer {key}"}
    ws = tmp_path / "ws-helper"

    # 1. a finished turn whose answer the client never got; the server restarts; the SDK retries
    served = serve([agent], db)
    try:
        client = openai.OpenAI(base_url=served.url + "/v1", api_key=key)
        body = {"model": "helper", "messages": [{"role": "user", "content": "say: paid once"}]}
        first = client.chat.completions.create(**body, extra_headers={"Idempotency-Key": "pay-7"})
        plain = {"model": "helper", "messages": [{"role": "user", "content": "say: no key"}]}
        unkeyed = client.chat.completions.create(**plain)
        # 2. a turn cut short by the restart while it waited for approval
        slow = openai.OpenAI(base_url=served.url + "/v1", api_key=key, timeout=0.5, max_retries=0)
        cut = {"model": "helper", "messages": [{"role": "user", "content": "run: echo hit >> hits.txt"}]}
        with pytest.raises(openai.APITimeoutError):
            slow.chat.completions.create(**cut)
        _wait(lambda: served.server_obj.broker.list("pending"))
    finally:
        served.stop()

    served = serve([agent], db)
    try:
        before = _counts(served)
        assert before == {"sessions": 3, "runs": 3, "user_messages": 3}, before
        calls = len(model.requests)
        again = httpx.post(f"{served.url}/v1/chat/completions", json=body, headers={**auth, "Idempotency-Key": "pay-7"})
        assert again.status_code == 200 and again.headers["x-clawkit-replayed"] == "true", again.text
        assert again.json()["id"] == first.id and again.json()["choices"][0]["message"]["content"] == "paid once"
        retry = httpx.post(f"{served.url}/v1/chat/completions", json=plain, headers={**auth, "x-stainless-retry-count": "1"})
        assert retry.status_code == 200 and retry.json()["session_id"] == unkeyed.session_id, retry.text
        # the interrupted turn: refused (not run again) while it has no answer, with its session named
        early = httpx.post(f"{served.url}/v1/chat/completions", json=cut, headers={**auth, "x-stainless-retry-count": "1"})
        assert early.status_code == 409 and early.json()["error"]["code"] == "turn_interrupted", early.text
        assert early.headers["x-should-retry"] == "false"
        assert len(model.requests) == calls and _counts(served) == before
        # its approval is answered on the new server: the turn resumes and finishes once
        pending = served.server_obj.broker.list("pending")
        assert len(pending) == 1, pending
        r = httpx.post(f"{served.url}/api/approvals/{pending[0]['id']}", json={"decision": "approve"}, headers=auth)
        assert r.status_code == 200, r.text
        sid = pending[0]["session_id"]
        assert early.headers["x-clawkit-session"] == sid
        _wait(lambda: (ws / "hits.txt").exists() and not served.server_obj.runner.busy(sid))
        late = _wait(lambda: (lambda x: x if x.status_code == 200 else None)(
            httpx.post(f"{served.url}/v1/chat/completions", json=cut, headers={**auth, "x-stainless-retry-count": "2"})))
        assert late.json()["session_id"] == sid and late.json()["choices"][0]["message"]["content"].startswith("done:")
        assert (ws / "hits.txt").read_text().splitlines() == ["hit"]  # the side effect happened once
        assert _counts(served)["sessions"] == 3 and _counts(served)["user_messages"] == 3
        # a first attempt (no retry count, no key) is still a new turn
        client = openai.OpenAI(base_url=served.url + "/v1", api_key=key)
        client.chat.completions.create(**plain)
        assert _counts(served)["sessions"] == 4
    finally:
        served.stop()
