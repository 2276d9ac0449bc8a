"""Stable contributors (``stable = True``): rendered once per agent config, their Inclusion reused and
never changed by a budget; and budgets that fit leave every section as it was."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from clawkit.prompt import ContributorContext, PromptContributor, StaticContributor, assemble
from clawkit.types import SessionClassification


def cctx(agent=None, classification=None) -> ContributorContext:
    return ContributorContext(agent_id="a", session_id="s", classification=classification, tools=[], channel="cli",
                              workspace=Path("."), model="m", agent=agent)


class Counting(PromptContributor):
    id = "counting"
    stable = True

    def __init__(self, text: str = "Stable text.", fail: bool = False) -> None:
        self.calls, self.text, self.fail = 0, text, fail

    def contribute(self, ctx):
        self.calls += 1
        if self.fail:
            raise RuntimeError("broken")
        return self.text


def test_a_stable_contributor_is_rendered_once_per_agent_config():
    c, first, second = Counting(), SimpleNamespace(name="one"), SimpleNamespace(name="two")
    a = assemble([c], cctx(first))
    b = assemble([c], cctx(first))
    assert c.calls == 1 and a.text == b.text == "Stable text."
    assert b.report[0] is a.report[0]  # the same Inclusion, shared
    assemble([c], cctx(second))
    assert c.calls == 2  # another agent config: rendered again
    assemble([c], cctx(None))
    assemble([c], cctx(None))
    assert c.calls == 4  # no agent config to key it on: rendered every time


def test_static_contributors_are_stable_and_tagged_ones_are_matched_every_time():
    agent = SimpleNamespace()
    tagged = StaticContributor("tagged", "Only for coding.", tags=["topic:coding"])
    assert StaticContributor.stable
    coding = SessionClassification(label="x", topic="coding", complexity="easy")
    chat = SessionClassification(label="y", topic="chat", complexity="easy")
    assert assemble([tagged], cctx(agent, coding)).text == "Only for coding."
    out = assemble([tagged], cctx(agent, chat))
    assert out.text == "" and out.report[0].reason == "no tag matched"
    assert assemble([tagged], cctx(agent, coding)).report[0].reason == "tag matched"


def test_a_budget_trims_a_copy_never_the_shared_inclusion():
    agent = SimpleNamespace()
    c = Counting("x" * 600)
    c.source = "system"
    small = assemble([c], cctx(agent), budgets={"system": 300})
    assert small.report[0].chars_before == 600 and len(small.text) == 300 and small.trimmed
    again = assemble([c], cctx(agent))
    assert c.calls == 1 and again.text == "x" * 600
    assert again.report[0].chars_before == 0 and not again.report[0].detail and not again.cut and not again.trimmed
    cut = assemble([c, StaticContributor("other", "y" * 50)], cctx(agent), total_chars=100)
    assert [i.id for i in cut.cut] == ["other"] and cut.report[0].included  # a system section is trimmed, never cut
    assert cut.report[0].chars == 200 and cut.text == "x" * 199 + "…"
    assert assemble([c], cctx(agent)).text == "x" * 600


def test_a_failing_stable_contributor_is_asked_and_reported_every_time():
    agent, errors = SimpleNamespace(), []
    c = Counting(fail=True)
    for _ in range(2):
        out = assemble([c], cctx(agent), on_error=lambda who, exc: errors.append(str(exc)))
        assert out.report[0].reason == "failed"
    assert c.calls == 2 and errors == ["broken", "broken"]


def test_sources_within_their_budget_are_left_as_they_are():
    agent = SimpleNamespace()
    parts = [StaticContributor("a", "a" * 100, priority=1), StaticContributor("b", "b" * 100, priority=2)]
    exact = assemble(parts, cctx(agent), budgets={"contributors": 202}, total_chars=202)  # 100 + 2 + 100
    assert exact.text == "a" * 100 + "\n\n" + "b" * 100 and not exact.trimmed and not exact.cut
    over = assemble(parts, cctx(agent), budgets={"contributors": 201})
    assert [i.id for i in over.cut] == ["b"] and over.dropped_tools == set()
    assert assemble(parts, cctx(agent)).text == exact.text  # the shared sections are whole again
