"""Issue 27 item 3 through the real CLI with every builtin loaded: a session's classification label
is its display label — ``clawkit sessions list`` (text and JSON) and the server's ``/api/sessions``
(what the panel lists, by label) show it. Old main: only the id, agent and message count."""

from __future__ import annotations

import json

import pytest

from .conftest import clawkit, cli_env, write_agent

pytestmark = pytest.mark.e2e

CLASSIFIER_MARK = "You classify a conversation"
VERDICT = json.dumps({"label": "Quarterly invoice audit", "topic": "other", "complexity": "simple",
                      "domain": ["finance"], "flags": []})


def test_sessions_list_shows_the_classification_label(tmp_path, server, audit_home):
    def respond(req):
        system = next((m["content"] for m in req.messages if m["role"] == "system"), "")
        return VERDICT if system.startswith(CLASSIFIER_MARK) else "Looking at the invoices."

    ws = tmp_path / "ws"
    write_agent(ws, server, ["read_file"], f"classifier:\n  model: {{name: openai/tiny, api_base: \"{server.url}\"}}\n"
                "  wait_ms: 10000\n")
    server.reset()
    server.script(*([respond] * 6))
    env = cli_env(audit_home)
    run = clawkit(ws, env, "run", "agent.yaml", "audit the Q3 invoices", "--json")
    assert run.returncode == 0, run.stderr[-2000:]
    sid = json.loads(run.stdout)["session_id"]
    listed = clawkit(ws, env, "sessions", "list", "--agent", "agent.yaml")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith(sid))
    assert line.endswith("Quarterly invoice audit")
    rows = json.loads(clawkit(ws, env, "sessions", "list", "--agent", "agent.yaml", "--json").stdout)
    assert next(r for r in rows if r["id"] == sid)["label"] == "Quarterly invoice audit"
