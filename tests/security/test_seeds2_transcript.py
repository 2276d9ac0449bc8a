"""Issue 27 item 12: ``sessions.transcript: jsonl`` writes a JSONL transcript per session as the turn
progresses, in the redacted form of ``clawkit sessions export``. The real CLI with every builtin loaded
(the policy plugin installs the redaction); the model reads a file holding an API key."""

from __future__ import annotations

import json
import textwrap

import pytest

from clawkit.testing.server import Reply

from .conftest import clawkit, run_cli

pytestmark = pytest.mark.e2e

SECRET = "sk-proj-ABCDEFGHIJKLMNOPQRSTUV0123456789"


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_jsonl_transcript_written_as_the_turn_progresses_and_redacted(tmp_path, server, audit_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "creds.txt").write_text(f"OPENAI_API_KEY={SECRET}\n")
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: target
        model: {{name: openai/test, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 30}}
        tools: [read_file]
        sessions: {{transcript: jsonl}}
        """))
    seen_mid_turn: list[list[dict]] = []

    def second(request):  # the model's second call: the transcript already holds the tool's result
        files = list((ws / ".clawkit" / "transcripts").glob("*.jsonl"))
        seen_mid_turn.append(_lines(files[0]) if files else [])
        return "The file holds an API key; I will not repeat it."

    run = run_cli(ws, server, audit_home, "what is in creds.txt?",
                  Reply.tool_calls([("read_file", {"path": "creds.txt"})]), second)
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    sid = run.result["session_id"]
    path = ws / ".clawkit" / "transcripts" / f"{sid}.jsonl"
    assert path.exists(), list((ws / ".clawkit").iterdir())
    assert (path.stat().st_mode & 0o777) == 0o600

    mid = seen_mid_turn[0]
    assert mid[0]["type"] == "session" and mid[0]["id"] == sid
    assert [m["role"] for m in mid if m["type"] == "message"] == ["user", "assistant", "tool"]

    records = _lines(path)
    text = path.read_text()
    assert SECRET not in text and "[REDACTED]" in text  # redacted like the store
    messages = [r for r in records if r["type"] == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[-1]["content"] == "The file holds an API key; I will not repeat it."

    export = clawkit(ws, run.env, "sessions", "export", sid)
    assert export.returncode == 0, export.stderr
    exported = [json.loads(line) for line in export.stdout.splitlines()]
    # the same records as `sessions export`: its messages and its events, in the same redacted form
    assert [r for r in exported if r["type"] == "message"] == messages
    strip = lambda rs: [(r["event"], r["data"]) for r in rs if r["type"] == "event"]  # noqa: E731
    assert sorted(map(json.dumps, strip(exported))) == sorted(map(json.dumps, strip(records)))


def test_no_transcript_unless_configured(tmp_path, server, audit_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: target
        model: {{name: openai/test, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 30}}
        tools: []
        """))
    run = run_cli(ws, server, audit_home, "hi", "hello")
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert not (ws / ".clawkit" / "transcripts").exists()
