"""Sequence rules through a real agent loop (scripted model, real tools, real SQLite)."""

from __future__ import annotations

import sqlite3
import time

import pytest

import clawkit_sequence
from clawkit import hookimpl
from clawkit.config import ConfigError
from clawkit.testing import ScriptedReply, call

TOOLS = ["read_file", "write_file", "list_dir", "deploy", "run_tests"]
READ_BEFORE_WRITE = {"tool": "write_file", "requires": ["read_file"], "match": "path", "message": "Read {path} before you overwrite it."}


pytestmark = pytest.mark.narrow(
    "the sequence rules' mechanics on stand-in tools: under the full install the policy asks before the guarded "
    "write_file and the directives plugin decides elevation (Vouch stands in), hiding what the rule itself did; "
    "test_sequence_e2e.py shows the rule with everything loaded")

class Vouch:
    """Stands for the directives plugin: vouches for the session's stored elevation this turn."""

    @hookimpl
    def message_received(self, ctx, message):
        until = ctx.session.get("elevated_until")
        if until:
            ctx.state["elevated_until"] = until


def seq_agent(make_agent, files, script, *rules, approver=None, **section):
    return make_agent(
        script,
        plugins=(clawkit_sequence, files, Vouch()),
        tools=TOOLS,
        plugin_config={"sequence": {"rules": list(rules), **section}},
        approver=approver,
    )


def tool_messages(agent, request_index=-1):
    return [m.content for m in agent.provider.requests[request_index].messages if m.role == "tool"]


def events(agent, session_id, kind):
    return [e["data"] for e in agent.store.events(session_id, kind)]


def test_blocks_then_allows_after_the_prerequisite(make_agent, files, workspace):
    (workspace / "a.txt").write_text("old")
    agent = seq_agent(
        make_agent,
        files,
        [
            ScriptedReply.calls(call("write_file", path="a.txt", content="new")),
            ScriptedReply.calls(call("read_file", path="a.txt")),
            ScriptedReply.calls(call("write_file", path="a.txt", content="new")),
            "done",
        ],
        READ_BEFORE_WRITE,
    )
    result = agent.run("update a.txt")
    assert [c["blocked"] for c in result.tool_calls] == [True, False, False]
    assert tool_messages(agent, 1)[0] == "Error: blocked by sequence: Read a.txt before you overwrite it."
    assert files.ran == [("read_file", "a.txt"), ("write_file", "a.txt")]
    assert (workspace / "a.txt").read_text() == "new"
    blocked = events(agent, result.session_id, "sequence.blocked")
    assert blocked == [{"tool": "write_file", "call_id": blocked[0]["call_id"], "rule": 0, "missing": ["read_file"], "count": 1,
                        "message": "Read a.txt before you overwrite it."}]


def test_the_matched_argument_must_be_the_same_resolved_path(make_agent, files, workspace):
    (workspace / "sub").mkdir()
    for name in ("a.txt", "b.txt"):
        (workspace / name).write_text(name)
    agent = seq_agent(
        make_agent,
        files,
        [
            ScriptedReply.calls(call("read_file", path="b.txt")),
            ScriptedReply.calls(call("write_file", path="a.txt", content="x")),  # b.txt was read, not a.txt
            ScriptedReply.calls(call("read_file", path="sub/../a.txt")),
            ScriptedReply.calls(call("write_file", path="./a.txt", content="x")),  # same file, spelled differently
            "done",
        ],
        READ_BEFORE_WRITE,
    )
    result = agent.run("go")
    assert [c["blocked"] for c in result.tool_calls] == [False, True, False, False]


def test_a_failed_prerequisite_does_not_count(make_agent, files):
    agent = seq_agent(
        make_agent,
        files,
        [ScriptedReply.calls(call("read_file", path="missing.txt")), ScriptedReply.calls(call("write_file", path="missing.txt", content="x")), "ok"],
        READ_BEFORE_WRITE,
    )
    result = agent.run("go")
    assert result.tool_calls[0]["is_error"] and result.tool_calls[1]["blocked"]


