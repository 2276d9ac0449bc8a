"""Issue 25 goal 6: the MCP servers of one agent start concurrently, through the real CLI with
every builtin plugin loaded (``clawkit mcp list`` and ``clawkit run``).

Three test servers (the official SDK) each wait 1 s before serving, and a fourth exits at once.
Concurrency is asserted on structure, not timings: the start intervals clawkit records (``started``/
``ready`` in ``mcp list --json``, ``mcp.server_started`` events of a run) overlap — every server was
launched before any was ready, which one-by-one starts (old ``mcp list``) cannot produce. The broken
server is reported by name and takes none of the others down; tool descriptions are still pinned
and still mark the session untrusted.
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

from clawkit.testing.server import ModelServer

pytestmark = pytest.mark.e2e

SERVER = str(Path(__file__).with_name("mcp_test_server.py"))
SLOW = ("slow_a", "slow_b", "slow_c")


def _agent(ws: Path, model_url: str) -> None:
    servers = {name: {"command": sys.executable, "args": [SERVER], "env": {"MCP_TEST_SLEEP_ON_START": "1"}, "risk": "safe"}
               for name in SLOW}
    servers["broken"] = {"command": sys.executable, "args": ["-c", "import sys; print('no such luck', file=sys.stderr); sys.exit(3)"],
                         "max_restarts": 0}
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: starts
        model: {{name: openai/test, api_base: "{model_url}", api_key: sk-test, max_retries: 0, timeout: 20}}
        tools: ["mcp__*"]
        """) + "mcp:\n  servers: " + json.dumps(servers) + "\n")


def _cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install: every builtin plugin
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)


def _overlap(intervals: dict[str, tuple[float, float]]) -> None:
    """Every server was launched before the first one was ready (one by one, each starts after the last is ready)."""
    assert set(intervals) == set(SLOW), intervals
    last_launch = max(start for start, _ in intervals.values())
    first_ready = min(ready for _, ready in intervals.values())
    assert last_launch < first_ready, f"started one by one: {intervals}"
    for start, ready in intervals.values():
        assert ready - start >= 1.0  # each really waited its second: the overlap is not trivial


def test_mcp_list_and_run_start_servers_concurrently(tmp_path):
    ws = tmp_path / "ws"
    with ModelServer() as model:
        model.script(lambda request: "all set")
        _agent(ws, model.url)

        listed = _cli(ws, "mcp", "list", "agent.yaml", "--json")
        assert listed.returncode == 1, listed.stderr[-2000:]  # one server is down: not all ready
        rows = {r["server"]: r for r in json.loads(listed.stdout)}
        _overlap({n: (rows[n]["started"], rows[n]["ready"]) for n in SLOW})
        for name in SLOW:
            assert rows[name]["state"] == "ready" and rows[name]["error"] is None
            assert f"mcp__{name}__add" in {t["name"] for t in rows[name]["tools"]}
        assert rows["broken"]["state"] != "ready" and "failed to start" in rows["broken"]["error"]
        assert "no such luck" in rows["broken"]["error"]  # its stderr explains why

        ran = _cli(ws, "run", "agent.yaml", "hello", "--json", "--new-session", "starts")
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert json.loads(ran.stdout)["reply"] == "all set"
        tools_sent = {t["function"]["name"] for t in model.requests[0].body.get("tools", [])}

    conn = sqlite3.connect(ws / ".clawkit" / "state.db")
    try:
        events = [(t, json.loads(d)) for t, d in conn.execute(
            "SELECT type, data FROM events WHERE session_id = 'starts' ORDER BY id")]
        pinned = {row[0] for row in conn.execute("SELECT DISTINCT server FROM mcp_tool_pins")}
    finally:
        conn.close()
    started = {d["server"]: (d["started"], d["ready"]) for t, d in events if t == "mcp.server_started"}
    _overlap(started)
    errors = [d for t, d in events if t == "mcp.server_error"]
    assert [e["server"] for e in errors] == ["broken"] and "'broken'" in errors[0]["error"]
    # the others' tools reached the model, their descriptions pinned and marking the session untrusted
    assert {f"mcp__{n}__add" for n in SLOW} <= tools_sent
    assert set(SLOW) <= pinned
    assert {d["server"] for t, d in events if t == "provenance.untrusted" and d.get("kind") == "mcp-description"} <= set(SLOW)
    assert any(t == "provenance.untrusted" and d.get("kind") == "mcp-description" for t, d in events)
