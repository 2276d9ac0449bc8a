"""Issue 30 item 9: ``clawkit serve`` under hostile traffic, through the real CLI with every builtin.

``--dev`` answers loopback names and origins only (DNS rebinding); hundreds of idle sockets do not
starve ``/healthz`` (header timeout, connection cap); a 400k-deep JSON body is a 400, not a 500; a
corrupt state database is a one-line error at start."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest

from clawkit_serve.testing import write_agent

pytestmark = pytest.mark.e2e

#: the server runs with this many open files at most (the usual limit is 1,024: the same attack,
#: scaled down so the test stays light)
NOFILE = 256


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install
    return env


def _limit_files() -> None:  # pragma: no cover - runs in the child before exec
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


@pytest.fixture(scope="module")
def served(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hardening")
    agent = write_agent(tmp, model)
    log = open(tmp / "serve.log", "w")  # a file, not a pipe nobody drains: the server never blocks on its log
    proc = subprocess.Popen([sys.executable, "-m", "clawkit", "serve", str(agent), "--dev", "--port", "0",
                             "--header-timeout", "2", "--body-timeout", "2"], cwd=tmp,
                            env=_env(), stdout=subprocess.DEVNULL, stderr=log, preexec_fn=_limit_files,
                            start_new_session=True)
    url = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and url is None:
        m = re.search(r"(http://127\.0\.0\.1:\d+)", (tmp / "serve.log").read_text())
        if m:
            url = m.group(1)
        elif proc.poll() is not None:
            raise AssertionError(f"serve exited {proc.returncode}: {(tmp / 'serve.log').read_text()}")
        else:
            time.sleep(0.05)
    assert url, "serve did not announce its address"
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_dev_answers_loopback_hosts_and_origins_only(served):
    port = served.rsplit(":", 1)[1]
    ok = httpx.get(served + "/v1/models")
    assert ok.status_code == 200, ok.text
    for host in (f"localhost:{port}", f"[::1]:{port}", "127.0.0.1"):
        assert httpx.get(served + "/v1/models", headers={"Host": host}).status_code == 200, host
    rebound = httpx.get(served + "/v1/models", headers={"Host": f"evil.example:{port}"})
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "not_loopback"
    assert "evil.example" in rebound.json()["error"]["message"]
    turn = httpx.post(served + "/v1/chat/completions", headers={"Host": "evil.example"},
                      json={"model": "helper", "messages": [{"role": "user", "content": "say: hi"}]})
    assert turn.status_code == 403
    cross = httpx.post(served + "/v1/chat/completions", headers={"Origin": "http://evil.example"},
                       json={"model": "helper", "messages": [{"role": "user", "content": "say: hi"}]})
    assert cross.status_code == 403 and cross.json()["error"]["code"] == "not_loopback"
    assert httpx.get(served + "/healthz", headers={"Origin": f"http://localhost:{port}"}).status_code == 200


def test_deep_json_is_a_400_not_a_500(served):
    body = b"[" * 400_000 + b"]" * 400_000
    r = httpx.post(served + "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"},
                   timeout=60)
    assert r.status_code == 400, r.text[:300]
    assert r.json()["error"]["code"] == "bad_json" and "deep" in r.json()["error"]["message"]
    nested = {"model": "helper", "messages": [{"role": "user", "content": "say: fine"}], "metadata": {"a": {"b": [[1]]}}}
    assert httpx.post(served + "/v1/chat/completions", json=nested, timeout=60).status_code != 400


def test_idle_sockets_do_not_starve_healthz(served):
    host, port = "127.0.0.1", int(served.rsplit(":", 1)[1])
    idle: list[socket.socket] = []
    try:
        for i in range(NOFILE + 150):  # more than the server has file descriptors
            s = socket.create_connection((host, port), timeout=10)
            if i % 2:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a slowloris: headers never finish
            idle.append(s)
        # answered while every one of those sockets is still open on this side
        r = httpx.get(served + "/healthz", timeout=httpx.Timeout(30.0))
        assert r.status_code == 200 and r.json() == {"ok": True}
    finally:
        for s in idle:
            s.close()
    assert httpx.get(served + "/healthz", timeout=30).status_code == 200


def test_slow_headers_are_cut_and_a_trickled_body_is_a_408(served):
    host, port = "127.0.0.1", int(served.rsplit(":", 1)[1])
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        assert s.recv(100) == b""  # closed by the server (--header-timeout 2), not left open
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"model\": ")  # the rest of the body never comes
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_corrupt_state_database_is_one_line_error(model, tmp_path):
    agent = write_agent(tmp_path, model)
    (tmp_path / ".clawkit").mkdir()
    (tmp_path / ".clawkit" / "state.db").write_bytes(b"this is not a database" * 500)
    r = subprocess.run([sys.executable, "-m", "clawkit", "serve", str(agent), "--dev", "--port", "0"], cwd=tmp_path,
                       env=_env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr[-2000:]
    assert "state database" in r.stderr and "not a database" in r.stderr
    ws = tmp_path / "ws-helper"
    (ws / ".clawkit").mkdir(exist_ok=True)
    (ws / ".clawkit" / "state.db").write_bytes(b"\x00garbage" * 1000)
    r = subprocess.run([sys.executable, "-m", "clawkit", "run", str(agent), "hi"], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and "state database" in r.stderr


def test_database_failing_while_serving_is_a_json_503(model, tmp_path):
    """The state database breaking under a running server: a JSON 503 naming it, not a bare 500."""
    import sqlite3

    from starlette.testclient import TestClient

    from clawkit_serve.app import ServeOptions, build

    agent = write_agent(tmp_path, model)
    app = build([agent], tmp_path / "state.db", ServeOptions())  # keys mode: --dev takes any bearer
    server = app.state.server

    def broken(*a, **k):
        raise sqlite3.OperationalError("database is locked")

    with TestClient(app, base_url="http://127.0.0.1") as client:
        server.keys.authenticate = broken  # the key lookup reads the state database
        r = client.get("/api/sessions", headers={"Authorization": "Bearer ck_x_y"})
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "database_unavailable" and "locked" in r.json()["error"]["message"]
