"""The context budget: per-source shares in prompt assembly, tools leaving with their section, events."""

from __future__ import annotations

from pathlib import Path

from clawkit import hookimpl
from clawkit.budget import ContextBudget, ContextConfig
from clawkit.prompt import ContributorContext, PromptContributor, PromptSection, assemble
from clawkit.testing import ScriptedReply, call


class Section(PromptContributor):
    def __init__(self, id, text, *, source="contributors", priority=100, tools=(), compressible=True):
        self.id, self.text, self.source, self.priority = id, text, source, priority
        self.tools, self.compressible = tuple(tools), compressible

    def contribute(self, ctx):
        return PromptSection(self.id.title(), self.text)


def _ctx():
    return ContributorContext(agent_id="a", session_id=None, classification=None, tools=[], channel="cli", workspace=Path("."), model="m")


def test_budget_arithmetic_and_defaults():
    b = ContextBudget(8000)
    assert b.tokens("skills") == 1200 and b.chars("skills") == 4800
    assert b.summarize_at_tokens == 5600 and b.reserve_tokens == 1200
    assert b.tokens("something-else") == b.tokens("contributors")
    custom = ContextBudget(10000, ContextConfig(summarize_at=0.5, shares={"memory": 0.2}))
    assert custom.summarize_at_tokens == 5000 and custom.tokens("memory") == 2000


def test_each_source_fits_its_share_lowest_priority_first():
    sections = [
        Section("readme", "r" * 3000, source="project_files", priority=50),
        Section("agents", "a" * 3000, source="project_files", priority=55),
        Section("style", "s" * 100, priority=20),
    ]
    out = assemble(sections, _ctx(), budgets={"project_files": 4000, "contributors": 1000})
    by_id = {r.id: r for r in out.report}
    assert by_id["readme"].included and by_id["readme"].chars_before == 0
    agents = by_id["agents"]  # trimmed to what is left of the share, not dropped
    assert agents.included and agents.chars_before > agents.chars and agents.chars <= 4000 - by_id["readme"].chars - 2
    assert "trimmed from" in agents.detail and agents.source == "project_files"
    assert by_id["style"].included


def test_a_skill_section_is_never_trimmed_and_leaves_with_its_tools():
    skill = Section("skill", "k" * 5000, source="skills", tools=("skill_weather",), compressible=False)
    out = assemble([skill, Section("style", "be brief")], _ctx(), budgets={"skills": 4800})
    assert [r.id for r in out.cut] == ["skill"] and out.dropped_tools == {"skill_weather"}
    assert "k" not in out.text and "leave the request" in out.cut[0].detail
    fits = assemble([skill], _ctx(), budgets={"skills": 6000})
    assert fits.text.endswith("k" * 10) and not fits.cut and not fits.trimmed


def test_system_sections_are_trimmed_never_dropped():
    out = assemble([Section("instructions", "i" * 5000, source="system", priority=0)], _ctx(), total_chars=300, budgets={"system": 1000})
    (inc,) = out.report
    assert inc.included and inc.chars <= 1000 and inc.chars_before > 1000


def test_the_loop_drops_a_cut_sections_tools_and_emits_events(make_agent):
    from clawkit.tools import tool

    @tool
    def skill_weather(city: str) -> str:
        """Weather."""
        return "sunny"

    class P:
        @hookimpl
        def register_tools(self, register, agent):
            register(skill_weather)

        @hookimpl
        def register_prompt_contributor(self, register, agent):
            register(Section("instructions", "Be helpful.", source="system", priority=0))
            register(Section("skill", "k" * 5000, source="skills", tools=("skill_weather",), compressible=False))
            register(Section("readme", "r" * 9000, source="project_files"))

    agent = make_agent(["ok"], plugins=(P(),), tools=["skill_weather"], limits={"context_window": 8000, "max_tool_rounds": 3})
    r = agent.run("hi")
    req = agent.provider.requests[0]
    assert req.tools == [] and "kkkk" not in req.system and "Be helpful." in req.system
    events = {e["data"]["section"]: e["data"] for e in agent.store.events(r.session_id) if e["type"] == "context.cut"}
    assert events["skill"]["action"] == "dropped" and events["skill"]["tools"] == ["skill_weather"]
    assert events["readme"]["action"] == "trimmed" and events["readme"]["tokens_after"] <= 800 < events["readme"]["tokens_before"]
    big = make_agent([ScriptedReply.calls(call("skill_weather", city="x")), "ok"], plugins=(P(),), tools=["skill_weather"],
                     limits={"context_window": 64000, "max_tool_rounds": 3})
    big.run("hi")
    first = big.provider.requests[0]
    assert [t.name for t in first.tools] == ["skill_weather"] and "kkkk" in first.system
