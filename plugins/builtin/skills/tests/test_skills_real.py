"""Real-world-shaped skills (tests/fixtures/real-skills): dialect sources, prose and numbered
ENGINEs, OpenClaw gating wherever metadata puts it, gating on the agent's tools, precedence."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

import clawkit_skills
from clawkit.testing import ScriptedReply, call

REPO = Path(__file__).resolve().parents[4]
FIX = REPO / "tests" / "fixtures" / "real-skills"


def test_prose_and_numbered_engines_become_plans():
    fetch = clawkit_skills.compile_file(FIX / "claws" / "web-fetch.claws")
    assert fetch.execution_plan[0].startswith("Open the page at the given URL") and len(fetch.execution_plan) == 3
    shell = clawkit_skills.compile_file(FIX / "claws" / "shell-runner.claws")
    assert shell.execution_plan == ["Check the command against the allowed programs.",
                                    "Run it with shell_exec in the given directory.",
                                    "Report the exit code, then the last lines of output."]


def test_openclaw_gating_wherever_metadata_puts_it():
    notes = clawkit_skills.compile_file(FIX / "openclaw" / "apple-notes" / "SKILL.md")
    assert notes.requires == {"bins": ["memo"], "os": ["darwin"]}
    reasons = clawkit_skills.missing_requirements(notes, env={"PATH": ""})
    assert any("memo" in r for r in reasons) and (sys.platform == "darwin" or any("needs os" in r for r in reasons))
    gh = clawkit_skills.compile_file(FIX / "openclaw" / "gh-pr" / "SKILL.md")
    assert gh.requires == {"bins": ["gh"], "env": ["GH_TOKEN"]}
    tmux = clawkit_skills.compile_file(FIX / "openclaw" / "tmux-session" / "SKILL.md")
    assert tmux.requires == {"anyBins": ["tmux"], "tools": ["shell_exec"], "os": ["linux", "darwin"]}


@pytest.fixture
def agent_in(make_agent, workspace, tmp_path):
    def build(script, tools, **kw):
        shutil.copytree(FIX, workspace / "skills", dirs_exist_ok=True)
        cfg = {"skills": {"user_dir": str(tmp_path / "none"), "watch": False, "shipped": False, **kw}}
        return make_agent(list(script), plugins=(clawkit_skills,), plugin_config=cfg, tools=tools)

    return build


def test_a_skill_needing_a_tool_the_agent_lacks_is_not_offered(agent_in):
    agent = agent_in(["a"], ["skills"])
    agent.run("hi")
    system = agent.provider.requests[0].system
    assert "- summarize-url:" in system and "- web-fetch:" in system
    assert "- tmux-session:" not in system  # requires.tools: shell_exec


def test_dialect_sources_fill_from_the_message(agent_in):
    agent = agent_in([ScriptedReply.calls(call("skill_shell_runner")), "ok"], ["skills"], always=["shell-runner"])
    agent.run("please run `git status --short` in ./src/app.py")
    out = json.loads(agent.provider.requests[1].messages[-1].content)
    assert out["arguments"]["cmd"] == "git status --short" and out["arguments"]["cwd"] == "./src/app.py"
    assert "verbosity" not in out["arguments"]  # context.mood has no source (and check says so)


def test_workspace_skill_shadows_the_bundled_one(make_agent, workspace, tmp_path):
    (workspace / "skills").mkdir()
    mine = (REPO / "skills" / "weather.claws").read_text().replace(
        "Current weather and short forecasts", "MY OWN weather skill")
    (workspace / "skills" / "weather.claws").write_text(mine)
    agent = make_agent(["a"], plugins=(clawkit_skills,), tools=["skills"],
                       plugin_config={"skills": {"user_dir": str(tmp_path / "none"), "watch": False,
                                                 "always": ["weather"]}})
    agent.run("weather in Paris?")
    req = agent.provider.requests[0]
    assert "MY OWN weather skill" in req.system
    tool = next(t for t in req.tools if t.name == "skill_weather")
    assert "MY OWN" in tool.description or "MY OWN" in req.system
