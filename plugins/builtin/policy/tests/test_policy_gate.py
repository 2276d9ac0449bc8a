"""The policy gate: deny by default, scopes and grants, risk-driven approvals, elevation, fail-closed."""

from __future__ import annotations

import time

import pytest


import clawkit_policy
import clawkit_tools
from clawkit import hookimpl
from clawkit.testing import ScriptedReply, call, unwrapped
from clawkit_policy import callback_approver, ledger_for

PLUGINS = (clawkit_tools, clawkit_policy)


class Approver:
    """Records every question; answers from a list (default yes)."""

    def __init__(self, *answers: bool):
        self.answers = list(answers)
        self.asked: list[tuple[str, dict, str]] = []

    def __call__(self, call, reason, ctx):
        self.asked.append((call.name, dict(call.arguments), reason))
        return self.answers.pop(0) if self.answers else True


def tool_results(agent, session_id):
    """What each tool returned (without the full install's data wrapper)."""
    return [unwrapped(m.content) for m in agent.store.messages(session_id) if m.role == "tool"]


def test_unlisted_tool_never_runs(build_agent, workspace):
    agent = build_agent([ScriptedReply.calls(call("shell_exec", command="touch pwned")), "ok"],
                        plugins=PLUGINS, tools=["read_file"], approver=Approver())
    res = agent.run("go")
    assert not (workspace / "pwned").exists()
    assert tool_results(agent, res.session_id)[0].startswith("Error: unknown tool 'shell_exec'")


def test_safe_runs_without_anyone_to_ask(build_agent, workspace):
    (workspace / "a.txt").write_text("alpha")
    agent = build_agent([ScriptedReply.calls(call("read_file", path="a.txt")), "ok"], plugins=PLUGINS, tools=["*"])
    res = agent.run("go")
    assert tool_results(agent, res.session_id) == ["alpha"]


def test_guarded_asks_once_per_session_per_exact_call(build_agent, workspace):
    approver = Approver()
    same = call("write_file", path="a.txt", content="one")
    agent = build_agent([ScriptedReply.calls(same), ScriptedReply.calls(same),
                         ScriptedReply.calls(call("write_file", path="a.txt", content="two")), "ok",
                         ScriptedReply.calls(same), "ok"],
                        plugins=PLUGINS, tools=["*"], approver=approver)
    res = agent.run("write")
    assert [a[1]["content"] for a in approver.asked] == ["one", "two"]  # the repeat of "one" was not asked
    assert "guarded" in approver.asked[0][2]
    agent.run("again", session_id=None)  # a new session asks again
    assert len(approver.asked) == 3
    assert (workspace / "a.txt").read_text() == "one"


def test_guarded_approval_expires(build_agent, workspace):
    approver = Approver()
    same = call("write_file", path="a.txt", content="one")
    agent = build_agent([ScriptedReply.calls(same), "ok", ScriptedReply.calls(same), "ok"], plugins=PLUGINS, tools=["*"],
                        approver=approver, sections={"policy": {"approval_ttl": 0.05}})
    sid = agent.run("write").session_id
    time.sleep(0.1)
    agent.run("write again", session_id=sid)
    assert len(approver.asked) == 2


def test_guarded_approval_per_tool_mode(build_agent, workspace):
    approver = Approver()
    agent = build_agent([ScriptedReply.calls(call("write_file", path="a.txt", content="1")),
                         ScriptedReply.calls(call("write_file", path="b.txt", content="2")), "ok"],
                        plugins=PLUGINS, tools=["*"], approver=approver, sections={"policy": {"guarded_approval": "tool"}})
    agent.run("go")
    assert len(approver.asked) == 1 and (workspace / "b.txt").exists()


def test_unsafe_asks_every_time_and_denial_is_a_clear_error(build_agent, workspace):
    approver = Approver(True, False)
    same = call("shell_exec", command="echo hi >> log.txt")
    agent = build_agent([ScriptedReply.calls(same), ScriptedReply.calls(same), "ok"],
                        plugins=PLUGINS, tools=["*"], approver=approver,
                        sections={"sandbox": {"mode": "off"}})  # unjailed: its output can leave the machine
    res = agent.run("go")
    assert len(approver.asked) == 2 and all("unsafe" in a[2] for a in approver.asked)
    assert (workspace / "log.txt").read_text() == "hi\n"
    second = tool_results(agent, res.session_id)[1]
    # the first command's output is untrusted content (provenance): the second call's reason says so, and its risk
    assert second.startswith("Error: not approved (policy: ") and "shell_exec (unsafe)" in second
    assert "denied by approver" in second


