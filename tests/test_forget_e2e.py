"""Deleting a conversation deletes it everywhere (docs/forget.md), end to end through the CLI with
every builtin plugin loaded and the loopback model server: session A's canary is in its user
message, a stored full tool output (truncator), an attachment, its memory episode, its JSONL
transcript, a sub-agent child's turn and the policy audit ledger; after ``clawkit sessions delete A``
every file under the workspace's .clawkit is scanned — every table and column of every SQLite
database, every other file's bytes — and A's canary is only in the ledger rows the docs say are kept.
Session B is untouched and resumes."""

from __future__ import annotations

import json
import os
import sqlite3
import struct
import subprocess
import sys
import textwrap
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest

from clawkit.testing.media import png
from clawkit.testing.server import Fault, Reply

pytestmark = pytest.mark.e2e

CANARY_A = "zebracanaryalpha7"
CANARY_B = "otterbeaconbravo9"
#: the policy audit ledger's columns that keep what a call named (docs/forget.md, "What is kept"): the
#: arguments as recorded, the capabilities requested (paths, hosts, commands), the decision's reason and
#: an event's data (a provenance note naming the file read; a sub-agent's task as dispatched)
LEDGER_KEEPS = ("arguments", "data", "reason", "requested")


class ByModel:
    def __init__(self, **scripts: list[Any]):
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.lock = threading.Lock()

    def __call__(self, request: Any) -> Any:
        model = str((request.body or {}).get("model"))
        with self.lock:
            items = self.scripts.get(model)
            item = items.pop(0) if items else None
        if item is None:
            return Fault.status(400, f"ByModel: no scripted reply left for model {model!r}")
        return item(request) if callable(item) else item


