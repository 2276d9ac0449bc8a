"""The full-install twin of test_policy_gate.py's narrowed elevation test (issue 30 item 13): the real
directives plugin, not a stand-in, turns ``/elevated on`` into auto-approval — within scope only."""

from __future__ import annotations

from clawkit.testing import ScriptedReply, call, unwrapped


def test_elevated_auto_approves_within_scope_only_with_everything_loaded(make_agent, workspace, tmp_path):
    (tmp_path / "outside.txt").write_text("out")
    agent = make_agent([ScriptedReply.calls(call("shell_exec", command="echo elevated"),
                                            call("read_file", path=str(tmp_path / "outside.txt"))), "ok"],
                       tools=["*"], approver=None, plugin_config={"directives": {"allow_elevated": True}})
    assert agent.test_install == "full"
    agent.channel = "chat"  # a person typing /elevated on alone, on the channel that may elevate
    sid = agent.run("/elevated on").session_id
    agent.run("go", session_id=sid)
    shell, outside = [unwrapped(m.content) for m in agent.store.messages(sid) if m.role == "tool"]
    assert "exit code 0\nelevated\n" in shell  # no one was there to ask: elevation approved it
    assert outside.startswith("Error: not approved") and "outside the workspace" in outside  # never more than the scope
