"""A later one-shot run in a workspace with history serves recall to its first prompt (issue 29).

Through the real CLI (``python -m clawkit run``), every builtin plugin loaded, the loopback
scripted model recording what it was sent: a workspace gets a MEMORY.md and earlier one-shot
sessions, then one more ``clawkit run`` asks about something MEMORY.md holds. The system
prompt of that process's first (and only) model call carries the cited snippet.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

EARLIER = 2  # earlier one-shot sessions (bench_oneshot.py measures with 20)


def run(ws: Path, message: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS",)}  # the full install
    env["CLAWKIT_AUDIT_HOME"] = str(ws / ".audit-home")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", message, "--json"], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def test_a_later_oneshot_run_recalls_memory_into_its_first_prompt(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    with ModelServer() as server:
        (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
            name: helper
            model: {{name: openai/test, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 30}}
            instructions: Answer briefly.
            """))
        (ws / "MEMORY.md").write_text("# About me\n\n- My cat is called Miso; she hides under the bed when the "
                                      "vacuum cleaner runs.\n- I deploy the billing service on Tuesdays.\n")
        topics = ["the staging database", "my travel plans"]
        for i in range(EARLIER):
            server.reset()
            server.script(Reply.text("Noted."))
            done = run(ws, f"remind me about {topics[i]}")
            assert done.returncode == 0, done.stderr[-2000:]
        with sqlite3.connect(ws / ".clawkit" / "state.db") as conn:
            assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == EARLIER

        server.reset()
        server.script(Reply.text("Your cat is Miso."))
        done = run(ws, "what is my cat called, and what frightens her?")
        assert done.returncode == 0, done.stderr[-2000:]
        assert len(server.requests) == 1
        sent = json.dumps(server.requests[0].body)
    assert "Relevant memory" in sent and "[MEMORY.md#L" in sent and "Miso" in sent
