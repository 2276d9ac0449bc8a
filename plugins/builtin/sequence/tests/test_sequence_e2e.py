"""Sequence rules end to end: the model is the loopback ``model_server`` reached through
the real litellm provider; it drives the calls and sees the block messages."""

from __future__ import annotations

import clawkit_sequence
from clawkit.testing import unwrapped
from clawkit.testing.server import Reply

RULE = {"tool": "write_file", "requires": ["read_file"], "match": "path", "message": "Read {path} before you overwrite it."}


def tool_contents(request):
    return [m["content"] for m in request.messages if m.get("role") == "tool"]


def test_model_is_blocked_then_recovers_by_reading_first(model_server, live_agent, files, workspace):
    (workspace / "notes.md").write_text("# notes\n")
    model_server.script(
        Reply.tool_calls([("write_file", {"path": "notes.md", "content": "# new\n"})]),
        Reply.tool_calls([("read_file", {"path": "notes.md"})]),
        Reply.tool_calls([("write_file", {"path": "notes.md", "content": "# new\n"})]),
        "Updated notes.md.",
    )
    # the full install: the real file tools, the policy (a person approves the guarded write), the shield ...
    agent = live_agent(model_server, plugin_config={"sequence": {"rules": [RULE]}}, approver=lambda *a: True,
                       tools=["read_file", "write_file"])
    assert agent.test_install == "full"
    result = agent.run("rewrite notes.md")
    assert result.reply == "Updated notes.md."
    assert [c["blocked"] for c in result.tool_calls] == [True, False, False]
    assert tool_contents(model_server.requests[1]) == ["Error: blocked by sequence: Read notes.md before you overwrite it."]
    assert "Error" not in unwrapped(tool_contents(model_server.requests[3])[-1])
    assert (workspace / "notes.md").read_text() == "# new\n"


def test_a_model_that_keeps_retrying_is_stopped(model_server, live_agent, files, workspace):
    (workspace / "notes.md").write_text("# notes\n")
    write = Reply.tool_calls([("write_file", {"path": "notes.md", "content": "x"})])
    model_server.script(write, write, "I cannot do that without reading it first.")
    agent = live_agent(model_server, plugins=(clawkit_sequence, files), plugin_config={"sequence": {"rules": [RULE]}})
    result = agent.run("rewrite notes.md")
    assert result.stop_reason == "stopped_by_plugin"
    assert model_server.pending == 0 and len(model_server.requests) == 3
    assert "tools" not in model_server.requests[-1].body or not model_server.requests[-1].body["tools"]
    assert files.ran == []
