"""A cheaper turn for the policy (issue 29 goal 5, s11). The audit records' screen: each JSON and text column
is screened on its own and a column text screened clean recently is not screened again — but never under other
secret values, and a text with something to redact is never remembered. A turn's end commits its own records,
not the ones other sessions queued since. A turn without a tool call does not resolve the workspace."""

from __future__ import annotations

import importlib
import time

import pytest

from clawkit_policy.gate import prepare

redact_mod = importlib.import_module("clawkit_policy.redact")


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("GATES_SCREEN_TOKEN", raising=False)
    redact_mod.refresh()
    redact_mod.clear_memo()
    yield
    redact_mod.refresh()


def test_the_spelt_out_screen_finds_every_screen_word():
    for word in redact_mod._SCREEN_LITERALS:
        assert redact_mod._screen(f"x {word.upper()} y", ()), word
    assert not redact_mod._screen('{"commands":[],"hosts":[],"paths":[],"risk":"safe"}', ())


def test_clean_columns_are_remembered_and_secrets_are_not(monkeypatch):
    clean = prepare([])
    out = clean({"reason": "deploy with swordfish-0123456789 now", "arguments": {}, "requested": {"paths": []}})
    assert out["reason"] == "deploy with swordfish-0123456789 now" and out["arguments"] == "{}"
    escaped, memo = redact_mod._screened
    assert "deploy with swordfish-0123456789 now" in memo and "{}" in memo
    monkeypatch.setenv("GATES_SCREEN_TOKEN", "swordfish-0123456789")
    redact_mod.refresh()  # new secret values: nothing screened under the old ones holds
    out = clean({"reason": "deploy with swordfish-0123456789 now", "arguments": {}})
    assert out["reason"] == "deploy with [REDACTED] now"
    assert "deploy with swordfish-0123456789 now" not in redact_mod._screened[1]
    out = clean({"reason": "ok", "data": {"api_key": "abcdef"}})
    assert out["data"] == {"api_key": "[REDACTED]"}
    assert not any("abcdef" in text for text in redact_mod._screened[1])


def test_the_screen_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(redact_mod, "MEMO_SIZE", 8)
    for i in range(50):
        assert redact_mod.screened_clean([f"reason number {i}", "{}"])
    memo = redact_mod._screened[1]
    assert len(memo) <= 9 and "reason number 49" in memo and "reason number 0" not in memo


def test_a_turn_end_commits_its_own_records_and_leaves_later_ones_to_the_next_flush(tmp_path, ledger_files):
    """LedgerWriter.flush_through: nothing to do when the turn's records are committed already; everything
    queued (in order) when they are not."""
    conn, writer = ledger_files.writer(tmp_path / "a.db")
    try:
        mine = writer.submit("event", {"session_id": "a", "decision": "x"})
        assert mine == 1
        writer.flush_through(mine)
        assert ledger_files.count(tmp_path / "a.db") == 1
        other = writer.submit("event", {"session_id": "b", "decision": "y"})
        writer._due = time.monotonic() + 600  # the writer thread leaves it alone: only a flush commits it
        writer.flush_through(mine)  # mine is committed: b's record waits for the next flush
        assert writer.pending == 1 and ledger_files.count(tmp_path / "a.db") == 1
        late = writer.submit("event", {"session_id": "a", "decision": "z"})
        assert late == other + 1
        writer.flush_through(late)  # not yet committed: everything queued before it goes too, in order
        assert writer.pending == 0 and ledger_files.count(tmp_path / "a.db") == 3
        assert [r[0] for r in conn.execute("SELECT session_id FROM policy_audit ORDER BY seq")] == ["a", "b", "a"]
    finally:
        writer.close()
        conn.close()


