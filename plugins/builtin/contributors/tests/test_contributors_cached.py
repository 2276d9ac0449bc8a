"""The built-in sections answer a turn like the last one with the same string (issue 29 goal 5: per-turn
CPU of the full install), and are rebuilt when what they show changes: the tools, their descriptions,
other plugins' notes, the agent's instructions, the workspace, the date."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import clawkit_contributors
from clawkit.prompt import ContributorContext, assemble
from clawkit_contributors import builtin
from clawkit_contributors.builtin import Directives, Identity, Instructions, Runtime, ToolsSummary


@pytest.fixture(autouse=True)
def _stop_watchers():
    yield
    clawkit_contributors.close_all()


def ctx(tools=("read", "write"), descriptions=None, state=None, workspace="/srv/ws", agent_id="helper", agent=None):
    return ContributorContext(agent_id=agent_id, session_id="s", classification=None, tools=list(tools), channel="cli",
                              workspace=Path(workspace), model="m", agent=agent, state=dict(state or {}),
                              tool_descriptions=dict(descriptions if descriptions is not None else {t: f"Does {t}." for t in tools}))


def test_tools_section_is_the_same_string_until_what_it_shows_changes():
    section = ToolsSummary()
    first = section.contribute(ctx())
    assert first == "## Tools\nYou can call these tools:\n- read: Does read.\n- write: Does write."
    assert section.contribute(ctx()) is first  # equal inputs (new objects): the same string
    assert "- read: Reads a file." in section.contribute(ctx(descriptions={"read": "Reads a file.", "write": "W."}))
    assert "- grep" in section.contribute(ctx(tools=("read", "grep")))
    notes = {"tool_notes": {"write": ["call read first"]}}
    assert "- write: Does write. — call read first" in section.contribute(ctx(state=notes))
    notes["tool_notes"]["write"].append("never twice")  # a plugin changing its list in place
    assert section.contribute(ctx(state=notes)).endswith("— call read first — never twice")
    assert section.contribute(ctx()) == first


def test_tools_section_falls_back_to_the_registry_descriptions():
    class Registry:
        def visible(self):
            class T:
                def __init__(self, name):
                    self.name, self.definition = name, type("D", (), {"description": f"{name} from the registry"})()

            return [T("read")]

    c = ctx(tools=("read",), descriptions={})
    c.registry = Registry()
    assert ToolsSummary().contribute(c).endswith("- read: read from the registry")


def test_identity_and_instructions_follow_the_agent():
    identity, instructions = Identity(), Instructions()
    assert identity.contribute(ctx()) == "You are helper, an AI agent."
    assert identity.contribute(ctx(agent_id="other")) == "You are other, an AI agent."

    class Agent:
        instructions = "  Be brief.  "

    a = Agent()
    assert instructions.contribute(ctx(agent=a)) == "Be brief."
    a.instructions = "Answer in French.\n"
    assert instructions.contribute(ctx(agent=a)) == "Answer in French."


def test_runtime_section_follows_the_workspace_and_the_date(monkeypatch):
    runtime = Runtime()
    text = runtime.contribute(ctx())
    assert f"- Date: {dt.date.today().isoformat()}" in text and "- Working directory: /srv/ws" in text
    assert runtime.contribute(ctx()) is text
    assert "- Working directory: /srv/other" in runtime.contribute(ctx(workspace="/srv/other"))

    tomorrow = dt.date.today() + dt.timedelta(days=1)

    class Tomorrow(dt.date):
        @classmethod
        def today(cls):
            return tomorrow

    real_time = builtin.time.time
    monkeypatch.setattr(builtin._dt, "date", Tomorrow)
    monkeypatch.setattr(builtin.time, "time", lambda: real_time() + 86_400)  # past midnight
    assert f"- Date: {tomorrow.isoformat()}" in runtime.contribute(ctx(workspace="/srv/other"))


def test_directives_filtered_without_building_anything_and_shown_when_set():
    d = Directives()
    assert not d.should_contribute(ctx())
    assert not d.should_contribute(ctx(state={"directives": {"verbose": False}}))  # only off values
    on = ctx(state={"directives": {"think": "high"}})
    assert d.should_contribute(on)
    out = assemble([d], on)
    assert out.text == "## Active directives\n- /think high"