def test_non_interactive_run_denies(build_agent, workspace):
    agent = build_agent([ScriptedReply.calls(call("write_file", path="a.txt", content="x"),
                                             call("shell_exec", command="touch b")), "ok"],
                        plugins=PLUGINS, tools=["*"], approver=None)
    res = agent.run("go")
    results = tool_results(agent, res.session_id)
    assert all("denied by nobody (non-interactive run)" in r for r in results)
    assert not (workspace / "a.txt").exists() and not (workspace / "b").exists()


def test_approver_timeout_becomes_a_clear_error(build_agent, workspace):
    def slow(call, reason, ctx):
        time.sleep(0.5)
        return True

    agent = build_agent([ScriptedReply.calls(call("shell_exec", command="touch b")), "ok"], plugins=PLUGINS,
                        tools=["*"], approver=callback_approver(slow, timeout=0.05))
    res = agent.run("go")
    assert "no answer within 0.05 s" in tool_results(agent, res.session_id)[0]
    assert not (workspace / "b").exists()


class Vouch:
    """Stands for the directives plugin: vouches for the session's stored elevation this turn."""

    @hookimpl
    def message_received(self, ctx, message):
        until = ctx.session.get("elevated_until")
        if until:
            ctx.state["elevated_until"] = until


def test_raw_session_metadata_elevates_nothing(build_agent, workspace):
    # without a plugin vouching for it (directives removed, allow_elevated revoked), stored elevation is ignored
    agent = build_agent([ScriptedReply.calls(call("shell_exec", command="echo elevated")), "ok"], plugins=PLUGINS,
                        tools=["*"], approver=None, sections={"directives": {"enabled": False}})
    session = agent.session()
    session.set("elevated_until", time.time() + 600)
    agent.run("go", session_id=session.id)
    assert "denied by nobody" in tool_results(agent, session.id)[-1]


@pytest.mark.narrow("Vouch stands in for the directives plugin, which decides elevation itself under the full install "
                    "(its own tests drive /elevated end to end)")
def test_elevated_auto_approves_within_scope_only(build_agent, workspace, tmp_path):
    (tmp_path / "outside.txt").write_text("out")
    agent = build_agent([ScriptedReply.calls(call("shell_exec", command="echo elevated"),
                                             call("read_file", path=str(tmp_path / "outside.txt"))), "ok",
                         ScriptedReply.calls(call("shell_exec", command="echo later")), "ok"],
                        plugins=PLUGINS + (Vouch(),), tools=["*"], approver=None)
    session = agent.session()
    session.set("elevated_until", time.time() + 60)
    agent.run("go", session_id=session.id)
    shell, outside = tool_results(agent, session.id)
    assert shell == "exit code 0\nelevated\n"
    assert outside.startswith("Error: not approved") and "outside the workspace" in outside  # never more than the scope
    session.set("elevated_until", time.time() - 1)
    agent.run("again", session_id=session.id)
    assert "denied by nobody" in tool_results(agent, session.id)[-1]


