"""Parallel plan steps (issue 27 item 16): parsing the planner's groups, linking parallel_with."""

from __future__ import annotations

import pytest

from clawkit.tools import ToolError
from clawkit_plans.analysis import parse, plan_rows
from clawkit_plans.plan import link_parallel, render


def test_the_planners_groups_become_parallel_steps():
    verdict = parse('{"is_complex": true, "reasoning": "r", "plan": ["a", ["b", "c", " "], ["d"], "e"]}')
    assert verdict["plan"] == ["a", ["b", "c"], "d", "e"]
    rows = plan_rows(verdict["plan"], 10)
    assert [r.get("parallel_with") for r in rows] == [None, [3], [2], None, None]
    assert rows[0]["status"] == "in_progress" and rows[1]["status"] == "pending"
    first_group = plan_rows([["x", "y"], "z"], 10)
    assert [r["status"] for r in first_group] == ["in_progress", "in_progress", "pending"]
    assert plan_rows([["x", "y", "z"]], 2) == [{"title": "x", "status": "in_progress", "parallel_with": [2]},
                                               {"title": "y", "status": "in_progress", "parallel_with": [1]}]


def test_parallel_with_is_checked_and_linked_both_ways():
    rows = link_parallel([{"title": "a", "parallel_with": [2, 3]}, {"title": "b", "parallel_with": []},
                          {"title": "c", "parallel_with": []}, {"title": "d", "parallel_with": []}])
    assert [r.get("parallel_with") for r in rows] == [[2, 3], [1], [1], None]
    assert "1. [ ] a (at once with 2, 3)" in render({"steps": rows})
    with pytest.raises(ToolError, match="names step 5, which is not a step"):
        link_parallel([{"title": "a", "parallel_with": [5]}])
    with pytest.raises(ToolError, match="itself"):
        link_parallel([{"title": "a", "parallel_with": [1]}])
