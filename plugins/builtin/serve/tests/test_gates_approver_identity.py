"""Issue 30 items 12 and 5, through real HTTP with every builtin loaded: the audit ledger's chained
approval record names the API key that answered (id and name), and the call hash the approvals
API showed the person is the one the ledger stores — one hash, not two computed differently; and
an elevation stored on a session by another channel (``clawkit run``) is not used by the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest

from clawkit_serve.testing import make_key, serve, write_agent

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def site(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gates-serve")
    helper = write_agent(tmp, model, "helper", tools=["shell_exec"])
    elev = write_agent(tmp, model, "elev", tools=["shell_exec"], plugins={
        "directives": {"allow_elevated": True, "allow_noninteractive_elevated": True}})
    db = tmp / "server.db"
    keys = {"full": make_key(db, "runner"), "approver": make_key(db, "alice-on-call", role="approver")}
    served = serve([helper, elev], db)
    try:
        yield served, keys, elev
    finally:
        served.stop()


def _api(site, key: str) -> httpx.Client:
    served, keys, _ = site
    return httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {keys[key]}"}, timeout=60)


def _pending(site, sid: str) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = _api(site, "full").get("/api/approvals", params={"session": sid}).json()["approvals"]
        if rows:
            return rows[0]
        time.sleep(0.05)
    raise AssertionError("no approval request appeared")


def test_the_ledger_names_the_key_and_stores_the_call_hash_the_api_showed(site):
    served, keys, _ = site
    approver_id = keys["approver"].split("_")[1]  # ck_<id>_<secret>
    sid = _api(site, "full").post("/api/sessions", json={"agent": "helper"}).json()["session_id"]
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("r", _api(site, "full").post(
        f"/api/sessions/{sid}/messages", json={"message": "run: echo gates-approved"})))
    t.start()
    row = _pending(site, sid)
    shown = _api(site, "approver").get(f"/api/approvals/{row['id']}").json()["call_hash"]
    answered = _api(site, "approver").post(f"/api/approvals/{row['id']}", json={"decision": "approve", "call_hash": shown})
    assert answered.status_code == 200, answered.text
    t.join(60)
    assert "gates-approved" in out["r"].json()["reply"]

    records = _api(site, "full").get("/api/audit", params={"agent": "helper", "session": sid}).json()["records"]
    [approval] = [r for r in records if r.get("kind") == "approval"]
    # who approved, inside the chained record: the key's id and its name
    assert approver_id in approval["approval_by"] and "alice-on-call" in approval["approval_by"], approval
    data = approval["data"] if isinstance(approval["data"], dict) else json.loads(approval["data"])
    assert data["approver"]["kind"] == "api_key"
    assert data["approver"]["key_id"] == approver_id and data["approver"]["key_name"] == "alice-on-call"
    # one call hash: the API's is the ledger's, on the approval, the decision and the execution
    assert approval["call_hash"] == shown == answered.json()["call_hash"]
    hashes = {r["call_hash"] for r in records if r.get("tool") == "shell_exec" and r.get("call_hash")}
    assert hashes == {shown}, records
    verified = _api(site, "full").get("/api/audit/verify", params={"agent": "helper"}).json()
    assert verified["ok"] is True, verified


def test_an_elevation_stored_by_run_is_not_used_by_the_server(site):
    served, keys, elev = site
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CLAWKIT_LOAD_PLUGINS", None)
    run = subprocess.run([sys.executable, "-m", "clawkit", "run", str(elev), "/elevated on", "--json"], cwd=elev.parent,
                         env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-2000:]
    stored = json.loads(run.stdout)
    assert "Elevated mode on" in stored["reply"]
    sid = stored["session_id"]
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("r", _api(site, "full").post(
        f"/api/sessions/{sid}/messages", json={"message": "run: echo elevated-by-run > leak.txt"})))
    t.start()
    row = _pending(site, sid)  # asked, not run on the strength of another channel's elevation
    assert row["tool"] == "shell_exec"
    _api(site, "approver").post(f"/api/approvals/{row['id']}", json={"decision": "deny"})
    t.join(60)
    assert out["r"].status_code == 200 and "not approved" in out["r"].json()["reply"]
    assert not (elev.parent / "ws-elev" / "leak.txt").exists()
