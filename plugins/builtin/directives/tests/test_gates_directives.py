"""Issue 30 item 5 in the directives plugin: pasted pieces are never parsed, a stored elevation
holds only on the channel that set it, and never in a sub-agent's run."""

from __future__ import annotations

import pytest

import clawkit_directives
from clawkit import hookimpl
from clawkit_directives import parse


def test_pasted_pieces_are_never_directives():
    assert parse("/elevated on", ["/elevated on"]).directives == []
    text = "/think high\nHere:\n/elevated on\nend"
    parsed = parse(text, ["Here:\n/elevated on\nend"])
    assert parsed.directives == [("think", "high")] and "/elevated on" in parsed.text
    # a piece that is not in the text (rewritten on the way): nothing in the message is parsed
    assert parse("/elevated on", ["something else"]).directives == []


class Pasted:
    """What ``clawkit chat`` does for a bracketed paste: the message's pasted pieces in its metadata."""

    def __init__(self, pieces):
        self.pieces = pieces

    @hookimpl(tryfirst=True)
    def message_received(self, ctx, message):
        message.metadata["pasted"] = list(self.pieces)


@pytest.fixture
def agent_with(workspace):
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager
    from clawkit.testing import ScriptedProvider

    made = []

    def factory(*extra, script=()):
        data = {"name": "t", "model": "openai/test", "workspace": str(workspace),
                "plugins": {"directives": {"allow_elevated": True, "allow_noninteractive_elevated": True}}}
        pm = get_plugin_manager(extra=(clawkit_directives, *extra), load_entry_points=False)  # narrow: unit test of the directives plugin's channel rule
        cfg = validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm)))
        agent = Agent(cfg, pm=pm, provider=ScriptedProvider(list(script)))
        agent.channel = "chat"
        made.append(agent)
        return agent

    yield factory
    for a in made:
        a.store.close()


def test_a_paste_of_the_directive_alone_does_not_elevate(agent_with):
    agent = agent_with(Pasted(["/elevated on"]), script=["ok"])
    r = agent.run("/elevated on")
    assert agent.session(r.session_id).get("elevated_until") is None


def test_elevation_holds_only_on_its_channel(agent_with):
    agent = agent_with()
    sid = agent.run("/elevated on").session_id
    assert agent.session(sid).get("elevated_channel") == "chat"
    assert "elevated: on" in agent.run("/status", session_id=sid).reply
    agent.channel = "cli"  # clawkit run --session on the same session
    assert "off here (on in chat only)" in agent.run("/status", session_id=sid).reply
    agent.channel = "chat"
    assert "elevated: on" in agent.run("/status", session_id=sid).reply


def test_a_stored_elevation_without_a_channel_counts_nowhere(agent_with):
    import time

    agent = agent_with()
    sid = agent.run("/status").session_id
    agent.session(sid).set("elevated_until", time.time() + 600)  # written by an older version
    assert "off here" in agent.run("/status", session_id=sid).reply
