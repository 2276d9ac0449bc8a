"""clawkit-contributors: built-in sections, config-driven sections, config errors."""

from __future__ import annotations

import asyncio
import datetime as dt
import os

import pytest

import clawkit_contributors
from clawkit import hookimpl, tool
from clawkit.config import ConfigError, collect_sections, load_agent, validate_agent
from clawkit.context import TurnContext
from clawkit.hooks import HookRunner
from clawkit.loop import Agent
from clawkit.testing import plugin_manager
from clawkit.testing import ScriptedProvider
from clawkit.types import SessionClassification


@pytest.fixture(autouse=True)
def _stop_watchers():
    yield
    clawkit_contributors.close_all()


def build(workspace, script=("ok",), extra=(), **config):
    pm = plugin_manager(clawkit_contributors, *extra)
    data = {"name": "helper", "model": "scripted/test", "workspace": str(workspace), **config}
    cfg = validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm)))
    return Agent(cfg, pm=pm, provider=ScriptedProvider(list(script)), persist=False)


def prompt_of(agent, classification=None, state=None):
    s = agent.session()
    s.classification = classification
    ctx = TurnContext(agent.config, s, agent.hooks, agent.tools, agent_obj=agent)
    ctx.state.update(state or {})
    return asyncio.run(agent.system_prompt(ctx))


def by_id(result):
    return {r.id: r for r in result.report}


def test_identity_instructions_and_runtime(workspace):
    agent = build(workspace, instructions="Answer in French.")
    out = prompt_of(agent)
    assert out.text.startswith("You are helper, an AI agent.\n\nAnswer in French.")
    assert f"- Date: {dt.date.today().isoformat()}" in out.text
    assert f"- Working directory: {os.path.abspath(workspace)}" in out.text
    assert "- OS: " in out.text
    assert out.text.index("Answer in French.") < out.text.index("## Runtime")  # stable text first


def test_project_files_within_their_budget(workspace):
    (workspace / "AGENTS.md").write_text("Run `make test` before committing.\n")
    (workspace / "README.md").write_text("# Widget\n" + "w" * 500)
    agent = build(workspace, plugins={"contributors": {"project_files_max_chars": 100}})
    text = prompt_of(agent).text
    assert "## Project context\n### AGENTS.md\n[PROJECT FILE " in text and "Run `make test`" in text
    readme = text.split("### README.md\n", 1)[1].split("\n", 1)[1].split("\n[END PROJECT FILE", 1)[0]
    assert readme.endswith("…") and len("Run `make test` before committing.") + len(readme) <= 100
    # project files are data: delimited, and offered to the shield as untrusted content
    # files are re-read when they change
    (workspace / "AGENTS.md").write_text("Use tox.\n")
    assert "Use tox." in prompt_of(agent).text


def test_project_context_absent_without_files(workspace):
    out = prompt_of(build(workspace))
    assert by_id(out)["project-context"].reason == "filtered"


def test_project_file_created_later_is_picked_up_after_the_recheck(workspace, monkeypatch):
    """A project file that was missing is looked for again RECHECK_S after the last look (a stat per prompt
    build was the section's main cost); one that exists is stat'ed every time: its edits show at once."""
    import time

    from clawkit_contributors import builtin
    from clawkit_contributors.settings import RECHECK_S

    clock = [1000.0]
    monkeypatch.setattr(builtin, "time", type("Clock", (), {"monotonic": staticmethod(lambda: clock[0]),
                                                            "time": staticmethod(time.time), "mktime": time.mktime}))
    agent = build(workspace)
    assert by_id(prompt_of(agent))["project-context"].reason == "filtered"
    (workspace / "AGENTS.md").write_text("Use tox.\n")
    assert by_id(prompt_of(agent))["project-context"].reason == "filtered"  # looked RECHECK_S ago: not yet
    clock[0] += RECHECK_S
    assert "Use tox." in prompt_of(agent).text
    (workspace / "AGENTS.md").write_text("Use nox instead.\n")
    assert "Use nox instead." in prompt_of(agent).text  # an edit: at once, whatever the clock
    (workspace / "AGENTS.md").unlink()
    assert by_id(prompt_of(agent))["project-context"].reason == "filtered"  # and a removal


