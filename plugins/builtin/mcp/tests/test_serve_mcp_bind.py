"""Issue 30 item 8 (last point): ``clawkit mcp serve --http`` beyond loopback needs the serve keys.

A non-loopback bind with no key is refused before anything listens (clear error, non-zero exit);
with a key (``clawkit keys create``) every request must carry it. Real CLI, every builtin."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
import yaml

pytestmark = pytest.mark.e2e


def _agent(tmp_path, model_server):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump({
        "name": "served", "instructions": "You help.", "workspace": str(ws),
        "model": {"name": "openai/test-model", "api_base": model_server.url, "api_key": "sk-test", "max_retries": 0},
        "tools": ["read_file"]}))
    return path


def _env():
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CLAWKIT_LOAD_PLUGINS", None)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_non_loopback_bind_without_keys_is_refused(model_server, tmp_path):
    agent = _agent(tmp_path, model_server)
    cmd = [sys.executable, "-m", "clawkit", "mcp", "serve", str(agent), "--http", f"0.0.0.0:{_free_port()}"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("clawkit mcp serve --http 0.0.0.0 started serving with no authentication")
    assert proc.returncode != 0
    assert "refused" in err and "clawkit keys create" in err and "Traceback" not in err, err


def test_non_loopback_bind_with_a_key_requires_it(model_server, tmp_path):
    agent = _agent(tmp_path, model_server)
    made = subprocess.run([sys.executable, "-m", "clawkit", "keys", "create", "--name", "mcp-client", "--json"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)["key"]
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "clawkit", "mcp", "serve", str(agent), "--http", f"0.0.0.0:{port}"],
                            cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "clawkit mcp serve --http did not start"
                time.sleep(0.1)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        url = f"http://127.0.0.1:{port}/mcp"
        assert httpx.post(url, json=init, headers=headers, timeout=30).status_code == 401
        wrong = httpx.post(url, json=init, headers={**headers, "Authorization": "Bearer ck_nope_nope"}, timeout=30)
        assert wrong.status_code == 401
        ok = httpx.post(url, json=init, headers={**headers, "Authorization": f"Bearer {key}"}, timeout=30)
        assert ok.status_code == 200, ok.text[:300]
    finally:
        proc.terminate()
        assert proc.wait(20) is not None


def test_open_api_keys_hook_fails_closed(tmp_path):
    """mcp finds the keys through ``open_api_keys`` (it may not import clawkit-serve): an answer with
    keys is used; an exception or no key refuses the bind."""
    from types import SimpleNamespace

    from clawkit import hookimpl
    from clawkit.errors import UsageError
    from clawkit.plugins import get_plugin_manager
    from clawkit_mcp.serve import _keys_for

    class Store:
        def __init__(self, n):
            self.n = n

        def active_count(self):
            return self.n

        def authenticate(self, token):
            return None

    class Keys:
        def __init__(self, answer):
            self.answer = answer

        @hookimpl
        def open_api_keys(self, db):
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    for answer, refused in ((Store(1), False), (Store(0), True), (RuntimeError("db down"), True), (None, True)):
        pm = get_plugin_manager(load_entry_points=False)  # narrow: the key-store hook alone, with stand-in stores
        pm.register(Keys(answer))
        args = SimpleNamespace(db=str(tmp_path / "state.db"), pm=pm)
        if refused:
            with pytest.raises(UsageError, match="refused"):
                _keys_for(args, "0.0.0.0:1")
        else:
            assert _keys_for(args, "0.0.0.0:1") is answer
