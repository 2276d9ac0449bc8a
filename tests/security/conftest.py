"""The security suite: the real CLI (``python -m clawkit``) with every builtin plugin, driven by a
hostile scripted model (the loopback model server) over hostile workspace content.

To stay fast, each module starts one model server and runs the CLI once per attack group: the
model answers with many hostile tool calls in one reply, and the tests assert on each result
(what ran, what the model saw, what the ledger recorded)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server():
    with ModelServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def audit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("audit-home")


def cli_env(audit_home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install: every builtin plugin
    env["CLAWKIT_AUDIT_HOME"] = str(audit_home)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.update(extra)
    return env


def write_agent(ws: Path, server: ModelServer, tools: list[str], plugins: str = "", extra: str = "",
                filename: str = "agent.yaml") -> Path:
    ws.mkdir(parents=True, exist_ok=True)
    path = ws / filename
    body = textwrap.dedent(f"""\
        name: target
        model: {{name: openai/test, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 20}}
        tools: {json.dumps(tools)}
        """) + extra
    if plugins:
        body += "plugins:\n" + textwrap.indent(textwrap.dedent(plugins), "  ")
    path.write_text(body)
    return path


@dataclass
class Run:
    """One CLI run: its process result, parsed JSON, and the model server's requests."""

    proc: subprocess.CompletedProcess
    result: dict[str, Any]
    requests: list[Any]
    ws: Path
    env: dict[str, str] = field(default_factory=dict)

    def tool_results(self) -> dict[str, str]:
        """call id -> the tool result text the model was shown (from the last request)."""
        out: dict[str, str] = {}
        for req in self.requests:
            for m in req.messages:
                if m.get("role") == "tool":
                    out[m["tool_call_id"]] = m.get("content") or ""
        return out

    def calls(self) -> dict[str, dict[str, Any]]:
        return {c["id"]: c for c in self.result.get("tool_calls", [])}

    def audit(self, session: str | None = None) -> list[dict[str, Any]]:
        conn = sqlite3.connect(self.ws / ".clawkit" / "state.db")
        try:
            cols = [r[1] for r in conn.execute("PRAGMA table_info(policy_audit)")]
            rows = [dict(zip(cols, r)) for r in conn.execute("SELECT * FROM policy_audit ORDER BY seq")]
        finally:
            conn.close()
        return [r for r in rows if session is None or r["session_id"] == session]

    def recorded(self, call_id: str) -> list[dict[str, Any]]:
        return [r for r in self.audit() if r["step_id"] == call_id]

    def model_saw(self) -> str:
        """Everything the model was sent (system prompt, messages) as one text."""
        return "\n".join(json.dumps(r.body) for r in self.requests)


def run_cli(ws: Path, server: ModelServer, audit_home: Path, message: str, *script: Any, args: tuple = (),
            env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 120, json_out: bool = True) -> Run:
    server.reset()
    server.script(*script)
    e = cli_env(audit_home, **(env or {}))
    cmd = [sys.executable, "-m", "clawkit", "run", "agent.yaml", message, *args] + (["--json"] if json_out else [])
    proc = subprocess.run(cmd, cwd=ws, env=e, capture_output=True, text=True, timeout=timeout, start_new_session=True,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
    result: dict[str, Any] = {}
    if json_out and proc.stdout.strip():
        try:
            result = json.loads(proc.stdout)
        except ValueError:
            result = {}
    return Run(proc, result, list(server.requests), ws, e)


def clawkit(ws: Path, env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def calls(*pairs: tuple[str, Any], ids: list[str] | None = None) -> Reply:
    """One reply with several tool calls; ``ids`` names them (default call_<i>_<tool>)."""
    reply = Reply.tool_calls(list(pairs))
    if ids:
        for c, i in zip(reply.calls, ids):
            c.id = i
    return reply


BATCH = Path(__file__).with_name("cli_batch.py")


class Cases:
    """Scripted hostile model for many sessions at once: each case's user message carries
    ``[case NAME]``; the model's n-th answer in that session is the case's n-th reply."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Any]] = {}
        self.requests: dict[str, list[Any]] = {}

    def add(self, name: str, *replies: Any) -> str:
        self.scripts[name] = list(replies)
        return f"[case {name}]"

    def __call__(self, request: Any) -> Any:
        import re

        messages = request.messages
        last = None
        for i, msg in enumerate(messages):  # the latest user message that names a case (chat: one per line)
            if msg.get("role") == "user":
                m = re.search(r"\[case ([\w.-]+)\]", json.dumps(msg.get("content")))
                if m:
                    last = (i, m.group(1))
        if last is None or last[1] not in self.scripts:
            return "no such case"
        start, name = last
        self.requests.setdefault(name, []).append(request)
        step = sum(1 for msg in messages[start:] if msg.get("role") == "assistant")
        script = self.scripts[name]
        item = script[step] if step < len(script) else "done"
        return item(request) if callable(item) else item

    def seen(self, name: str) -> str:
        """Everything the model was sent in this case."""
        return "\n".join(json.dumps(r.body) for r in self.requests.get(name, []))

    def tool_list(self, name: str) -> list[str]:
        """The tool results of this case in order, as the model last saw them (ids may repeat)."""
        reqs = self.requests.get(name, [])
        return [m.get("content") or "" for m in (reqs[-1].messages if reqs else []) if m.get("role") == "tool"]

    def tool_results(self, name: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for req in self.requests.get(name, []):
            for m in req.messages:
                if m.get("role") == "tool":
                    out[m["tool_call_id"]] = m.get("content") or ""
        return out


def run_batch(jobs: list[dict[str, Any]], audit_home: Path, tmp: Path, timeout: float = 300) -> dict[str, dict[str, Any]]:
    """Run CLI jobs in one interpreter (see cli_batch.py); returns name -> {rc, stdout, stderr, json}."""
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    env = cli_env(audit_home)
    proc = subprocess.run([sys.executable, str(BATCH), str(tmp / "jobs.json"), str(tmp / "out.json")], env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {}
    for item in json.loads((tmp / "out.json").read_text()):
        try:
            item["json"] = json.loads(item["stdout"]) if item["stdout"].strip().startswith("{") else {}
        except ValueError:
            item["json"] = {}
        out[item["name"]] = item
    return out


def audit_rows(ws: Path) -> list[dict[str, Any]]:
    db = ws / ".clawkit" / "state.db"
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(policy_audit)")]
        return [dict(zip(cols, r)) for r in conn.execute("SELECT * FROM policy_audit ORDER BY seq")]
    finally:
        conn.close()
