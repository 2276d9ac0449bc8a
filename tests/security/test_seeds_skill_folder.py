"""Issue 27 item 15 through the real CLI with every builtin loaded: a SKILL.md's ``allowed-tools``
and ``requires.tools`` are checked against the agent's tools (not offered, with the reason in
``skills list``), and a skill's own folder is told to the model and readable read-only, wherever
the skill lives (here an extra ``paths:`` folder outside the workspace). Old main: the skill was
offered to an agent that could not run it, ``skills list`` said "available", and its bundled
files could not be read (outside the workspace)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clawkit.testing.server import Reply

from .conftest import Cases, run_batch, write_agent

pytestmark = pytest.mark.e2e

SKILL = """---
name: pdf-forms
description: Fill PDF forms from a field list.
allowed-tools: Bash(python:*) Read
---
Read FORMS.md for the field names, then run scripts/fill.py.
"""


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, server, audit_home):
    root = tmp_path_factory.mktemp("seeds-skill-folder")
    elsewhere = root / "elsewhere"
    (elsewhere / "pdf-forms" / "scripts").mkdir(parents=True)
    (elsewhere / "pdf-forms" / "SKILL.md").write_text(SKILL)
    (elsewhere / "pdf-forms" / "FORMS.md").write_text("FIELDS: name, date, signature\n")
    (elsewhere / "pdf-forms" / "scripts" / "fill.py").write_text("print('filled')\n")
    (root / "secret.txt").write_text("do not read\n")
    cases = Cases()
    server.reset()
    server.script(*([cases] * 40))
    jobs: list[dict[str, Any]] = []
    plugins = f"skills: {{paths: [{json.dumps(str(elsewhere))}], shipped: false}}\n"
    for name, tools in (("without", ["read_file", "skills"]), ("with", ["read_file", "shell_exec", "skills"])):
        ws = root / name
        write_agent(ws, server, tools, plugins)
        tag = cases.add(name, Reply.tool_calls([("load_skill", {"name": "pdf-forms"})]),
                        Reply.tool_calls([("read_skill_file", {"skill": "pdf-forms", "path": "FORMS.md"}),
                                          ("read_skill_file", {"skill": "pdf-forms", "path": "../../secret.txt"})]),
                        "done")
        jobs.append({"name": name, "cwd": str(ws), "argv": ["run", "agent.yaml", f"fill the pdf form {tag}", "--json"]})
        jobs.append({"name": f"list-{name}", "cwd": str(ws), "argv": ["skills", "list", "--agent", "agent.yaml", "--json"]})
    return {"root": root, "cases": cases, "results": run_batch(jobs, audit_home, root)}


def _listed(outcome, name) -> dict[str, Any]:
    res = outcome["results"][f"list-{name}"]
    assert res["rc"] == 0, res["stderr"][-2000:]
    return next(r for r in res["json"]["skills"] if r["name"] == "pdf-forms")


def test_a_skill_whose_tools_the_agent_lacks_is_not_offered_and_says_why(outcome):
    row = _listed(outcome, "without")
    assert row["available"] is False and "needs tool(s) shell_exec" in row["reason"]
    assert _listed(outcome, "with")["available"] is True
    res = outcome["results"]["without"]
    assert res["rc"] == 0, res["stderr"][-2000:]
    said = outcome["cases"].tool_list("without")
    assert "unavailable" in said[0] or "unknown skill" in said[0]  # load_skill refuses it
    assert "pdf-forms" not in outcome["cases"].requests["without"][0].messages[0]["content"]  # not in the index


def test_the_skill_folder_is_told_and_readable_read_only(outcome):
    res = outcome["results"]["with"]
    assert res["rc"] == 0, res["stderr"][-2000:]
    folder = str(outcome["root"] / "elsewhere" / "pdf-forms")
    loaded, forms, escape = outcome["cases"].tool_list("with")[:3]
    assert f"Skill folder: {folder}" in loaded
    assert "FIELDS: name, date, signature" in forms
    assert "outside" in escape and "do not read" not in escape  # refused (the policy or the tool itself)
