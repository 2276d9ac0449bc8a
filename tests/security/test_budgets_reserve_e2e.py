"""Budgets are reserved before a call starts (issue 30, item 2): parallel tool calls and sub-agents
cannot overshoot a cap. The real CLI with every builtin loaded, a scripted model asking for far more
than the cap allows in one response."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from .conftest import audit_rows, calls, run_cli, write_agent

pytestmark = pytest.mark.e2e

EXIT_BUDGET = 5


def _db(ws: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(ws / ".clawkit" / "state.db")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _tool_names(request) -> set[str]:
    return {t["function"]["name"] for t in request.tools}


def test_forty_parallel_calls_with_a_cap_of_five_run_five(tmp_path, server, audit_home):
    ws = tmp_path / "ws"
    write_agent(ws, server, ["read_file"], plugins="budgets: {run: {tool_calls: 5}}\n")
    for i in range(40):
        (ws / f"notes_{i:02d}.txt").write_text(f"plain notes {i}\n")
    ids = [f"call_{i:02d}" for i in range(40)]
    run = run_cli(ws, server, audit_home, "read my forty notes",
                  calls(*[("read_file", {"path": f"notes_{i:02d}.txt"}) for i in range(40)], ids=ids),
                  "summary: five read, budget reached")
    assert run.proc.returncode == EXIT_BUDGET, run.proc.stderr[-2000:]
    assert run.result["stop_reason"] == "budget"
    ran = [c for c in run.result["tool_calls"] if not c["blocked"]]
    blocked = [c for c in run.result["tool_calls"] if c["blocked"]]
    assert len(ran) == 5 and len(blocked) == 35
    # the steps say the same: five read_file calls executed, the rest blocked before they started
    statuses = _db(ws, "SELECT status, COUNT(*) FROM steps WHERE kind = 'tool' AND name = 'read_file' GROUP BY status")
    assert dict(statuses) == {"ok": 5, "blocked": 35}
    # and the ledger: five executions, thirty-five blocks naming the budget, no decision row for those
    ledger = audit_rows(ws)
    assert sorted(r["step_id"] for r in ledger if r["kind"] == "execution") == sorted(c["id"] for c in ran)
    budget_blocks = [r for r in ledger if r["decision"] == "tool.blocked" and "budget reached" in (r["reason"] or "")]
    assert sorted(r["step_id"] for r in budget_blocks) == sorted(c["id"] for c in blocked)
    # each blocked call's result names the budget; the executed ones read the file
    shown = run.tool_results()
    assert all("budget" in shown[c["id"]] and "tool calls" in shown[c["id"]] for c in blocked)
    assert all("plain notes" in shown[c["id"]] for c in ran)
    # the wrap-up round offered no tools, and nothing ran after it
    assert len(run.requests) == 2 and not run.requests[-1].tools


def test_sub_agents_two_levels_deep_stay_inside_the_root_cap(tmp_path, server, audit_home):
    """The lead starts two children, each asks for twelve grandchildren at once: with
    ``run.tool_calls: 5`` on the lead, its cap counts every call in the tree, so two children and
    three grandchildren run in all (on the old main: 2 + 24 sessions below the lead)."""
    ws = tmp_path / "ws"
    model = {"name": "openai/test", "api_base": server.url, "api_key": "sk-test", "max_retries": 0, "timeout": 20}
    leaf = {"name": "leaf", "model": model, "instructions": "Answer as a leaf.", "tools": []}
    helper = {"name": "helper", "model": model, "instructions": "Delegate as a helper.", "tools": [],
              "subagents": {"leaf": {"agent": leaf, "description": "a leaf worker"}}}
    extra = "subagents: " + json.dumps({"helper": {"agent": helper, "description": "a helper"}}) + "\n"
    write_agent(ws, server, [], plugins="budgets: {run: {tool_calls: 5}}\n", extra=extra)

    def model_answer(request):
        names = _tool_names(request)
        if "agent_helper" in names:
            return calls(*[("agent_helper", {"task": f"part {i}"}) for i in range(2)])
        if "agent_leaf" in names:
            return calls(*[("agent_leaf", {"task": f"leaf {i}"}) for i in range(12)])
        return "an answer"

    run = run_cli(ws, server, audit_home, "fan out", model_answer)
    assert run.proc.returncode == EXIT_BUDGET, run.proc.stderr[-2000:]
    assert run.result["stop_reason"] == "budget"
    leaves = [r for r in run.requests if "Answer as a leaf." in json.dumps(r.body)]
    assert len(leaves) == 3  # 21 of the 24 grandchildren were blocked before they began
    ran = _db(ws, "SELECT name, COUNT(*) FROM steps WHERE kind = 'tool' AND status = 'ok' GROUP BY name")
    assert dict(ran) == {"agent_helper": 2, "agent_leaf": 3}
    assert _db(ws, "SELECT COUNT(*) FROM sessions")[0][0] == 6  # the lead, two children, three grandchildren


def test_a_child_spends_its_parents_model_calls_live(tmp_path, server, audit_home):
    """``run.model_calls: 4`` on the lead: its one call plus three of the child's use them up, so the
    child (which would read file after file for ever) is stopped mid-run and wraps up."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(30):
        (ws / f"part_{i:02d}.txt").write_text(f"part {i}\n")
    model = {"name": "openai/test", "api_base": server.url, "api_key": "sk-test", "max_retries": 0, "timeout": 20}
    reader = {"name": "reader", "model": model, "instructions": "Read every part.", "tools": ["read_file"]}
    extra = "subagents: " + json.dumps({"reader": {"agent": reader, "description": "reads parts"}}) + "\n"
    write_agent(ws, server, ["read_file"], plugins="budgets: {run: {model_calls: 4}}\n", extra=extra)
    n = iter(range(1000))

    def model_answer(request):
        names = _tool_names(request)
        if "agent_reader" in names:
            return calls(("agent_reader", {"task": "read every part"}))
        if names:
            i = next(n)
            return calls(("read_file", {"path": f"part_{i % 30:02d}.txt"}), ids=[f"read_{i}"])
        return "summary so far"

    run = run_cli(ws, server, audit_home, "delegate the reading", model_answer)
    assert run.proc.returncode == EXIT_BUDGET, run.proc.stderr[-2000:]
    child = [r for r in run.requests if "Read every part." in json.dumps(r.body)]
    assert len([r for r in child if r.tools]) == 3  # then the lead's cap stopped it
    assert not child[-1].tools  # its last call was the wrap-up round
    assert "parent run model calls 4 of 4" in json.dumps(child[-1].messages)
