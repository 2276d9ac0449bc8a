"""``clawkit serve --db postgresql://…`` enqueues turns for ``clawkit worker`` processes; an
approval a queued turn waits on is answered through the server's API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import httpx
import pytest

from clawkit_workers.testing import Workers, agent_yaml

pytestmark = pytest.mark.e2e


def _serve(url: str, yaml) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, "-m", "clawkit", "serve", str(yaml), "--db", url, "--dev", "--port", "0"],
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    deadline = time.monotonic() + 90
    lines = []
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"clawkit serve: (http://\S+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, m.group(1)
    p.kill()
    raise AssertionError("serve did not start:\n" + "".join(lines))


def test_serve_enqueues_turns_and_answers_their_approvals_through_the_api(pg_url, append_model, tmp_path):
    yaml = agent_yaml(tmp_path, append_model.server.url, approve_shell=True)
    workers = Workers(pg_url, [yaml])
    served = None
    try:
        workers.start(1)
        served, base = _serve(pg_url, yaml)
        box: dict = {}

        def ask():
            box["r"] = httpx.post(f"{base}/v1/chat/completions", timeout=120,
                                  json={"model": "appender", "messages": [{"role": "user", "content": "please append token sv1"}]})

        asker = threading.Thread(target=ask)
        asker.start()
        deadline = time.monotonic() + 60
        pending = []
        while not pending and time.monotonic() < deadline:
            pending = httpx.get(f"{base}/api/approvals", timeout=10).json()["approvals"]
            time.sleep(0.1)
        assert len(pending) == 1 and pending[0]["tool"] == "shell_exec", pending
        wrong = httpx.post(f"{base}/api/approvals/{pending[0]['id']}", json={"decision": "approve", "call_hash": "0" * 64}, timeout=10)
        assert wrong.status_code == 409
        ok = httpx.post(f"{base}/api/approvals/{pending[0]['id']}", json={"decision": "approve"}, timeout=10)
        assert ok.status_code == 200 and ok.json()["status"] == "approved"
        asker.join(120)
        r = box["r"]
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == "appended sv1"
        sid = r.headers.get("x-clawkit-session") or r.json().get("session_id")
        transcript = httpx.get(f"{base}/api/sessions/{sid}", timeout=10).json()
        assert [m["role"] for m in transcript["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert transcript["approvals"][0]["status"] == "approved"
    finally:
        if served is not None:
            served.terminate()
            served.wait(30)
        workers.stop_all()
    assert [line.split()[1] for line in (tmp_path / "ws" / "effects.log").read_text().splitlines()] == ["sv1"]
