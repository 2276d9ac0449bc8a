"""Issue 27 item 13: memory's episode store is compacted like session history — old episodes are
summarised by the agent's model (scripted here) and merged, in the background after a turn (the
kernel drains the task before a one-shot run exits) and with ``clawkit memory compact``; the merged
summary replaces the originals with provenance kept (a summary of an untrusted session stays
untrusted: shown as data and marking the session that recalls it), and recall still finds the facts.
Through the real CLI with every builtin loaded, on both wire formats."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

BATCH = Path(__file__).parent / "security" / "cli_batch.py"
SUMMARY_MARK = "long-term memory"  # in merge.SUMMARY_SYSTEM: the summariser's requests
SUMMARIES = {  # what the scripted model writes for each merged group (by a fact in its episodes)
    "4711": "- The user's locker code is 4711.\n- The user keeps tide tables in notes.txt.",
    "teal": "- The user's favourite colour is teal.\n- The office plant is a ficus named Herbert.",
    "Oslo": "- The user's sister lives in Oslo.\n- The user's bicycle is green.",
}


class Script:
    """Replies by the case whose text the latest user message is (cases are named ``auto.*`` for the
    OpenAI wire, ``cmd.*`` for Anthropic's); summarisation requests get the summary of the group whose
    fact they contain. The messages carry no routing tag: a tag shared by every message made them
    alike to the embedding model, and recall then brought back unrelated sessions."""

    def __init__(self) -> None:
        self.cases: dict[str, list] = {}
        self.texts: dict[str, str] = {}
        self.requests: dict[str, list] = {}
        self.summaries: list[str] = []

    def add(self, name: str, text: str, *replies) -> str:
        self.cases[name] = list(replies)
        self.texts[name] = text
        return text

    def __call__(self, request):
        body = json.dumps(request.body)
        if SUMMARY_MARK in body:
            self.summaries.append(body)
            return next((s for key, s in SUMMARIES.items() if key in body), "- nothing durable")
        last = None
        wire = "cmd." if "claude" in str(request.body.get("model")) else "auto."
        for i, msg in enumerate(request.messages):
            if msg.get("role") == "user":
                content = json.dumps(msg.get("content"))
                for name, text in self.texts.items():
                    if name.startswith(wire) and json.dumps(text)[1:-1] in content:
                        last = (i, name)
        if last is None:
            return "ok"
        start, name = last
        self.requests.setdefault(name, []).append(body)
        step = sum(1 for msg in request.messages[start:] if msg.get("role") == "assistant")
        script = self.cases.get(name, [])
        return script[step] if step < len(script) else "ok"


def _agent(ws: Path, server: ModelServer, *, anthropic: bool) -> None:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "notes.txt").write_text("High tide at 06:12, low tide at 12:30.\n")
    model, base = ("anthropic/claude-test", server.base_url) if anthropic else ("openai/test", server.url)
    # the same agent; merging after turns off/on; "quiet": no recall while the history is written (a session
    # recalling the episode of the one that read notes.txt is marked untrusted too, and so would be its episode)
    for name, on, recall in (("agent.yaml", "false", "true"), ("agent-on.yaml", "true", "true"),
                             ("agent-quiet.yaml", "false", "false")):
        (ws / name).write_text(textwrap.dedent(f"""\
            name: keeper
            model: {{name: {model}, api_base: "{base}", api_key: sk-test, max_retries: 0, timeout: 20}}
            tools: [read_file]
            plugins:
              memory:
                compaction: {{enabled: {on}, keep_recent: 1, batch: 2}}
                recall: {{enabled: {recall}}}
            """))


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    root = tmp_path_factory.mktemp("episodes")
    script = Script()
    jobs = []

    def job(name, ws, *argv):
        jobs.append({"name": name, "cwd": str(root / ws), "argv": list(argv)})

    def run(name, ws, text, *replies, agent="agent.yaml"):
        job(name, ws, "run", agent, script.add(name, text, *replies), "--json")

    with ModelServer() as server:
        # "auto": merged after a turn, in the background (OpenAI wire); "cmd": by `memory compact` (Anthropic wire)
        _agent(root / "auto", server, anthropic=False)
        _agent(root / "cmd", server, anthropic=True)
        for ws in ("auto", "cmd"):
            quiet = {"agent": "agent-quiet.yaml"}
            run(f"{ws}.s1", ws, "Remember: my locker code is 4711.", "Noted: locker code 4711.", **quiet)
            run(f"{ws}.s2", ws, "Read notes.txt, it has my tide tables.",
                Reply.tool_calls([("read_file", {"path": "notes.txt"})]), "High tide is at 06:12.", **quiet)
            run(f"{ws}.s3", ws, "My favourite colour is teal; the office plant is a ficus named Herbert.", "Lovely.",
                **quiet)
            run(f"{ws}.s4", ws, "My sister lives in Oslo and my bicycle is green.", "Noted.", **quiet)
            run(f"{ws}.s5", ws, "The deploy bot is named Gertrude.", "Noted.", **quiet)
            job(f"{ws}.index", ws, "memory", "index", "--sessions", "--agent", "agent.yaml")
            job(f"{ws}.before", ws, "memory", "stats", "--agent", "agent.yaml", "--json")
        # its turn.end merges the old episodes (a background task the kernel drains before the process exits)
        run("auto.trigger", "auto", "Good morning.", "Good morning!", agent="agent-on.yaml")
        job("cmd.compact", "cmd", "memory", "compact", "--agent", "agent.yaml", "--json")
        for ws in ("auto", "cmd"):
            job(f"{ws}.after", ws, "memory", "stats", "--agent", "agent.yaml", "--json")
            job(f"{ws}.search", ws, "memory", "search", "locker code", "--agent", "agent.yaml", "--json")
            # the clean recall first: a session that recalled untrusted memory leaves an untrusted episode itself
            run(f"{ws}.recall_colour", ws, "What is my favourite colour?", "Teal.")
            run(f"{ws}.recall_locker", ws, "What is my locker code?", "4711")
        server.script(script)
        (root / "jobs.json").write_text(json.dumps(jobs))
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", CLAWKIT_AUDIT_HOME=str(root / "audit"))
        env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install
        proc = subprocess.run([sys.executable, str(BATCH), str(root / "jobs.json"), str(root / "out.json")], env=env,
                              capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr[-3000:]
    results = {r["name"]: r for r in json.loads((root / "out.json").read_text())}
    for name, r in results.items():
        assert r["rc"] == 0, (name, r["stderr"][-2000:])
    return results, script, root


def _sources(root: Path, ws: str) -> dict[str, str]:
    conn = sqlite3.connect(root / ws / ".clawkit" / "memory.db")
    try:
        return dict(conn.execute("SELECT path, kind FROM memory_sources WHERE path IN"
                                 " (SELECT DISTINCT path FROM memory_chunks)").fetchall())
    finally:
        conn.close()


def _merged(root: Path, ws: str) -> list[dict]:
    conn = sqlite3.connect(root / ws / ".clawkit" / "memory.db")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM memory_merged ORDER BY first")]
    finally:
        conn.close()


def _session_untrusted(root: Path, ws: str, session_id: str):
    conn = sqlite3.connect(root / ws / ".clawkit" / "state.db")
    try:
        (meta,) = conn.execute("SELECT metadata FROM sessions WHERE id = ?", (session_id,)).fetchone()
    finally:
        conn.close()
    return json.loads(meta or "{}").get("untrusted")


@pytest.mark.parametrize("ws", ["auto", "cmd"])
def test_old_episodes_are_merged_and_replaced(outcome, ws):
    results, script, root = outcome
    before = json.loads(results[f"{ws}.before"]["stdout"])
    assert before["partitions"]["keeper"]["episode"]["sources"] == 5
    paths = _sources(root, ws)
    merged = sorted(p for p in paths if p.startswith("merged:"))
    sessions = [p for p in paths if p.startswith("session:")]
    # keep_recent 1, batch 2: s1+s2 and s3+s4 merged; s5 (and later sessions) verbatim
    assert len(merged) == 2, paths
    assert len(sessions) >= 1 and all(p.startswith("session:") for p in sessions)
    rows = _merged(root, ws)
    assert [len(json.loads(r["sessions"])) for r in rows] == [2, 2]
    assert len(script.summaries) >= 2


@pytest.mark.parametrize("ws", ["auto", "cmd"])
def test_provenance_is_kept(outcome, ws):
    results, script, root = outcome
    first, second = _merged(root, ws)
    # the group with the session that read notes.txt (untrusted file) stays untrusted; the other does not
    assert first["untrusted"] == 1 and first["path"].startswith("merged:untrusted:")
    assert any(s.get("detail") == "notes.txt" for s in json.loads(first["sources"]))
    assert second["untrusted"] == 0 and not second["path"].startswith("merged:untrusted:")


@pytest.mark.parametrize("ws", ["auto", "cmd"])
def test_recall_finds_merged_facts_and_keeps_them_untrusted(outcome, ws):
    results, script, root = outcome
    hits = json.loads(results[f"{ws}.search"]["stdout"])
    assert hits[0]["path"].startswith("merged:untrusted:") and "4711" in hits[0]["text"]
    locker = "\n".join(script.requests[f"{ws}.recall_locker"])
    assert "4711" in locker and "UNTRUSTED MEMORY" in locker  # recalled, inside the untrusted-data block
    colour = "\n".join(script.requests[f"{ws}.recall_colour"])
    assert "teal" in colour and "UNTRUSTED MEMORY" not in colour.split("teal")[0][-400:]
    sid_locker = json.loads(results[f"{ws}.recall_locker"]["stdout"])["session_id"]
    record = _session_untrusted(root, ws, sid_locker)
    assert record and any(s["kind"] == "memory" and "merged:untrusted:" in s["detail"] for s in record["sources"])
    sid_colour = json.loads(results[f"{ws}.recall_colour"]["stdout"])["session_id"]
    assert not _session_untrusted(root, ws, sid_colour)


def test_compact_command_reports(outcome):
    results, script, root = outcome
    out = json.loads(results["cmd.compact"]["stdout"])
    assert out["partition"] == "keeper" and len(out["merged"]) == 2