def test_yaml_grants_widen_scope_per_tool(build_agent, workspace, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("granted data")
    agent = build_agent(
        [ScriptedReply.calls(call("read_file", path=str(data / "x.txt")), call("list_dir", path=str(data)),
                             call("shell_exec", command="echo pre-approved"), call("shell_exec", command="echo hi; touch pwned"),
                             call("shell_exec", command=["echo", "argv ok"])), "ok"],
        plugins=PLUGINS, tools=["*"], approver=None,
        sections={"policy": {"grants": [{"tools": ["read_file"], "paths": [str(data)]},
                                         {"tools": ["shell_exec"], "commands": ["echo *"]}]}},
    )
    res = agent.run("go")
    read, listing, pre, chained, argv = tool_results(agent, res.session_id)
    assert read == "granted data"
    assert listing.startswith("Error: not approved")  # the grant names read_file only
    assert pre == "exit code 0\npre-approved\n"
    assert chained.startswith("Error: not approved") and not (workspace / "pwned").exists()
    assert argv == "exit code 0\nargv ok\n"


def test_step_grant_lasts_one_step_unless_configured(build_agent, workspace, tmp_path):
    (tmp_path / "o.txt").write_text("outside")
    read = call("read_file", path=str(tmp_path / "o.txt"))
    approver = Approver()
    agent = build_agent([ScriptedReply.calls(read), ScriptedReply.calls(read), "ok"], plugins=PLUGINS, tools=["*"],
                        approver=approver)
    res = agent.run("go")
    assert tool_results(agent, res.session_id) == ["outside", "outside"] and len(approver.asked) == 2
    assert "needs a capability beyond its scope" in approver.asked[0][2]

    approver2 = Approver()
    agent2 = build_agent([ScriptedReply.calls(read), ScriptedReply.calls(read), "ok"], plugins=PLUGINS, tools=["*"],
                         approver=approver2, sections={"policy": {"step_grant_scope": "persistent"}})
    agent2.run("go")
    assert len(approver2.asked) == 1
    agent3 = build_agent([ScriptedReply.calls(read), "ok"], plugins=PLUGINS, tools=["*"], approver=None,
                         sections={"policy": {"step_grant_scope": "persistent"}})
    res3 = agent3.run("later")
    assert tool_results(agent3, res3.session_id) == ["outside"]  # stored for the agent, no approver needed


def test_kernel_filesystems_are_never_granted(build_agent, workspace):
    agent = build_agent([ScriptedReply.calls(call("read_file", path="/proc/self/environ")), "ok"], plugins=PLUGINS,
                        tools=["*"], approver=Approver(), sections={"policy": {"grants": [{"paths": ["/"]}]}})
    res = agent.run("go")
    out = tool_results(agent, res.session_id)[0]
    assert out.startswith("Error: blocked by policy: refused: /proc/") and "never granted" in out


def test_step_grants_off_blocks(build_agent, workspace, tmp_path):
    agent = build_agent([ScriptedReply.calls(call("read_file", path=str(tmp_path))), "ok"], plugins=PLUGINS,
                        tools=["*"], approver=Approver(), sections={"policy": {"step_grants": False}})
    res = agent.run("go")
    assert "blocked by policy: needs a capability grant" in tool_results(agent, res.session_id)[0]


class Exploding:
    @hookimpl
    def before_tool_call(self, ctx, call):
        raise RuntimeError("gate bug")


def test_an_exception_inside_any_gate_blocks(build_agent, workspace, monkeypatch):
    agent = build_agent([ScriptedReply.calls(call("write_file", path="a.txt", content="x")), "ok"],
                        plugins=PLUGINS + (Exploding(),), tools=["*"], approver=Approver())
    res = agent.run("go")
    assert "failed (RuntimeError: gate bug); failing closed" in tool_results(agent, res.session_id)[0]
    assert not (workspace / "a.txt").exists()

    def broken(self, records):
        raise OSError("disk full")

    # audit records are committed by a writer thread; once a write fails, every later call is blocked
    monkeypatch.setattr(clawkit_policy.AuditLedger, "append_many", broken)
    agent2 = build_agent([ScriptedReply.calls(call("read_file", path="x")), "ok",
                          ScriptedReply.calls(call("read_file", path="x")), "ok"], plugins=PLUGINS, tools=["*"])
    sid = agent2.run("go").session_id
    agent2.run("again", session_id=sid)
    last = tool_results(agent2, sid)[-1]
    assert "the policy gate failed (RuntimeError: the audit ledger cannot be written: disk full)" in last


def test_secrets_never_reach_the_ledger_or_the_transcript(build_agent, workspace, monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", "acme-live-0123456789")
    import importlib

    importlib.import_module("clawkit_policy.redact").refresh()  # the env changed in-process
    (workspace / ".env").write_text("ACME_API_KEY=acme-live-0123456789\nOTHER=sk-abcdefghijklmnopqrstuv\n")
    agent = build_agent([ScriptedReply.calls(call("read_file", path=".env"),
                                             call("write_file", path="cfg.txt", content="token: ghp_abcdefghijklmnopqrstuvwx")), "ok"],
                        plugins=PLUGINS, tools=["*"], approver=Approver())
    res = agent.run("go")
    transcript = "\n".join(tool_results(agent, res.session_id))
    assert "acme-live-0123456789" not in transcript and "sk-abcdefghijklmnopqrstuv" not in transcript
    assert "[REDACTED]" in transcript
    rows = agent.store.conn.execute("SELECT * FROM policy_audit").fetchall()
    dump = repr(rows)
    assert "ghp_abcdefghijklmnopqrstuvwx" not in dump and "acme-live" not in dump
    assert (workspace / "cfg.txt").read_text() == "token: ghp_abcdefghijklmnopqrstuvwx"  # the tool itself got the real value


class Reporter:
    """Stands in for the shield/sequence/directives plugins: reports decisions as events."""

    @hookimpl
    def message_received(self, ctx, message):
        ctx.emit("directive.change", name="verbose", value="on")

    @hookimpl
    def before_tool_call(self, ctx, call):
        ctx.emit("shield.detection", call_id=call.id, tool=call.name, score=0.8, kind="injection")
        ctx.emit("sequence.blocked", call_id=call.id, tool=call.name, rule="read first")
        ctx.emit("unrelated.event", x=1)


def test_ledger_records_every_decision_execution_and_security_event(build_agent, workspace):
    (workspace / "a.txt").write_text("a")
    agent = build_agent([ScriptedReply.calls(call("read_file", path="a.txt"), call("shell_exec", command="true")), "ok"],
                        plugins=PLUGINS + (Reporter(),), tools=["*"], approver=Approver(False))
    res = agent.run("go")
    ledger = ledger_for(agent.store)
    recs = ledger.records(session=res.session_id)
    kinds = [(r["kind"], r["tool"], r["decision"]) for r in recs]
    assert ("event", None, "directive.change") in kinds
    assert ("decision", "read_file", "allow") in kinds
    assert ("decision", "shell_exec", "require_approval") in kinds
    assert ("approval", "shell_exec", "denied") in kinds
    assert ("execution", "read_file", "executed") in kinds
    assert sum(1 for k in kinds if k[2] == "shield.detection") == 2
    assert sum(1 for k in kinds if k[2] == "sequence.blocked") == 2
    assert not any(k[2] == "unrelated.event" or (k[2] or "").startswith("session.") for k in kinds)
    run = {r["run_id"] for r in recs if r["kind"] != "event" or r["decision"] != "directive.change"}
    assert run == {res.run_id}
    dec = next(r for r in recs if r["kind"] == "decision" and r["tool"] == "shell_exec")
    assert dec["trace_id"] and dec["task_id"] and dec["step_id"] and dec["approval_required"] == 1
    assert dec["requested"]["commands"] == ["true"] and dec["requested"]["risk"] == "unsafe"
    appr = next(r for r in recs if r["kind"] == "approval")
    assert appr["approval_result"] == "denied" and appr["approval_by"] == "approver"
    exe = next(r for r in recs if r["kind"] == "execution")
    assert exe["status"] == "ok" and exe["ended"] >= exe["started"]
    assert ledger.verify().ok


def test_call_hash_is_sha256_of_the_name_and_the_sorted_compact_json_arguments():
    """Stored approvals bind to this hash: it must not change when the encoder behind it does."""
    import datetime
    import hashlib
    import json

    from clawkit_policy.scope import call_hash

    for args in ({"b": 1, "a": [1.5, None, True]}, {"path": "ünï/cødé", "n": {"z": 1e-7, "y": "\u2028"}},
                 {"when": datetime.date(2026, 1, 2)}, {}):
        text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        assert call_hash("tool", args) == hashlib.sha256(f"tool\n{text}".encode()).hexdigest()


def test_the_workspace_real_path_is_resolved_again_once_the_workspace_is_re_pointed(tmp_path):
    import os

    from clawkit_policy.gate import workspace_real

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    link = tmp_path / "ws"
    link.symlink_to(tmp_path / "a")
    assert workspace_real(str(link)) == os.path.realpath(tmp_path / "a")
    assert workspace_real(str(link)) == os.path.realpath(tmp_path / "a")  # remembered
    link.unlink()
    link.symlink_to(tmp_path / "b")
    assert workspace_real(str(link)) == os.path.realpath(tmp_path / "b")
    link.unlink()
    (tmp_path / "a").rename(tmp_path / "old")
    (tmp_path / "a").mkdir()  # a new directory where the remembered real path pointed
    link.symlink_to(tmp_path / "a")
    assert workspace_real(str(link)) == os.path.realpath(tmp_path / "a")
    assert os.stat(workspace_real(str(link))).st_ino == os.stat(tmp_path / "a").st_ino