def test_a_turn_without_a_tool_call_does_not_resolve_the_workspace_and_one_with_does(build_agent, monkeypatch):
    import clawkit_policy
    import clawkit_tools
    from clawkit.testing import ScriptedReply, call

    gate = importlib.import_module("clawkit_policy.gate")
    seen = []
    real = gate.workspace_real
    monkeypatch.setattr(gate, "workspace_real", lambda ws: (seen.append(ws), real(ws))[1])
    agent = build_agent(["hello", ScriptedReply.calls(call("read_file", path="a.txt")), "done"],
                        plugins=(clawkit_tools, clawkit_policy), tools=["read_file"])
    first = agent.run("hi")
    assert first.reply == "hello" and seen == []
    agent.run("read it", session_id=first.session_id)
    assert len(seen) == 1  # once for the turn, at its first tool call


def test_a_record_s_values_are_those_of_before():
    """AuditLedger._values (a template copied and updated): JSON columns canonical (a bare bool too), other
    bools as integers, unknown fields refused."""
    from clawkit_policy.ledger import AuditLedger, Canonical

    values = AuditLedger._values("decision", {"data": True, "requested": {"b": 1, "a": [True]}, "approval_required": False,
                                              "arguments": Canonical('{"x":1}'), "reason": "r", "ts": 5.0})
    assert values["data"] == "true" and values["requested"] == '{"a":[true],"b":1}' and values["arguments"] == '{"x":1}'
    assert values["approval_required"] == 0 and type(values["approval_required"]) is int
    assert values["kind"] == "decision" and values["ts"] == 5.0 and values["granted"] is None and values["seq"] is None
    with pytest.raises(TypeError, match="unknown audit fields: bogus"):
        AuditLedger._values("decision", {"bogus": 1})


def test_a_call_naming_no_path_or_command_does_not_resolve_the_workspace(build_agent, monkeypatch):
    """The workspace's real path (a stat: a system call gives the GIL away) is resolved for a call that names a
    path or a command, or a tool a grant names; a call of a tool without either (``ping``) is decided without it,
    and its record and decision are the same."""
    import clawkit_policy
    import clawkit_tools
    from clawkit import hookimpl
    from clawkit.testing import ScriptedReply, call

    class Ping:
        @hookimpl
        def register_tools(self, register, agent):
            def ping() -> str:
                """Answer pong."""
                return "pong"

            register(ping)

    gate = importlib.import_module("clawkit_policy.gate")
    seen = []
    real = gate.workspace_real
    monkeypatch.setattr(gate, "workspace_real", lambda ws: (seen.append(ws), real(ws))[1])
    agent = build_agent([ScriptedReply.calls(call("ping")), "pong it is", ScriptedReply.calls(call("read_file", path="a.txt")),
                         "done"], plugins=(clawkit_tools, clawkit_policy, Ping()), tools=["ping", "read_file"])
    first = agent.run("ping")
    assert first.reply == "pong it is" and seen == []
    (rec,) = [r for r in clawkit_policy.ledger_for(agent.store).records(kind="decision") if r["tool"] == "ping"]
    assert rec["decision"] == "allow" and rec["requested"] == {"paths": [], "hosts": [], "commands": [], "risk": "safe"}
    agent.run("read it", session_id=first.session_id)
    assert len(seen) == 1  # a path: resolved, once for the turn


def test_a_call_naming_nothing_is_recorded_from_a_template_with_the_same_columns():
    """The ``requested`` column of a call that names no path, host or command is one canonical text per risk
    level (not a dict built and serialised per call); a record whose other columns hold a secret is redacted
    value by value, that column included, and stores the same text."""
    from clawkit.types import Risk
    from clawkit_policy.gate import _asked_nothing, prepare
    from clawkit_policy.ledger import AuditLedger, canonical
    from clawkit_policy.scope import Requested

    expected = canonical({**Requested().as_dict(), "risk": "guarded"})
    assert _asked_nothing(Risk.GUARDED) == expected and _asked_nothing(Risk.GUARDED) is _asked_nothing(Risk.GUARDED)
    clean = prepare([])
    for reason in ("safe tool within its scope", "password=hunter22 was typed"):
        values = AuditLedger._values("decision", clean({"requested": _asked_nothing(Risk.GUARDED), "reason": reason,
                                                        "arguments": {}, "granted": {}}))
        assert values["requested"] == expected and values["arguments"] == "{}" and values["granted"] == "{}"
        assert "hunter22" not in values["reason"]
