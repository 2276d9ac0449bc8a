"""``clawkit keys`` and ``clawkit serve`` as a user runs them: subprocesses, real signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

from clawkit_serve.testing import write_agent

pytestmark = pytest.mark.e2e


def clawkit(*args, cwd, **kw):
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, capture_output=True, text=True, timeout=120, **kw)


def test_keys_create_list_revoke_never_show_the_secret_again(tmp_path):
    made = clawkit("keys", "create", "--name", "ci", "--role", "approver", "--agent", "helper", "--json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["key"].startswith(f"ck_{created['id']}_") and created["role"] == "approver"
    listed = clawkit("keys", "list", "--json", cwd=tmp_path)
    assert json.loads(listed.stdout)[0]["agents"] == ["helper"]
    secret = created["key"].split("_", 2)[2]
    db = (tmp_path / ".clawkit" / "state.db").read_bytes()
    assert secret.encode() not in db and secret not in listed.stdout  # stored hashed
    assert clawkit("keys", "revoke", created["id"], cwd=tmp_path).returncode == 0
    again = clawkit("keys", "revoke", created["id"], cwd=tmp_path)
    assert again.returncode == 2 and "no active key" in again.stderr
    bad = clawkit("keys", "create", "--name", "x", "--role", "root", cwd=tmp_path)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_serve_refuses_to_start_without_keys_unless_loopback_dev(model, tmp_path):
    agent = write_agent(tmp_path, model)
    r = clawkit("serve", str(agent), cwd=tmp_path)
    assert r.returncode == 2 and "no API keys" in r.stderr
    r = clawkit("serve", str(agent), "--dev", "--host", "0.0.0.0", cwd=tmp_path)
    assert r.returncode == 2 and "refused on 0.0.0.0" in r.stderr
    r = clawkit("serve", str(tmp_path / "missing.yaml"), "--dev", cwd=tmp_path)
    assert r.returncode == 2 and "missing.yaml: no such agent file" in r.stderr


def _start(args, cwd):
    proc = subprocess.Popen([sys.executable, "-m", "clawkit", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+)", line or "")
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            raise AssertionError(f"serve exited {proc.returncode}: {proc.stderr.read()}")
    proc.kill()
    raise AssertionError("serve did not announce its address")


def test_serve_with_a_key_answers_and_stops_gracefully_on_sigterm(model, tmp_path):
    agent = write_agent(tmp_path, model)
    key = json.loads(clawkit("keys", "create", "--name", "app", "--json", cwd=tmp_path).stdout)["key"]
    proc, url = _start(["serve", str(agent), "--port", "0"], tmp_path)
    try:
        assert httpx.get(url + "/v1/models").status_code == 401
        r = httpx.post(url + "/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, timeout=60,
                       json={"model": "helper", "messages": [{"role": "user", "content": "say: served"}]})
        assert r.json()["choices"][0]["message"]["content"] == "served"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        err = proc.stderr.read()
        assert key not in err and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_dev_mode_serves_loopback_without_keys(model, tmp_path):
    agent = write_agent(tmp_path, model)
    proc, url = _start(["serve", str(agent), "--port", "0", "--dev"], tmp_path)
    try:
        assert httpx.get(url + "/v1/models").json()["data"][0]["id"] == "helper"
    finally:
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 0
