"""Compaction off the turn's path (issue 29): the turn that crosses the threshold never waits
for the summarizer. With a summarizer that takes 30 s, every crossing turn is truncated at once
(the older messages left out of that request, the session keeping them) and the summary keeps
being prepared in the background; with ``background: false`` the old behaviour (waiting) stays."""

from __future__ import annotations

import asyncio

from clawkit import hookimpl
from clawkit.testing import ScriptedProvider

from clawkit_compaction import SUMMARY_FLAG

import pytest

import clawkit_compaction
from clawkit.providers import ProviderError

# the agent factory and scripted model of test_compaction.py (test modules do not import each other)
WINDOW = 3000


@pytest.fixture
def make_agent(workspace):
    """The kit's make_agent plus ``plugin_config`` (its ``plugins=`` takes plugin objects, not the YAML section)."""
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager

    agents = []

    def factory(provider, *, plugins=(clawkit_compaction,), plugin_config=None, **config):
        data = {"name": "test-agent", "model": "scripted/test", "workspace": str(workspace),
                "limits": {"context_window": WINDOW}, **config}
        if plugin_config:
            data["plugins"] = plugin_config
        pm = get_plugin_manager(extra=plugins, load_entry_points=False)  # narrow: the summarizer timing is measured against compaction alone
        cfg = validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm)))
        agent = Agent(cfg, pm=pm, provider=provider)
        agents.append(agent)
        return agent

    yield factory
    for a in agents:
        a.store.close()


def is_summary_request(req) -> bool:
    return req.metadata.get("purpose") == "compaction"


def responder(summary="Summary: the user asked numbered questions; answers were given.", fail=False):
    def answer(req):
        if is_summary_request(req):
            if fail:
                raise ProviderError("summarizer is down", retryable=False)
            return summary
        last = req.messages[-1].content
        return f"Answer to ({last[:40]}): " + "lorem ipsum dolor sit amet " * 12

    return ScriptedProvider([answer], repeat_last=True)


def user_text(i: int) -> str:
    return f"Question {i}: please look at /srv/app/module_{i}.py and explain what it does in detail. " * 2


class SlowSummarizer:
    """A provider whose summaries take 30 s (old main: every crossing turn waited that long)."""

    def __init__(self):
        self.started = 0

    async def complete(self, request, on_text=None):
        self.started += 1
        await asyncio.sleep(30)
        raise AssertionError("a turn waited for the summarizer")


def test_the_turn_crossing_the_threshold_truncates_instead_of_waiting(make_agent):
    slow = SlowSummarizer()

    class Cheap:
        @hookimpl
        def register_providers(self, register):
            register("slow", lambda model_config: slow)


    agent = make_agent(responder(), plugins=(clawkit_compaction, Cheap()),
                       plugin_config={"compaction": {"model": {"name": "slow/mini", "provider": "slow"}}})
    sid = None
    for i in range(30):
        r = agent.run(user_text(i), session_id=sid)
        sid = r.session_id
        assert r.reply.startswith("Answer to (Question")
    after = [e["data"] for e in agent.store.events(sid, "compaction.after")]
    assert after and all(a["method"] == "truncate" and not a["persisted"] and a["background"] for a in after)
    assert all(a["tokens_after"] < a["tokens_before"] for a in after)
    assert slow.started >= 1  # the summary was being prepared, off the turn's path
    assert agent.store.events(sid, "compaction.preparing")
    # the session keeps every message (truncation is per request); the requests carry the note
    assert not any(m.metadata.get(SUMMARY_FLAG) for m in agent.store.messages(sid))
    assert len([m for m in agent.store.messages(sid) if m.role == "user"]) == 30
    truncated = [q for q in agent.provider.requests if q.messages and q.messages[0].metadata.get("method") == "truncate"]
    assert truncated and "their summary is being prepared" in truncated[0].messages[0].content
    assert max(len(q.messages) for q in agent.provider.requests) < 60


def test_background_false_keeps_the_waiting_summary(make_agent):
    agent = make_agent(responder(), plugin_config={"compaction": {"background": False}})
    sid = None
    for i in range(30):
        sid = agent.run(user_text(i), session_id=sid).session_id
    after = [e["data"] for e in agent.store.events(sid, "compaction.after")]
    assert after and all(a["method"] == "summary" and a["persisted"] and "background" not in a for a in after)
    assert not agent.store.events(sid, "compaction.preparing")