def test_existing_only_lets_new_files_be_written(make_agent, files, workspace):
    (workspace / "old.txt").write_text("keep")
    agent = seq_agent(
        make_agent,
        files,
        [ScriptedReply.calls(call("write_file", path="new.txt", content="x"), call("write_file", path="old.txt", content="x")), "ok"],
        {**READ_BEFORE_WRITE, "existing_only": True},
    )
    result = agent.run("go")
    assert [c["blocked"] for c in result.tool_calls] == [False, True]


def test_history_survives_a_restart(make_agent, files, workspace):
    (workspace / "a.txt").write_text("old")
    first = seq_agent(make_agent, files, [ScriptedReply.calls(call("read_file", path="a.txt")), "read it"], READ_BEFORE_WRITE)
    sid = first.run("read a.txt").session_id
    first.store.close()  # the process ends

    db = workspace / ".clawkit" / "state.db"
    rows = sqlite3.connect(db).execute("SELECT tool, arg, value FROM sequence_calls WHERE session_id = ?", (sid,)).fetchall()
    assert ("read_file", "path", str((workspace / "a.txt").resolve())) in rows

    again = seq_agent(
        make_agent,
        files,
        [
            ScriptedReply.calls(call("write_file", path="a.txt", content="new")),
            "written",
            ScriptedReply.calls(call("write_file", path="a.txt", content="other")),
            "blocked",
        ],
        READ_BEFORE_WRITE,
    )
    assert again.store is not first.store
    resumed = again.run("now write it", session_id=sid)
    assert not resumed.tool_calls[0]["blocked"]
    fresh = again.run("write in a new session")  # history is per session
    assert fresh.session_id != sid and fresh.tool_calls[0]["blocked"]


def test_elevated_session_bypasses_rules_that_allow_it(make_agent, files, workspace):
    (workspace / "a.txt").write_text("old")
    agent = seq_agent(
        make_agent,
        files,
        [ScriptedReply.calls(call("write_file", path="a.txt", content="x"), call("deploy", target="prod")), "ok"],
        READ_BEFORE_WRITE,
        {"tool": "deploy", "requires": ["run_tests"], "elevated_bypass": False, "message": "Run the tests first."},
    )
    session = agent.session()
    session.set("elevated_until", time.time() + 60)
    result = agent.run("go", session_id=session.id)
    assert [c["blocked"] for c in result.tool_calls] == [False, True]
    assert events(agent, session.id, "sequence.bypassed")[0]["reason"] == "elevated"


def test_expired_elevation_no_longer_bypasses(make_agent, files, workspace):
    (workspace / "a.txt").write_text("old")
    agent = seq_agent(make_agent, files, [ScriptedReply.calls(call("write_file", path="a.txt", content="x")), "ok"], READ_BEFORE_WRITE)
    session = agent.session()
    session.set("elevated_until", time.time() - 1)
    assert agent.run("go", session_id=session.id).tool_calls[0]["blocked"]


def test_advisory_rules_report_but_never_block(make_agent, files):
    agent = seq_agent(
        make_agent,
        files,
        [ScriptedReply.calls(call("deploy", target="prod")), "ok"],
        {"tool": "deploy", "requires": ["run_tests"], "enforce": False},
    )
    result = agent.run("go")
    assert files.ran == [("deploy", "prod")]
    violation = events(agent, result.session_id, "sequence.violation")[0]
    assert violation["message"] == "deploy needs run_tests to run first in this session; call it, then retry."


def test_the_same_blocked_call_repeated_stops_the_loop(make_agent, files, workspace):
    (workspace / "a.txt").write_text("old")
    write = ScriptedReply.calls(call("write_file", path="a.txt", content="new"))
    agent = seq_agent(make_agent, files, [write, write, "I could not write the file."], READ_BEFORE_WRITE)
    result = agent.run("go")
    # the second block halts: the kernel honours ctx.state["stop_turn"] and ends the turn with tools off
    assert result.stop_reason == "stopped_by_plugin"
    assert result.reply == "I could not write the file."
    assert len(agent.provider.requests) == 3 and agent.provider.requests[-1].tools == []
    second = tool_messages(agent, 2)[-1]
    assert second.startswith("Error: blocked by sequence: Stop: write_file was blocked 2 times")
    assert files.ran == []


