"""Issue 27 item 6 through the real CLI with every builtin loaded: a routed skill never takes away
what the user asked for. With ``tools: [read_file, write_file, edit_file, skills]``, "fix the login
bug in auth.py" edits the file (the bundled read-only ``code-review`` skill is not routed, and when a
review *is* asked for, its manifest guides and does not veto). With ``skills: {routed_manifests: ask}``
the routed manifest becomes a question to the user instead (a non-interactive run cannot answer, so
the edit is not made and the model is told why) — never a silent veto. Old main: the shield blocked
``edit_file`` ("the active skill manifest denies fs.write"), and there was no "ask" option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawkit.testing.server import Reply

from .conftest import Cases, run_batch, write_agent

pytestmark = pytest.mark.e2e

TOOLS = ["read_file", "write_file", "edit_file", "skills"]
BUG = "def login(u, p):\n    return u == p  # BUG\n"


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, server, audit_home):
    root = tmp_path_factory.mktemp("seeds-routed")
    cases = Cases()
    server.reset()
    server.script(*([cases] * 60))
    jobs: list[dict[str, Any]] = []
    fix = [Reply.tool_calls([("read_file", {"path": "auth.py"})]),
           Reply.tool_calls([("edit_file", {"path": "auth.py", "old": "return u == p  # BUG", "new": "return verify(u, p)"})]),
           "Done."]

    def job(name: str, message: str, plugins: str) -> None:
        ws = root / name
        write_agent(ws, server, TOOLS, "policy:\n  risk: {edit_file: safe}\n" + plugins)
        (ws / "auth.py").write_text(BUG)
        tag = cases.add(name, *fix)
        jobs.append({"name": name, "cwd": str(ws), "argv": ["run", "agent.yaml", f"{message} {tag}", "--json"]})

    job("fix", "fix the login bug in auth.py", "")
    job("reviewfix", "review auth.py and fix the login bug", "")
    job("ask", "review auth.py and fix the login bug", "skills: {routed_manifests: ask}\n")
    return {"root": root, "cases": cases, "results": run_batch(jobs, audit_home, root)}


def _result(outcome, name):
    res = outcome["results"][name]
    assert res["rc"] == 0, res["stderr"][-3000:]
    return res["json"], outcome["root"] / name


@pytest.mark.parametrize("case", ["fix", "reviewfix"])
def test_the_agent_fixes_the_bug_it_was_asked_to_fix(outcome, case):
    result, ws = _result(outcome, case)
    assert "verify(u, p)" in (ws / "auth.py").read_text()
    assert all(not c["blocked"] for c in result["tool_calls"])


def test_routed_manifests_ask_turns_the_manifest_into_a_question_not_a_veto(outcome):
    result, ws = _result(outcome, "ask")
    edit = next(c for c in result["tool_calls"] if c["name"] == "edit_file")
    assert edit["blocked"] is True  # nobody could answer the question in a non-interactive run
    seen = outcome["cases"].tool_list("ask")
    said = next(t for t in seen if "edit_file" in t or "approv" in t)
    assert "not approved" in said and "only guides" in said and "code-review" in said, said
    reads = [c for c in result["tool_calls"] if c["name"] == "read_file"]
    assert reads and not reads[0]["blocked"]  # what the manifest allows is not asked
    assert "# BUG" in (ws / "auth.py").read_text()
