"""Issue 27 item 16: the planner can suggest parallel steps and the executor runs the independent tool
calls of such steps in parallel. The real CLI with every builtin loaded: pre-analysis returns a plan
with a group of steps that can run at once; the plan shown to the model marks them and says to make
their calls in one response; the model's update_plan with ``parallel_with`` is linked both ways; and
the two calls of the parallel steps run at the same time — each waits for the other's flag file, so
run one after the other the first would give up and fail."""

from __future__ import annotations

import json
import textwrap

import pytest

from clawkit.testing.server import Reply

from .conftest import run_cli

pytestmark = pytest.mark.e2e


RENDEZVOUS = """\
touch "$1.flag"
i=0
while [ ! -f "$2.flag" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
test -f "$2.flag" && echo "met-$1"
"""


def _rendezvous(mine: str, theirs: str) -> str:
    return f"sh rendezvous.sh {mine} {theirs}"  # no shell operator: the policy grant covers it


def test_parallel_steps_are_planned_shown_and_run_at_once(tmp_path, server, audit_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "rendezvous.sh").write_text(RENDEZVOUS)
    (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: target
        model: {{name: openai/test, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 30}}
        tools: [shell_exec, update_plan]
        plugins:
          plans: {{pre_analysis: {{enabled: true}}}}
          policy:
            grants: [{{tools: [shell_exec], commands: ["sh rendezvous.sh *"]}}]
        """))
    verdict = {"is_complex": True, "reasoning": "two independent checks, then a report",
               "plan": ["read the brief", ["check service A", "check service B"], "write the report"]}
    steps = [{"title": "read the brief", "status": "done"},
             {"title": "check service A", "status": "in_progress", "parallel_with": [3]},
             {"title": "check service B", "status": "in_progress"},
             {"title": "write the report", "status": "pending"}]
    run = run_cli(ws, server, audit_home, "check services A and B, then report",
                  json.dumps(verdict),
                  Reply.tool_calls([("update_plan", {"steps": steps})]),
                  Reply.tool_calls([("shell_exec", {"command": _rendezvous("a", "b")}),
                                    ("shell_exec", {"command": _rendezvous("b", "a")})]),
                  "Both services answered.")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    analysis, first, second, third = run.requests
    assert "nested list" in json.dumps(analysis.body)  # the planner is told it may group steps
    plan_text = json.dumps(first.body)
    assert "2. [ ] check service A (at once with 3)" in plan_text and "3. [ ] check service B (at once with 2)" in plan_text
    assert "make the tool calls of all of them in one response" in plan_text
    updated = json.dumps(second.body)  # the model's parallel_with, linked both ways
    assert "2. [>] check service A (at once with 3)" in updated and "3. [>] check service B (at once with 2)" in updated
    results = [m["content"] for m in third.messages if m["role"] == "tool"][-2:]
    assert any("met-a" in r for r in results) and any("met-b" in r for r in results), results
    assert [c["is_error"] for c in run.result["tool_calls"]] == [False, False, False]
