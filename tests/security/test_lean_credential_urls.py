"""A credential URL with an empty user name (``redis://:hunter22@cache:6379``, the form Redis and
several drivers document for a password-only server) is a secret like ``user:pw@``: it must never
be stored. Old main stored it as is (the pattern wanted at least one user character before ``:``).
The real CLI with every builtin loaded: the model reads a file of connection strings, and the
stored session (``sessions export``) and the transcript keep none of the passwords."""

from __future__ import annotations

import json
import textwrap

import pytest

from clawkit.testing.server import Reply

from .conftest import clawkit, run_cli

pytestmark = pytest.mark.e2e

PASSWORDS = ("hunter22", "pgsecret9", "amqpword7", "mongopass5")
URLS = (
    "redis://:hunter22@cache:6379/0",
    "postgres://:pgsecret9@db.internal/app",
    "amqp://guest:amqpword7@mq:5672",  # the usual form: still redacted
    "mongodb+srv://:mongopass5@cluster0.example.net/test",
)


def test_credential_urls_with_an_empty_user_are_redacted_in_storage(tmp_path, server, audit_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "conns.txt").write_text("\n".join(URLS) + "\namqp://user:@mq:5672 (no password: nothing to hide)\n")
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: target
        model: {{name: openai/test, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 30}}
        tools: [read_file]
        sessions: {{transcript: jsonl}}
        """))
    run = run_cli(ws, server, audit_home, f"connect to {URLS[0]} and read conns.txt",
                  Reply.tool_calls([("read_file", {"path": "conns.txt"})]),
                  f"Done. The cache is {URLS[0]}.")
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    sid = run.result["session_id"]
    export = clawkit(ws, run.env, "sessions", "export", sid)
    assert export.returncode == 0, export.stderr
    records = [json.loads(line) for line in export.stdout.splitlines()]
    assert [r["role"] for r in records if r["type"] == "message"] == ["user", "assistant", "tool", "assistant"]
    stored = export.stdout + (ws / ".clawkit" / "transcripts" / f"{sid}.jsonl").read_text()
    for pw in PASSWORDS:
        assert pw not in stored, pw
    assert "[REDACTED]cache:6379" in stored and "[REDACTED]db.internal/app" in stored
    assert "amqp://user:@mq:5672" in stored  # an empty password: nothing removed