def test_varied_retries_are_halted_for_the_rest_of_the_turn(make_agent, files, workspace):
    (workspace / "a.txt").write_text("old")
    agent = seq_agent(
        make_agent,
        files,
        [
            ScriptedReply.calls(call("write_file", path="a.txt", content="v1")),
            ScriptedReply.calls(call("write_file", path="a.txt", content="v2")),
            "giving up",
            ScriptedReply.calls(call("read_file", path="a.txt")),
            "read it",
        ],
        READ_BEFORE_WRITE,
    )
    result = agent.run("go")
    assert [c["blocked"] for c in result.tool_calls] == [True, True]
    assert result.stop_reason == "stopped_by_plugin" and result.reply == "giving up"
    assert "Do not call tools again in this turn" in tool_messages(agent, 2)[-1]
    assert events(agent, result.session_id, "sequence.stopped")[0]["count"] == 2
    nxt = agent.run("try again", session_id=result.session_id)  # a new turn starts fresh
    assert not nxt.tool_calls[0]["blocked"]


def test_any_mode_and_unmatched_rules(make_agent, files):
    agent = seq_agent(
        make_agent,
        files,
        [
            ScriptedReply.calls(call("deploy", target="prod")),
            ScriptedReply.calls(call("list_dir", path=".")),
            ScriptedReply.calls(call("deploy", target="prod")),
            "ok",
        ],
        {"tool": "deploy", "requires": ["run_tests", "list_dir"], "mode": "any"},
    )
    result = agent.run("go")
    assert [c["blocked"] for c in result.tool_calls] == [True, False, False]
    assert tool_messages(agent, 1)[0].endswith("deploy needs run_tests or list_dir to run first in this session; call it, then retry.")


def test_match_mapping_and_glob_tool_names(make_agent, files):
    agent = seq_agent(
        make_agent,
        files,
        [
            ScriptedReply.calls(call("run_tests", target="prod")),
            ScriptedReply.calls(call("deploy", target="staging"), call("deploy", target="prod")),
            "ok",
        ],
        {"tool": "dep*", "requires": ["run_*"], "match": {"target": "target"}},
    )
    result = agent.run("go")
    assert [c["blocked"] for c in result.tool_calls] == [False, True, False]


def test_an_exception_inside_the_gate_blocks_the_call(make_agent, files, workspace, monkeypatch):
    (workspace / "a.txt").write_text("old")

    def broken(self, *a, **k):
        raise sqlite3.OperationalError("database disk image is malformed")

    monkeypatch.setattr(clawkit_sequence.SequenceHistory, "seen", broken)
    agent = seq_agent(make_agent, files, [ScriptedReply.calls(call("write_file", path="a.txt", content="x")), "ok"], READ_BEFORE_WRITE)
    result = agent.run("go")
    assert result.tool_calls[0]["blocked"] and files.ran == []
    assert "failing closed" in tool_messages(agent)[0]


@pytest.mark.parametrize(
    "rule, problem",
    [
        ({"tool": "write_file", "requires": []}, "plugins.sequence.rules.0.requires"),
        ({"tool": "write_file", "requires": ["read_file"], "when": "always"}, "plugins.sequence.rules.0.when: unknown key"),
        ({"tool": "write_file", "requires": ["read_file"], "match": []}, "plugins.sequence.rules.0.match"),
    ],
)
def test_bad_rules_are_config_errors_naming_the_field(make_agent, files, rule, problem):
    with pytest.raises(ConfigError, match=problem.replace(".", r"\.")):
        seq_agent(make_agent, files, [], rule)


def test_no_rules_no_table_no_cost(make_agent, files, workspace):
    agent = seq_agent(make_agent, files, [ScriptedReply.calls(call("list_dir", path=".")), "ok"])
    agent.run("go")
    tables = {r[0] for r in agent.store.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "sequence_calls" not in tables
