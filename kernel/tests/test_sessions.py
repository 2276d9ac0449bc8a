"""Sessions in SQLite: written as the turn progresses, resumable, exportable, crash-safe."""

from __future__ import annotations

import pytest

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from clawkit.sessions import SessionStore
from clawkit.testing import ScriptedReply, call
from clawkit.types import Message, Usage


def test_store_roundtrip_and_export(tmp_path):
    store = SessionStore(tmp_path / "s.db")
    sid = store.create("agent-a")
    store.append(sid, Message(role="user", content="hi"))
    store.append(sid, Message(role="assistant", content="", tool_calls=[{"id": "c1", "name": "t", "arguments": {"a": 1}}]))
    store.record_usage(sid, "run_1", "m", Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7, cost=0.01))
    store.event(sid, "run_1", "turn.end", {"x": 1}, time.time())
    msgs = store.messages(sid)
    assert msgs[1].tool_calls[0].arguments == {"a": 1}
    assert store.usage_totals(sid)["total_tokens"] == 7
    lines = [json.loads(line) for line in store.export_jsonl(sid)]
    assert [x["type"] for x in lines] == ["session", "message", "message", "event"]
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_corrupted_metadata_reads_as_empty(tmp_path):
    store = SessionStore(tmp_path / "s.db")
    sid = store.create("a")
    store.conn.execute("UPDATE sessions SET metadata = '{not json' WHERE id = ?", (sid,))
    assert store.load_metadata(sid) == {}


def test_session_resumes_from_disk_in_a_new_agent(make_agent, workspace):
    a1 = make_agent(["first answer"])
    r1 = a1.run("remember 42")
    a1.store.close()
    a2 = make_agent(["second answer"])
    a2.run("what number?", session_id=r1.session_id)
    assert [m.content for m in a2.provider.requests[0].messages] == ["remember 42", "first answer", "what number?"]


def test_usage_recorded_per_call(make_agent):
    def box():
        """A tool."""
        return "x"

    from clawkit import hookimpl

    class P:
        @hookimpl
        def register_tools(self, register, agent):
            register(box, name="box")

    agent = make_agent([ScriptedReply.calls(call("box")), "done"], plugins=(P(),), tools=["box"])
    r = agent.run("go")
    assert agent.store.usage_totals(r.session_id)["calls"] == 2
    assert r.usage.total_tokens == agent.store.usage_totals(r.session_id)["total_tokens"]


CRASHER = textwrap.dedent(
    """
    import sys, time
    from clawkit import hookimpl
    from clawkit.config import validate_agent
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager
    from clawkit.testing import ScriptedProvider, ScriptedReply, call

    def slow_tool() -> str:
        '''Takes forever.'''
        print("TOOL STARTED", flush=True)
        time.sleep(60)
        return "never"

    class P:
        @hookimpl
        def register_tools(self, register, agent):
            register(slow_tool)

    cfg = validate_agent({"name": "crashy", "model": "x", "workspace": sys.argv[1], "tools": ["slow_tool"]}, "<t>", {})
    agent = Agent(cfg, pm=get_plugin_manager(extra=(P(),), load_entry_points=False),
                  provider=ScriptedProvider([ScriptedReply.calls(call("slow_tool"), text="working on it")]))
    agent.run("please run the slow tool", session_id="ses_crash")
    """
)


def test_sigkill_mid_turn_loses_nothing_written_and_resumes(tmp_path, make_agent, workspace):
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER)
    proc = subprocess.Popen([sys.executable, str(script), str(workspace)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "TOOL STARTED"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    store = SessionStore(workspace / ".clawkit" / "state.db")
    msgs = store.messages("ses_crash")
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].content == "working on it" and msgs[1].tool_calls[0].name == "slow_tool"
    store.close()
    # resume: the dangling tool call gets no result, so the next turn must still be valid for the model
    agent = make_agent(["resumed fine"])
    r = agent.run("are you there?", session_id="ses_crash")
    assert r.reply == "resumed fine"
    sent = agent.provider.requests[0].openai_messages()
    call_ids = {c["id"] for m in sent if m.get("tool_calls") for c in m["tool_calls"]}
    answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert call_ids == answered


def test_repair_interrupted_closes_dangling_calls_in_place():
    from clawkit.sessions import repair_interrupted
    from clawkit.types import ToolCall, ToolResult

    c1, c2 = ToolCall(id="a", name="t"), ToolCall(id="b", name="t")
    msgs = [
        Message(role="user", content="go"),
        Message(role="assistant", tool_calls=[c1, c2]),
        Message(role="tool", content="ok", tool_result=ToolResult(call_id="a", name="t", content="ok")),
        Message(role="user", content="again"),
    ]
    fixed = repair_interrupted(msgs)
    assert [m.role for m in fixed] == ["user", "assistant", "tool", "tool", "user"]
    assert fixed[3].tool_result.call_id == "b" and fixed[3].tool_result.is_error
    assert repair_interrupted(fixed) == fixed


@pytest.mark.narrow("compares the exact session metadata a probe writes; installed plugins keep keys there too")
def test_metadata_writes_coalesce_and_commit_with_the_turn(make_agent):
    import sqlite3

    from clawkit import hookimpl

    class Marks:
        @hookimpl
        def message_received(self, ctx, message):
            ctx.session.set("a", 1)
            ctx.session.set("a", 2)
            items = ctx.session.get("items", [])
            items.append(message.content)  # changed in place, then set again
            ctx.session.set("items", items)

    agent = make_agent(["ok", "ok"], plugins=(Marks(),))
    r = agent.run("one")
    agent.run("two", session_id=r.session_id)
    other = sqlite3.connect(agent.store.path)
    (raw,) = other.execute("SELECT metadata FROM sessions WHERE id = ?", (r.session_id,)).fetchone()
    assert json.loads(raw) == {"a": 2, "items": ["one", "two"]}
