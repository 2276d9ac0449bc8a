"""Agent.resume: finish a turn that stopped while its tool calls had no results (a server restart
while a call waited for approval), and the events observers rely on (llm.call, turn.failed)."""

from __future__ import annotations

import asyncio

import pytest

from clawkit import hookimpl

from clawkit.types import Decision, Message, ToolCall


class AskFirst:
    """Every call needs approval; ``seen`` records what observers got."""

    def __init__(self):
        self.events = []

    @hookimpl
    def register_tools(self, register, agent):
        def shout(text: str) -> str:
            """Upper-case the text."""
            return text.upper()

        register(shout)

    @hookimpl
    def before_tool_call(self, ctx, call):
        return Decision(action="require_approval", reason="ask first")

    @hookimpl
    def on_event(self, event):
        self.events.append(event)


def test_resume_runs_the_unanswered_call_through_the_gates_and_continues(make_agent):
    plugin = AskFirst()
    asked = []
    agent = make_agent(["HELLO it said"], plugins=(plugin,), tools=["shout"],
                       approver=lambda c, reason, ctx: asked.append((c.id, reason)) or True)
    sid = agent.session(None).id
    pending = ToolCall(id="call_1", name="shout", arguments={"text": "hello"})
    agent.store.append(sid, Message(role="user", content="shout hello"))
    agent.store.append(sid, Message(role="assistant", content="", tool_calls=[pending]))
    agent._sessions.clear()  # as after a restart

    result = asyncio.run(agent.resume(sid))
    assert [(cid, reason.endswith("ask first")) for cid, reason in asked] == [("call_1", True)]
    assert result.reply == "HELLO it said" and result.tool_calls[0]["name"] == "shout"
    roles = [m.role for m in agent.store.messages(sid)]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert agent.store.messages(sid)[2].content == "HELLO"
    types = [e.type for e in plugin.events]
    assert "turn.resumed" in types and types[-1] == "turn.end"
    assert asyncio.run(agent.resume(sid)).stop_reason == "nothing_to_resume"


def test_llm_call_and_turn_failed_events_carry_timing_not_content(make_agent):
    plugin = AskFirst()
    agent = make_agent(["fine"], plugins=(plugin,))
    agent.run("a secret message")
    calls = [e for e in plugin.events if e.type == "llm.call"]
    assert len(calls) == 1 and calls[0].data["duration"] >= 0 and "usage" in calls[0].data
    assert "secret" not in repr(calls[0].data)
    end = next(e for e in plugin.events if e.type == "turn.end")
    assert end.data["duration"] >= calls[0].data["duration"] and end.data["agent"] == "test-agent"
    from clawkit.providers import ProviderError

    with pytest.raises(ProviderError):
        agent.run("no script left")
    failed = [e for e in plugin.events if e.type == "turn.failed"]
    assert failed and failed[0].data["error"] == "ProviderError"
