"""Durable approvals: answered after a restart, expiring with a reason; shutdown with a parked turn."""

from __future__ import annotations

import threading
import time

import httpx

from clawkit_serve.testing import make_key, serve, write_agent


def _wait(fn, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = fn()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_an_approval_answered_after_a_server_restart_resumes_the_turn(model, tmp_path):
    agent = write_agent(tmp_path, model, "helper")
    db = tmp_path / "server.db"
    key = make_key(db, "ops")
    auth = {"Authorization": f"Bearer {key}"}
    first = serve([agent], db)
    sid = httpx.post(first.url + "/api/sessions", json={"agent": "helper"}, headers=auth).json()["session_id"]
    seen = {}

    def client_turn():  # the client's request is cut when the server goes down
        try:
            seen["r"] = httpx.post(f"{first.url}/api/sessions/{sid}/messages", json={"message": "run: echo after-restart"},
                                   headers=auth, timeout=60)
        except httpx.HTTPError as exc:
            seen["error"] = exc

    t = threading.Thread(target=client_turn)
    t.start()
    row = _wait(lambda: (httpx.get(first.url + "/api/approvals", headers=auth).json()["approvals"] or [None])[0])
    started = time.monotonic()
    first.stop()  # graceful: the parked turn is checkpointed, not waited for
    assert time.monotonic() - started < 20
    t.join(30)

    second = serve([agent], db)
    try:
        pending = httpx.get(second.url + "/api/approvals", headers=auth).json()["approvals"]
        assert [p["id"] for p in pending] == [row["id"]]
        r = httpx.post(f"{second.url}/api/approvals/{row['id']}", json={"decision": "approve", "call_hash": row["call_hash"]}, headers=auth)
        assert r.status_code == 200, r.text

        def finished():
            t = httpx.get(f"{second.url}/api/sessions/{sid}", headers=auth).json()
            last = t["messages"][-1]
            return t if last["role"] == "assistant" and not last.get("tool_calls") and not t["busy"] else None

        transcript = _wait(finished)
        reply = transcript["messages"][-1]["content"]
        assert reply.startswith("done: ") and "exit code 0\nafter-restart" in reply  # shell output arrives wrapped as untrusted data
        assert any(e["type"] == "turn.resumed" for e in transcript["events"])
        roles = [m["role"] for m in transcript["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"]  # no 'interrupted' filler
        audit = httpx.get(second.url + "/api/audit", params={"tool": "shell_exec"}, headers=auth).json()["records"]
        assert any(r.get("approval_result") == "approved" for r in audit)
        assert any(r.get("decision") == "executed" for r in audit)
    finally:
        second.stop()


def test_an_unanswered_approval_expires_and_the_model_is_told_why(model, tmp_path):
    agent = write_agent(tmp_path, model, "helper", plugins={"serve": {"approval_timeout": 0.5}})  # the agent's own
    db = tmp_path / "server.db"
    key = make_key(db, "ops")
    auth = {"Authorization": f"Bearer {key}"}
    served = serve([agent], db)
    try:
        sid = httpx.post(served.url + "/api/sessions", json={"agent": "helper"}, headers=auth).json()["session_id"]
        r = httpx.post(f"{served.url}/api/sessions/{sid}/messages", json={"message": "run: echo late"}, headers=auth, timeout=60)
        reply = r.json()["reply"]
        assert reply.startswith("done: Error: not approved") and "no answer within 0.5 s" in reply
        rows = httpx.get(served.url + "/api/approvals", params={"status": "expired"}, headers=auth).json()["approvals"]
        assert len(rows) == 1
        late = httpx.post(f"{served.url}/api/approvals/{rows[0]['id']}", json={"decision": "approve"}, headers=auth)
        assert late.status_code == 409 and "expired" in late.json()["error"]["message"]
    finally:
        served.stop()