def _env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("CLAWKIT_LOAD_PLUGINS", None)  # every installed plugin
    e["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return e


def clawkit(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                         timeout=180)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def _model(server: Any, name: str) -> str:
    return json.dumps({"name": f"openai/{name}", "api_base": server.url, "api_key": "sk-test", "max_retries": 0,
                       "timeout": 30})


def png_with(text: str) -> bytes:
    """A valid PNG carrying ``text`` in a tEXt chunk (the attachment's bytes hold the canary)."""
    data = png()
    body = b"Comment\x00" + text.encode()
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    return data[:33] + chunk + data[33:]


def scan(root: Path, needle: str) -> list[str]:
    """Every place under ``root`` that holds ``needle``: ``file:table.column`` for SQLite databases
    (each opened read-only, every table and column), ``file`` for any other file's bytes."""
    hits: list[str] = []
    raw = needle.encode()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        head = path.read_bytes()[:16]
        if head.startswith(b"SQLite format 3"):
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                for t in tables:
                    try:
                        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')]
                        rows = conn.execute(f'SELECT * FROM "{t}"').fetchall()
                    except sqlite3.Error:  # a virtual table this sqlite3 cannot load (vec0): its shadow tables are read
                        continue
                    for row in rows:
                        for c, v in zip(cols, row):
                            if (isinstance(v, str) and needle in v) or (isinstance(v, bytes) and raw in v):
                                hits.append(f"{path.relative_to(root)}:{t}.{c}")
            finally:
                conn.close()
        elif path.name.endswith(("-wal", "-shm", "-journal")):
            if raw in path.read_bytes():
                hits.append(str(path.relative_to(root)))
        elif raw in path.read_bytes():
            hits.append(str(path.relative_to(root)))
    return sorted(set(hits))


def _workspace(tmp_path: Path, server: Any) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "researcher.yaml").write_text(textwrap.dedent(f"""
        name: researcher
        model: {_model(server, "researcher")}
        instructions: You research things.
        tools: [read_file]
        """))
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""
        name: lead
        model: {_model(server, "lead")}
        instructions: You lead.
        tools: [read_file]
        sessions: {{transcript: jsonl}}
        subagents:
          researcher:
            agent: researcher.yaml
            description: Researches a topic.
            tools: [read_file]
        plugins:
          truncator: {{max_tokens: 64}}
          memory: {{sessions: true, watch: false, embedding: {{provider: local}}}}
        """))
    (ws / f"notes-{CANARY_A}.txt").write_text((f"line {CANARY_A} " + "x" * 60 + "\n") * 400)
    (ws / "pic.png").write_bytes(png_with(CANARY_A))
    return ws


def test_sessions_delete_forgets_a_conversation_everywhere(tmp_path, model_server):
    ws = _workspace(tmp_path, model_server)
    model_server.script(ByModel(
        lead=[Reply.tool_calls([("read_file", {"path": f"notes-{CANARY_A}.txt"}),
                                ("agent_researcher", {"task": f"look into {CANARY_A}"})]),
              f"Done: {CANARY_A} handled.", f"Hello {CANARY_B}.", f"Again {CANARY_B}."],
        researcher=[f"The child found {CANARY_A}."],
    ))
    a = json.loads(clawkit(ws, "run", "agent.yaml", f"Remember {CANARY_A}; read the notes.", "-a", "pic.png",
                           "--json").stdout)["session_id"]
    b = json.loads(clawkit(ws, "run", "agent.yaml", f"My word is {CANARY_B}.", "--json").stdout)["session_id"]
    clawkit(ws, "memory", "--agent", "agent.yaml", "index", "--sessions")
    dot = ws / ".clawkit"
    before = scan(dot, CANARY_A)
    # the canary really is in each place the deletion must reach
    for where in ("state.db:messages.content", "state.db:truncator_output_chunks.content", "memory.db:memory_chunks.text",
                  f"transcripts/{a}.jsonl", "state.db:policy_audit.arguments"):
        assert where in before, (where, before)
    assert any(h.startswith("attachments/") for h in before), before
    child_sessions = [s for s in json.loads(clawkit(ws, "sessions", "list", "--json", "--agent", "agent.yaml").stdout)
                      if s["agent"] == "researcher"]
    assert len(child_sessions) == 1

    # unknown id: exit 1 naming it, nothing deleted
    out = clawkit(ws, "sessions", "delete", a, "ses_nope", "--agent", "agent.yaml", check=False)
    assert out.returncode == 1 and "ses_nope" in out.stderr
    assert scan(dot, CANARY_A) == before

    def untrusted_of(sid):
        conn = sqlite3.connect(dot / "state.db")
        try:
            (meta,) = conn.execute("SELECT metadata FROM sessions WHERE id = ?", (sid,)).fetchone()
        finally:
            conn.close()
        return (json.loads(meta or "{}").get("untrusted") or {}).get("count")

    b_taint = untrusted_of(b)  # B recalls A's episode when the model finds them alike: its record names A's file
    out = clawkit(ws, "sessions", "delete", a, "--agent", "agent.yaml", "--json")
    report = json.loads(out.stdout)
    assert untrusted_of(b) == b_taint  # a recall of A keeps B untrusted; only the naming of A goes (below)
    assert report["ok"] and report["sessions"] == [a, child_sessions[0]["id"]]
    deleted = report["deleted"]
    assert deleted["sessions"] == 2 and deleted["transcripts"] == 2 and deleted["attachments"] == 1
    assert deleted["truncator.outputs"] >= 1 and deleted["memory.episode_chunks"] >= 1

    # A's canary: only in the audit ledger's recorded arguments (kept by design, docs/forget.md)
    assert scan(dot, CANARY_A) == sorted(f"state.db:policy_audit.{c}" for c in LEDGER_KEEPS)
    ledger = sqlite3.connect(dot / "state.db")
    rows = [json.dumps(r) for r in ledger.execute("SELECT * FROM policy_audit")]
    ledger.close()
    kept = [r for r in rows if CANARY_A in r]
    assert kept
    # what it does not keep: the user's message, the model's and the child's replies, the file's text
    for text in ("Remember", "handled", "The child found", "x" * 60):
        assert not any(text in r for r in rows), text
    assert "state.db:messages.content" in scan(dot, CANARY_B) and f"transcripts/{b}.jsonl" in scan(dot, CANARY_B)
    again = json.loads(clawkit(ws, "run", "agent.yaml", "And now?", "--session", b, "--json").stdout)
    assert again["session_id"] == b and again["reply"] == f"Again {CANARY_B}."
    history = [m for m in model_server.requests if (m.body or {}).get("model") == "lead"][-1].messages
    assert any(CANARY_B in str(m.get("content")) for m in history)

    # prune: a dry run lists and keeps; then deletes
    out = clawkit(ws, "sessions", "prune", "--older-than", "0s", "--dry-run", "--agent", "agent.yaml")
    assert b in out.stdout and "dry run" in out.stdout
    out = clawkit(ws, "sessions", "prune", "--older-than", "30d", "--agent", "agent.yaml")
    assert "no session older than 30d" in out.stdout
    out = clawkit(ws, "sessions", "prune", "--older-than", "0s", "--agent", "agent.yaml", "--json")
    assert json.loads(out.stdout)["sessions"] == [b]
    assert not [h for h in scan(dot, CANARY_B) if "policy_audit" not in h]
