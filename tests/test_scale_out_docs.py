"""docs/scale-out.md runs as written: its agent file, the compose example's processes (two workers,
one server) and the shell and Python commands, against a real PostgreSQL and the loopback model.

Only the database's address changes (the compose example's ``postgres:5432`` host is the test's
server) and the server's port (0: a free one, since tests run in parallel).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from clawkit.testing.server import Reply

pytestmark = pytest.mark.e2e

DOC = Path(__file__).resolve().parents[1] / "docs" / "scale-out.md"
BIN = str(Path(sys.executable).parent)
COMPOSE_URL = "postgresql://clawkit:${PGPASSWORD}@postgres:5432/clawkit"


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def _answer(request):
    last = request.messages[-1]
    if last["role"] == "tool":
        return Reply.text("Order 1234 ships tomorrow.")
    return Reply.tool_calls([("list_dir", {"path": "."})])


def _launch(command: str, env: dict, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)


def _ready(p: subprocess.Popen, ready: str) -> str:
    """Wait for the line saying the process is up; return the matched text."""
    lines, deadline = [], time.monotonic() + 120
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(ready, line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return m.group(0)
    p.kill()
    raise AssertionError(f"{p.args!r} did not start:\n" + "".join(lines))


def test_the_documented_processes_and_commands_run_as_written(tmp_path, model_server, postgres_db):
    text = DOC.read_text(encoding="utf-8")
    yamls = _blocks(text, "yaml")
    agent = next(b for b in yamls if b.startswith("name: support"))
    compose = yaml.safe_load(next(b for b in yamls if b.startswith("services:")))
    bash = [line for b in _blocks(text, "bash") for line in b.strip().splitlines()]
    (tmp_path / "agent.yaml").write_text(agent, encoding="utf-8")
    model_server.script(_answer)
    url = str(postgres_db)
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", ""), "CLAWKIT_DB": url,
           "OPENAI_BASE_URL": model_server.url, "OPENAI_API_KEY": "sk-test", "PGPASSWORD": "unused",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    procs: list[subprocess.Popen] = []

    def run(line: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", line.replace(COMPOSE_URL, url)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=180)

    try:
        keys = run(next(line for line in bash if "keys create" in line))
        assert keys.returncode == 0, keys.stderr
        key = keys.stdout.strip()
        # the shell section's worker and the compose file's (its two replicas: these two), and the server
        worker_doc = next(line for line in bash if line.startswith("clawkit worker"))
        worker_compose = compose["services"]["worker"]["command"].replace(COMPOSE_URL, url)
        assert compose["services"]["worker"]["deploy"]["replicas"] == 2
        serve = compose["services"]["serve"]["command"].replace(COMPOSE_URL, url).replace("--host 0.0.0.0", "--host 127.0.0.1")
        procs.extend(_launch(c, env, tmp_path) for c in (worker_doc, worker_compose, serve.replace("--port 8787", "--port 0")))
        _ready(procs[0], r": ready")
        _ready(procs[1], r": ready")
        announced = _ready(procs[2], r"http://[\d.]+:\d+")

        submitted = run(next(line for line in bash if line.startswith("clawkit submit")))
        assert submitted.returncode == 0, submitted.stderr
        assert submitted.stdout.strip() == "Order 1234 ships tomorrow."

        python = next(b for b in _blocks(text, "python") if "open_turn_queue" in b)
        python = python.replace("postgresql://clawkit@db.internal:5432/clawkit", url)
        out = subprocess.run([sys.executable, "-c", python], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "Order 1234 ships tomorrow."

        r = httpx.post(f"{announced}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, timeout=120,
                       json={"model": "support", "messages": [{"role": "user", "content": "Where is my order 1234?"}]})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == "Order 1234 ships tomorrow."

        listed = run(next(line for line in bash if line.startswith("clawkit approvals list")))
        assert listed.returncode == 0 and "no pending approvals" in listed.stderr
        approve = run(next(line for line in bash if line.startswith("clawkit approvals approve")))
        assert approve.returncode == 2 and "no approval apr_0123456789abcdef0123" in approve.stderr  # the example id
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
