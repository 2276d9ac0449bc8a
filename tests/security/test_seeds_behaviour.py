"""Issue 27 item 1 (seed 001, Approach A) through the real CLI with every builtin loaded: the
prompt's ``## Tools`` section states each sequence rule next to the tool it governs, and a
``think_about_*`` checkpoint tool configured in YAML returns its templated text to an agent that
lists it. Old main: the rule was only met as a block, and there were no checkpoint tools."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clawkit.testing.server import Reply

from .conftest import Cases, run_batch, write_agent

pytestmark = pytest.mark.e2e

PLUGINS = """\
sequence:
  rules:
    - tool: edit_file
      requires: [read_file]
      match: path
  checkpoints:
    think_about_collected_information:
      description: Check that you have what you need before you change anything.
      prompt: "Checkpoint for {agent}: you have used {tools_used}. You noted: {note}. Is anything missing?"
"""


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, server, audit_home):
    root = tmp_path_factory.mktemp("seeds-behaviour")
    cases = Cases()
    server.reset()
    server.script(*([cases] * 20))
    jobs: list[dict[str, Any]] = []
    for name, tools in (("listed", ["read_file", "edit_file", "think_about_collected_information"]),
                        ("unlisted", ["read_file", "edit_file"])):
        ws = root / name
        write_agent(ws, server, tools, PLUGINS)
        (ws / "a.py").write_text("x = 1\n")
        tag = cases.add(name, Reply.tool_calls([("read_file", {"path": "a.py"})]),
                        Reply.tool_calls([("think_about_collected_information", {"note": "a.py sets x"})]), "done")
        jobs.append({"name": name, "cwd": str(ws), "argv": ["run", "agent.yaml", f"change x in a.py {tag}", "--json"]})
    return {"cases": cases, "results": run_batch(jobs, audit_home, root)}


def _system(outcome, name) -> str:
    res = outcome["results"][name]
    assert res["rc"] == 0, res["stderr"][-3000:]
    req = outcome["cases"].requests[name][0]
    return next(m["content"] for m in req.messages if m["role"] == "system")


def test_the_tools_section_states_the_rule_next_to_its_tool(outcome):
    system = _system(outcome, "listed")
    tools = system.split("## Tools", 1)[1].split("\n## ", 1)[0]
    line = next(x for x in tools.splitlines() if x.startswith("- edit_file"))
    assert "call read_file on the same path before this tool" in line
    assert "read_file on the same path" not in next(x for x in tools.splitlines() if x.startswith("- read_file"))


def test_a_listed_checkpoint_tool_returns_its_templated_prompt(outcome):
    _system(outcome, "listed")
    offered = [t["function"]["name"] for t in outcome["cases"].requests["listed"][0].body["tools"]]
    assert "think_about_collected_information" in offered
    said = outcome["cases"].tool_list("listed")
    assert any("Checkpoint for target: you have used read_file. You noted: a.py sets x. Is anything missing?" in t
               for t in said), said


def test_an_unlisted_checkpoint_tool_is_not_offered(outcome):
    _system(outcome, "unlisted")
    offered = [t["function"]["name"] for t in outcome["cases"].requests["unlisted"][0].body.get("tools") or []]
    assert "think_about_collected_information" not in offered
    assert json.dumps(outcome["results"]["unlisted"]["json"]["tool_calls"][-1]).count("blocked") >= 1
