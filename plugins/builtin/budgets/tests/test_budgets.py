"""clawkit-budgets through the real loop (scripted model, 10 + 5 tokens a call) and real SQLite."""

from __future__ import annotations

import pytest

import clawkit_budgets
from clawkit import hookimpl
from clawkit.testing import ScriptedReply, call


import time


class Tools:
    delay = 0.0

    @hookimpl
    def register_tools(self, register, agent):
        def work(n: int) -> str:
            """Do a step of work."""
            time.sleep(self.delay)
            return f"step {n} done"

        register(work)


def _agent(make_agent, script, **budgets):
    return make_agent(script, plugins=(clawkit_budgets, Tools()), tools=["work"], plugin_config={"budgets": budgets})


def worker(summary):
    """A model that keeps calling ``work`` while tools are offered, and summarises when none are."""
    n = iter(range(1000))

    def reply(request):
        return ScriptedReply.calls(("work", {"n": next(n)})) if request.tools else summary

    return reply


def _steps(n):
    return [ScriptedReply.calls(call("work", n=i)) for i in range(n)]


@pytest.mark.parametrize(
    "caps, cap",
    [
        ({"run": {"tool_calls": 2}}, "run.tool_calls"),
        ({"run": {"model_calls": 2}}, "run.model_calls"),
        ({"run": {"tokens": 40}}, "run.tokens"),
        ({"run": {"wall_time": 0.5}}, "run.wall_time"),
    ],
)
def test_each_run_cap_stops_the_run_with_the_wrap_up_round(make_agent, monkeypatch, caps, cap):
    if cap == "run.wall_time":
        monkeypatch.setattr(Tools, "delay", 0.2)
    agent = _agent(make_agent, [worker("summary: what was done, what is left")] * 10, **caps)
    r = agent.run("do six steps")
    assert r.stop_reason == "budget" and r.reply == "summary: what was done, what is left"
    assert agent.provider.requests[-1].tools == []
    ev = [e["data"] for e in agent.store.events(r.session_id) if e["type"] == "budget.exceeded"]
    assert len(ev) == 1 and ev[0]["cap"] == cap
    assert 0 < len(r.tool_calls) <= 4 and r.tool_calls[-1]["blocked"] in (True, False)


def test_cost_cap_counts_the_provider_cost(make_agent):
    from clawkit import Usage

    replies = _steps(4)
    for r in replies:
        r.usage = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, cost=0.4)
    agent = _agent(make_agent, replies + ["stopped"], run={"cost": 1.0})
    r = agent.run("go")
    assert r.stop_reason == "budget" and "run cost" in r.stop_detail
    assert [c["blocked"] for c in r.tool_calls] == [False, False, True]


def test_session_budget_spans_runs_and_a_raised_budget_continues(make_agent):
    agent = _agent(make_agent, _steps(2) + ["first run done"] + _steps(1) + ["stopped"], session={"tool_calls": 3})
    r1 = agent.run("part one")
    assert r1.stop_reason == "done"
    r2 = agent.run("part two", session_id=r1.session_id)
    assert r2.stop_reason == "budget" and "session tool calls" in r2.stop_detail
    # a spent session is refused without a model call
    calls_before = len(agent.provider.requests)
    r3 = agent.run("part three", session_id=r1.session_id)
    assert r3.stop_reason == "budget" and "Raise the session budget" in r3.reply
    assert len(agent.provider.requests) == calls_before
    # raised: the same session continues
    agent.config.plugin("budgets").session.tool_calls = 10
    agent.provider.script.extend(_steps(1) + ["all done"])
    r4 = agent.run("part three", session_id=r1.session_id)
    assert r4.stop_reason == "done" and r4.reply == "all done"


def test_warning_notice_near_a_cap(make_agent):
    agent = _agent(make_agent, _steps(4) + ["done"], run={"tool_calls": 5}, warn_at=0.6)
    r = agent.run("go")
    systems = [q.system or "" for q in agent.provider.requests]
    warned = [i for i, s in enumerate(systems) if "Budget notice" in s]
    assert warned == [3]  # after the third of five tool calls
    assert r.stop_reason == "done"


def test_no_caps_costs_nothing(make_agent):
    agent = _agent(make_agent, _steps(3) + ["done"])
    r = agent.run("go")
    assert r.stop_reason == "done" and "budgets" not in agent.store.load_metadata(r.session_id)


def test_usage_a_tool_reports_counts_against_the_run(make_agent):
    """A sub-agent's tool result carries its usage (metadata ``usage``); it rolls into the parent's run."""

    class ReportsUsage:
        @hookimpl
        def after_tool_call(self, ctx, call, result):
            result.metadata["usage"] = {"prompt_tokens": 900, "completion_tokens": 100, "total_tokens": 1000}
            return result

    agent = make_agent([worker("wrapped up")] * 5, plugins=(clawkit_budgets, Tools(), ReportsUsage()), tools=["work"],
                       plugin_config={"budgets": {"run": {"tokens": 500}}})
    r = agent.run("delegate")
    assert r.stop_reason == "budget" and "run tokens" in r.stop_detail and len(r.tool_calls) == 1


def test_the_cap_check_knows_every_kind():
    from clawkit_budgets.plugin import KINDS, Caps, _capped

    assert set(KINDS) == set(Caps.model_fields)
    assert not _capped(Caps())
    for kind in KINDS:  # (_capped spells the kinds out: a new one must be added there)
        assert _capped(Caps(**{kind: 1}))
