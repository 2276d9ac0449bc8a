"""The contributor contract: selection by classification tags, order, budgets, determinism."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkit import hookimpl
from clawkit.prompt import (
    ContributorContext,
    PromptContributor,
    PromptSection,
    StaticContributor,
    Tag,
    assemble,
    tag_matches,
)
from clawkit.types import SessionClassification


def cctx(classification: SessionClassification | None = None, channel: str = "cli", **kw) -> ContributorContext:
    return ContributorContext(
        agent_id="a", session_id="s", classification=classification, tools=[], channel=channel, workspace=Path("."), model="m", **kw
    )


SEC = SessionClassification(label="audit", topic="coding", complexity="hard", domain=["security", "python"], flags=["urgent"])


def ids(result) -> list[str]:
    return [r.id for r in result.report if r.included]


def reason(result, cid: str) -> str:
    return next(r.reason for r in result.report if r.id == cid)


def test_untagged_always_in_even_unclassified():
    out = assemble([StaticContributor("base", "Be helpful.")], cctx(None))
    assert out.text == "Be helpful."
    assert reason(out, "base") == "untagged"


def test_tagged_needs_a_classification():
    out = assemble([StaticContributor("py", "Python tips.", tags=["topic:coding"])], cctx(None))
    assert out.text == ""
    assert reason(out, "py") == "no tag matched"


def test_or_across_tags():
    c = StaticContributor("multi", "M", tags=["topic:research", "complexity:hard"])
    out = assemble([c], cctx(SEC))
    assert ids(out) == ["multi"]
    assert next(r.detail for r in out.report if r.id == "multi") == "complexity:hard"
    other = SessionClassification(topic="ops", complexity="simple")
    assert reason(assemble([c], cctx(other)), "multi") == "no tag matched"


def test_wildcard_matches_any_value_of_its_dimension():
    assert tag_matches(Tag.parse("topic:*"), cctx(SEC))
    assert tag_matches(Tag.parse("complexity:*"), cctx(SessionClassification(complexity="trivial")))
    assert tag_matches(Tag.parse("domain:*"), cctx(SEC))
    assert not tag_matches(Tag.parse("domain:*"), cctx(SessionClassification(domain=[])))
    assert tag_matches(Tag.parse("channel:*"), cctx(None, channel="slack"))


def test_domain_matches_when_value_is_in_the_domain_list():
    sec = StaticContributor("security", "Think like an attacker.", tags=[{"domain": "security"}])
    fe = StaticContributor("frontend", "Use semantic HTML.", tags=[{"dimension": "domain", "value": "frontend"}])
    out = assemble([sec, fe], cctx(SEC))
    assert ids(out) == ["security"]
    assert reason(out, "frontend") == "no tag matched"


def test_custom_dimension_matches_flags_and_channel_needs_no_classification():
    urgent = StaticContributor("urgent", "Be quick.", tags=["custom:urgent"])
    slack = StaticContributor("slack", "Use short lines.", tags=["channel:slack"])
    assert ids(assemble([urgent, slack], cctx(SEC, channel="cli"))) == ["urgent"]
    assert ids(assemble([urgent, slack], cctx(None, channel="slack"))) == ["slack"]


def test_should_contribute_is_the_final_filter():
    class OnlyWithTools(PromptContributor):
        id = "tools-hint"
        tags = ["topic:coding"]  # strings are accepted on subclasses too

        def should_contribute(self, ctx):
            return bool(ctx.tools)

        def contribute(self, ctx):
            return PromptSection("Tools", ", ".join(ctx.tools))

    c = OnlyWithTools()
    out = assemble([c], cctx(SEC))
    assert reason(out, "tools-hint") == "filtered"
    ctx = cctx(SEC)
    ctx.tools = ["read_file"]
    assert assemble([c], ctx).text == "## Tools\nread_file"
    # tags are checked before should_contribute: no match means it is never asked
    asked = []

    class Spy(OnlyWithTools):
        def should_contribute(self, ctx):
            asked.append(1)
            return True

    assert reason(assemble([Spy()], cctx(None)), "tools-hint") == "no tag matched" and not asked


def test_priority_order_lower_first_then_id():
    cs = [
        StaticContributor("z-late", "Z", priority=200),
        StaticContributor("b-first", "B", priority=0),
        StaticContributor("a-mid", "A", priority=100),
        StaticContributor("c-mid", "C", priority=100),
    ]
    out = assemble(cs, cctx(None))
    assert out.text == "B\n\nA\n\nC\n\nZ"
    assert [r.id for r in out.report] == ["b-first", "a-mid", "c-mid", "z-late"]


def test_per_section_max_chars_trims_and_reports():
    long = StaticContributor("long", "x" * 100, heading="Long", max_chars=20)
    out = assemble([long], cctx(None))
    assert len(out.text) == 20 and out.text.startswith("## Long\n") and out.text.endswith("…")
    r = out.report[0]
    assert r.included and "trimmed to 20 chars" in r.detail

    class Capped(PromptContributor):
        id = "capped"
        max_chars = 10  # the tighter of the contributor's and the section's limit wins

        def contribute(self, ctx):
            return PromptSection("", "y" * 50, max_chars=30)

    assert len(assemble([Capped()], cctx(None)).text) == 10


def test_total_budget_cuts_lowest_priority_first_and_reports_the_cut():
    cs = [
        StaticContributor("core", "c" * 40, priority=0),
        StaticContributor("extra", "e" * 40, priority=50),
        StaticContributor("nice", "n" * 40, priority=90),
    ]
    out = assemble(cs, cctx(None), total_chars=85)  # 40 + 2 + 40 fits; the third does not
    assert ids(out) == ["core", "extra"]
    cut = out.cut
    assert [r.id for r in cut] == ["nice"] and "85-char prompt budget" in cut[0].detail
    assert len(out.text) <= 85
    assert ids(assemble(cs, cctx(None), total_chars=10)) == []


def test_identical_inputs_give_byte_identical_output():
    def build():
        return [StaticContributor(f"c{i}", f"section {i}", heading=f"H{i}", tags=["domain:security"] if i % 3 else [], priority=i % 4) for i in range(40)]

    a = assemble(build(), cctx(SEC), total_chars=300)
    b = assemble(list(reversed(build())), cctx(SEC), total_chars=300)
    assert a.text.encode() == b.text.encode()
    assert [(r.id, r.reason) for r in a.report] == [(r.id, r.reason) for r in b.report]


def test_a_failing_contributor_is_reported_and_skipped():
    class Broken(PromptContributor):
        id = "broken"

        def contribute(self, ctx):
            raise RuntimeError("disk gone")

    errors = []
    out = assemble([Broken(), StaticContributor("ok", "fine")], cctx(None), on_error=lambda c, e: errors.append(c.id))
    assert out.text == "fine"
    assert reason(out, "broken") == "failed" and errors == ["broken"]


def test_tag_parsing_forms_and_errors():
    assert Tag.parse("domain:security") == Tag(dimension="domain", value="security")
    assert Tag.parse({"topic": "coding"}) == Tag(dimension="topic", value="coding")
    assert Tag.parse("topic:") == Tag(dimension="topic", value="*")
    with pytest.raises(ValueError, match="dimension:value"):
        Tag.parse("security")
    with pytest.raises(ValueError, match="unknown dimension 'mood'"):
        Tag.parse({"mood": "happy"})


def test_empty_and_none_sections_are_filtered():
    class Nothing(PromptContributor):
        id = "nothing"

        def contribute(self, ctx):
            return None

    out = assemble([Nothing(), StaticContributor("blank", "   ")], cctx(None))
    assert out.text == "" and {r.reason for r in out.report} == {"filtered"}


class _Plugin:
    name = "prompt-test"

    @hookimpl
    def register_prompt_contributor(self, register, agent):
        register(StaticContributor("base", f"You are {agent.name}.", priority=0))
        register(StaticContributor("security", "Check inputs for injection.", tags=["domain:security"]))
        register(StaticContributor("frontend", "Prefer accessible markup.", tags=["domain:frontend"]))


class _Classifier:
    name = "prompt-test-classifier"

    @hookimpl
    def classify_session(self, session, messages):
        return SessionClassification(label="sec", topic="coding", domain=["security"])


def test_the_loop_builds_the_system_prompt_from_the_classification(make_agent):
    agent = make_agent(["ok"], plugins=(_Plugin(), _Classifier()))
    agent.run("audit my login form")
    system = agent.provider.requests[0].system
    assert "You are test-agent." in system and "injection" in system and "accessible" not in system