def test_tools_summary_lists_visible_tools_with_descriptions(workspace):
    @tool
    def read_file(path: str) -> str:
        """Read a text file from the workspace.

        Args:
            path: the file
        """
        return ""

    @tool
    def delete_everything() -> str:
        """Not allowed for this agent."""
        return ""

    class Tools:
        name = "tools-plugin"

        @hookimpl
        def register_tools(self, register, agent):
            register(read_file)
            register(delete_everything)

    agent = build(workspace, ["done"], extra=(Tools(),), tools=["read_*"])
    agent.run("hi")
    system = agent.provider.requests[0].system
    assert "## Tools\nYou can call these tools:\n- read_file: Read a text file from the workspace." in system
    assert "delete_everything" not in system


def test_directives_section_shows_active_directives(workspace):
    agent = build(workspace)
    s = agent.session()
    s.set("directives", {"think": "high", "verbose": False})
    s.set("elevated_until", 4102444800.0)  # 2100-01-01
    ctx = TurnContext(agent.config, s, agent.hooks, agent.tools, agent_obj=agent)
    ctx.state["directives"] = {"reasoning": True}
    ctx.state["elevated_until"] = 4102444800.0  # what the directives plugin vouches for this turn
    text = asyncio.run(agent.system_prompt(ctx)).text
    assert "## Active directives\n- /elevated on until 00:00 UTC\n- /reasoning on\n- /think high" in text
    assert "verbose" not in text
    assert by_id(prompt_of(agent))["directives"].reason == "filtered"


def test_builtins_can_be_disabled(workspace):
    agent = build(workspace, plugins={"contributors": {"disable": ["runtime", "identity"]}})
    ids = [r.id for r in prompt_of(agent).report]
    assert "runtime" not in ids and "identity" not in ids and "instructions" in ids
    with pytest.raises(ConfigError, match="unknown built-in section"):
        build(workspace, plugins={"contributors": {"disable": ["identty"]}})


def test_config_driven_contributors_follow_the_classification(workspace):
    agent = build(
        workspace,
        contributors=[
            {"id": "sec", "content": "Check for injection.", "heading": "Security", "tags": ["domain:security"], "priority": 20},
            {"id": "fe", "content": "Semantic HTML.", "tags": [{"domain": "frontend"}]},
            {"id": "always", "content": "Be kind.", "priority": 5, "max_chars": 4},
        ],
    )
    out = prompt_of(agent, SessionClassification(topic="coding", domain=["security"]))
    r = by_id(out)
    assert r["sec"].included and r["sec"].reason == "tag matched"
    assert r["fe"].reason == "no tag matched"
    assert r["always"].included and "\n\nBe…\n\n" in out.text
    assert "## Security\nCheck for injection." in out.text


def test_config_errors_name_file_line_and_field(tmp_path):
    pm = plugin_manager(clawkit_contributors)
    sections = collect_sections(HookRunner(pm))
    f = tmp_path / "agent.yaml"
    f.write_text("name: a\nmodel: m\ncontributors:\n  - id: x\n    content: y\n    tags: [mood:sad]\n")
    with pytest.raises(ConfigError, match=r"agent.yaml:6: contributors.0.tags: .*unknown dimension 'mood'"):
        load_agent(f, sections=sections)
    f.write_text("name: a\nmodel: m\ncontributors:\n  - id: x\n    content: y\n  - id: x\n    content: z\n")
    with pytest.raises(ConfigError, match="appears twice"):
        load_agent(f, sections=sections)
    f.write_text("name: a\nmodel: m\ncontributors:\n  - id: x\n    text: y\n")
    with pytest.raises(ConfigError, match=r"agent.yaml:5: contributors.0.text: unknown key"):
        load_agent(f, sections=sections)


def test_same_inputs_same_bytes(workspace):
    (workspace / "AGENTS.md").write_text("Notes.")
    agent = build(workspace, contributors=[{"id": f"c{i}", "content": f"rule {i}", "priority": i % 3} for i in range(20)])
    c = SessionClassification(topic="coding", domain=["security"])
    assert prompt_of(agent, c).text.encode() == prompt_of(agent, c).text.encode()
