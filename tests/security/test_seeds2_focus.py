"""Issue 27 item 9: the focus booster and the STOP/stagnation notes go where the model looks last —
into the final message of the request (the latest user message, or a user message after the tool
results) — not the system prompt. A long session through the real CLI with every builtin loaded."""

from __future__ import annotations

import json
import textwrap

import pytest

from clawkit.testing.server import Reply

from .conftest import run_cli

pytestmark = pytest.mark.e2e

LONG = "Here is my report, section by section. " + " ".join(f"Section {i}: figures and remarks {i}." for i in range(120))


def test_focus_and_stop_notes_are_in_the_final_message(tmp_path, server, audit_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: target
        model: {{name: openai/test, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 30}}
        tools: [read_file]
        limits: {{context_window: 8000}}
        plugins:
          healing: {{focus_share: 0.1, consecutive_failures: 2}}
        """))
    first = run_cli(ws, server, audit_home, LONG, "Noted.")
    assert first.proc.returncode == 0, first.proc.stderr[-2000:]
    sid = first.result["session_id"]

    ask = "now list the missing files only"
    run = run_cli(ws, server, audit_home, ask,
                  Reply.tool_calls([("read_file", {"path": "missing-1.txt"})]),
                  Reply.tool_calls([("read_file", {"path": "missing-2.txt"})]),
                  "Both files are missing.", args=("--session", sid))
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert len(run.requests) == 3
    for req in run.requests:
        system = "\n".join(m["content"] or "" for m in req.messages if m["role"] == "system")
        assert "Focus:" not in system and "STOP and THINK" not in system
        final = req.messages[-1]
        assert final["role"] == "user"
        assert f"Your current instruction from the user is: \u00ab{ask}\u00bb" in final["content"]
    # the turn's first request: the note rides on the user's own message, which comes first
    assert run.requests[0].messages[-1]["content"].startswith(ask)
    # after the tool results: a user message of its own, after them
    assert run.requests[1].messages[-2]["role"] == "tool"
    assert "STOP and THINK" not in run.requests[1].messages[-1]["content"]
    last = run.requests[2].messages[-1]["content"]
    assert "STOP and THINK. The last 2 tool calls failed" in last
    # the stored history keeps the user's message as typed and holds no note
    export = json.dumps(run.requests[-1].messages[:-1])
    assert "Focus:" not in export and "STOP and THINK" not in export
