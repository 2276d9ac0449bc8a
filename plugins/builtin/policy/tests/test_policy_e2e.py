"""The policy with the model in charge: the loopback model_server drives the calls through litellm."""

from __future__ import annotations

import sqlite3

import clawkit_policy
import clawkit_tools
from clawkit import hookimpl
from clawkit.testing.server import Reply
from clawkit_policy import AuditLedger, ledger_for

PLUGINS = (clawkit_tools, clawkit_policy)


def tool_msgs(request):
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def test_unsafe_every_time_and_changed_arguments_need_new_approval(llm_agent, model_server, workspace):
    asked = []

    def approver(call, reason, ctx):
        asked.append((call.name, dict(call.arguments)))
        return True

    agent = llm_agent(
        Reply.tool_calls([("shell_exec", {"command": "echo a >> log"})]),
        Reply.tool_calls([("shell_exec", {"command": "echo a >> log"})]),
        Reply.tool_calls([("write_file", {"path": "f.txt", "content": "v1"})]),
        Reply.tool_calls([("write_file", {"path": "f.txt", "content": "v1"})]),
        Reply.tool_calls([("write_file", {"path": "f.txt", "content": "v2"})]),
        "All done.",
        plugins=PLUGINS, tools=["shell_exec", "write_file"], approver=approver,
    )
    assert agent.run("work").reply == "All done."
    assert asked == [
        ("shell_exec", {"command": "echo a >> log"}),        # unsafe: asked…
        ("shell_exec", {"command": "echo a >> log"}),        # …every time, identical or not
        ("write_file", {"path": "f.txt", "content": "v1"}),  # guarded: once for this exact call
        ("write_file", {"path": "f.txt", "content": "v2"}),  # a changed argument needs a new approval
    ]
    assert (workspace / "log").read_text() == "a\na\n" and (workspace / "f.txt").read_text() == "v2"
    recs = ledger_for(agent.store).records(kind="approval")
    hashes = [r["call_hash"] for r in recs if r["tool"] == "write_file"]
    assert len(hashes) == 2 and hashes[0] != hashes[1]


def test_non_interactive_run_denies_and_the_model_is_told(llm_agent, model_server, workspace):
    agent = llm_agent(Reply.tool_calls([("shell_exec", {"command": "touch pwned"})]), "Understood.",
                      plugins=PLUGINS, tools=["shell_exec"], approver=None)
    assert agent.run("go").reply == "Understood."
    (msg,) = tool_msgs(model_server.requests[1])
    assert msg.startswith("Error: not approved") and "denied by nobody (non-interactive run)" in msg
    assert not (workspace / "pwned").exists()


def test_audit_chain_after_a_real_run_verifies_and_catches_tampering(llm_agent, model_server, workspace):
    (workspace / "a.txt").write_text("alpha")
    agent = llm_agent(
        Reply.tool_calls([("read_file", {"path": "a.txt"}), ("write_file", {"path": "b.txt", "content": "beta"})]),
        "ok", plugins=PLUGINS, tools=["*"], approver=lambda c, r, ctx: True,
    )
    agent.run("go")
    path = agent.store.path
    kinds = [r["kind"] for r in ledger_for(agent.store).records()]
    assert kinds.count("decision") == 2 and kinds.count("execution") == 2 and kinds.count("approval") == 1
    for sql in ("UPDATE policy_audit SET status = 'ok' WHERE kind = 'approval'",
                "DELETE FROM policy_audit WHERE seq = 2",
                "UPDATE policy_audit SET seq = seq + 100 WHERE seq = 1"):
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("SAVEPOINT t")
        assert AuditLedger(conn, create=False).verify().ok
        conn.execute(sql)
        assert not AuditLedger(conn, create=False).verify().ok, sql
        conn.execute("ROLLBACK TO t")
        conn.close()


class Crashing:
    @hookimpl
    def before_tool_call(self, ctx, call):
        if call.name == "write_file":
            raise ValueError("sequence table unreadable")


def test_an_exception_in_a_gate_blocks_and_the_model_recovers(llm_agent, model_server, workspace):
    agent = llm_agent(Reply.tool_calls([("write_file", {"path": "x.txt", "content": "x"})]), "I could not write it.",
                      plugins=PLUGINS + (Crashing(),), tools=["*"], approver=lambda c, r, ctx: True)
    assert agent.run("write").reply == "I could not write it."
    (msg,) = tool_msgs(model_server.requests[1])
    assert "failed (ValueError: sequence table unreadable); failing closed" in msg
    assert not (workspace / "x.txt").exists()
    events = [r["decision"] for r in ledger_for(agent.store).records(kind="event")]
    assert "tool.blocked" in events
