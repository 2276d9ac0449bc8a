"""``DELETE /api/sessions/{id}`` through real HTTP (docs/serve.md): 204 and the conversation is
gone (store rows, the request log, the transcript API); 404 unknown; 409 while another process
holds the session; 403 for a key without the run role or scoped to another agent."""

from __future__ import annotations

import sqlite3

import httpx
import pytest

from clawkit.sessions import SessionStore
from clawkit_serve.testing import make_key, serve, write_agent

pytestmark = pytest.mark.e2e
CANARY = "quokkaserve3"


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("forget-serve")
    helper = write_agent(tmp, model, "helper", tools=[])
    other = write_agent(tmp, model, "other", tools=[])
    db = tmp / "server.db"
    keys = {"full": make_key(db, "full"), "other": make_key(db, "other-only", agents=["other"]),
            "read": make_key(db, "reader", role="read")}
    served = serve([helper, other], db)
    try:
        yield served, keys, db
    finally:
        served.stop()


def api(site, key="full") -> httpx.Client:
    served, keys, _ = site
    return httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {keys[key]}"}, timeout=60)


def _dump(db) -> str:
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(repr(conn.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables if t != "policy_audit")
    finally:
        conn.close()


def test_delete_a_session_over_http(site):
    db = site[2].parent / "ws-helper" / ".clawkit" / "state.db"  # the agent's session store
    r = api(site).post("/api/sessions", json={"agent": "helper", "message": f"say: {CANARY}"})
    assert r.status_code == 200, r.text
    sid = r.json()["session_id"]
    keep = api(site).post("/api/sessions", json={"agent": "helper", "message": "say: keep me"}).json()["session_id"]
    assert CANARY in _dump(db)

    assert api(site, "read").delete(f"/api/sessions/{sid}").status_code == 403
    assert api(site, "other").delete(f"/api/sessions/{sid}").status_code == 403
    assert api(site).delete("/api/sessions/ses_nope").status_code == 404

    holder = SessionStore(db)  # another process's turn on the session (the lock is per open file)
    try:
        assert holder.try_lock(sid)
        r = api(site).delete(f"/api/sessions/{sid}")
        assert r.status_code == 409 and r.json()["error"]["code"] == "session_busy"
        holder.unlock(sid)
    finally:
        holder.close()

    r = api(site).delete(f"/api/sessions/{sid}")
    assert r.status_code == 204, r.text
    assert api(site).get(f"/api/sessions/{sid}").status_code == 404
    assert api(site).delete(f"/api/sessions/{sid}").status_code == 404
    assert CANARY not in _dump(db) and CANARY not in _dump(site[2])  # the agent's store and the server's database
    assert api(site).get(f"/api/sessions/{keep}").status_code == 200
    r = api(site).post(f"/api/sessions/{keep}/messages", json={"message": "say: still here"})
    assert r.status_code == 200 and r.json()["reply"] == "still here"


def test_a_retry_after_the_delete_does_not_replay_the_forgotten_answer(site):
    """The server keeps each chat completion's outcome in memory for an hour so a retry (same
    Idempotency-Key) gets it back instead of a second turn; once the session is deleted, the retry
    is a new request — a new turn in a new session — never the forgotten reply."""
    body = {"model": "helper", "messages": [{"role": "user", "content": f"say: {CANARY}-idem"}]}
    headers = {"Idempotency-Key": "forget-me-1"}
    first = api(site).post("/v1/chat/completions", json=body, headers=headers)
    assert first.status_code == 200, first.text
    sid = first.json()["session_id"]
    again = api(site).post("/v1/chat/completions", json=body, headers=headers)
    assert again.headers.get("x-clawkit-replayed") == "true" and again.json()["id"] == first.json()["id"]
    assert api(site).delete(f"/api/sessions/{sid}").status_code == 204
    after = api(site).post("/v1/chat/completions", json=body, headers=headers)
    assert after.status_code == 200, after.text
    assert after.headers.get("x-clawkit-replayed") is None and after.json()["session_id"] != sid
    # the server's --db, not the agent's store: its request log held the reply for retries after a restart
    assert sid not in _dump(site[2])
