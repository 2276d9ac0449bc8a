"""clawkit-plans through the real loop (scripted model) and a real SQLite session store."""

from __future__ import annotations

import json

import clawkit_plans
from clawkit.testing import ScriptedReply, call
from clawkit_plans.analysis import parse

STEPS = [{"title": "read the code", "status": "done"}, {"title": "fix the bug", "status": "in_progress"}, {"title": "run tests", "status": "pending"}]


def test_update_plan_persists_and_reaches_the_next_round_and_turn(make_agent):
    agent = make_agent(
        [ScriptedReply.calls(call("update_plan", steps=STEPS, note="bug in login")), "working on it", "next"],
        plugins=(clawkit_plans,), tools=["update_plan"],
    )
    r = agent.run("fix the login bug")
    assert r.reply == "working on it" and r.tool_calls[0]["is_error"] is False
    first, second = agent.provider.requests[:2]
    assert "call update_plan with the steps" in first.system  # the hint before there is a plan
    assert "1. [x] read the code\n2. [>] fix the bug\n3. [ ] run tests" in second.system  # mid-turn rebuild
    assert "Note: bug in login" in second.system
    stored = agent.store.load_metadata(r.session_id)["plan"]
    assert [s["status"] for s in stored["steps"]] == ["done", "in_progress", "pending"] and stored["source"] == "model"
    agent.run("go on", session_id=r.session_id)
    assert "2. [>] fix the bug" in agent.provider.requests[2].system  # every later request
    events = [e for e in agent.store.events(r.session_id) if e["type"] == "plan.updated"]
    assert events[0]["data"]["steps"] == 3 and events[0]["data"]["done"] == 1
    exported = [json.loads(line) for line in agent.store.export_jsonl(r.session_id)]
    assert exported[0]["metadata"]["plan"]["steps"][1]["title"] == "fix the bug"


def test_bad_plans_are_tool_errors(make_agent):
    agent = make_agent(
        [ScriptedReply.calls(call("update_plan", steps=[{"title": "x", "status": "maybe"}])),
         ScriptedReply.calls(call("update_plan", steps=[])), "ok"],
        plugins=(clawkit_plans,), tools=["update_plan"],
    )
    r = agent.run("go")
    assert [c["is_error"] for c in r.tool_calls] == [True, True]
    results = [m.content for m in agent.provider.requests[-1].messages if m.role == "tool"]
    assert "status" in results[0] and "at least one step" in results[1]
    assert "plan" not in agent.store.load_metadata(r.session_id)


def test_no_plan_section_when_the_tool_is_not_allowed(make_agent):
    agent = make_agent(["ok"], plugins=(clawkit_plans,), instructions="Be brief.")
    agent.run("hi")
    assert "Plan" not in (agent.provider.requests[0].system or "")
    assert "update_plan" not in [t.name for t in agent.provider.requests[0].tools]


def test_pre_analysis_plans_a_complex_request(make_agent):
    verdict = {"is_complex": True, "reasoning": "three files change", "plan": ["find the handler", "patch it", "test it"]}
    agent = make_agent([json.dumps(verdict), "on it"], plugins=(clawkit_plans,), tools=["update_plan"],
                       plugin_config={"plans": {"pre_analysis": {"enabled": True}}})
    r = agent.run("refactor the auth module and update its tests")
    analysis, main = agent.provider.requests
    assert analysis.tools == [] and "lead architect" in analysis.system
    assert [m.content for m in analysis.messages] == ["refactor the auth module and update its tests"]
    assert "1. [>] find the handler\n2. [ ] patch it\n3. [ ] test it" in main.system
    plan = agent.store.load_metadata(r.session_id)["plan"]
    assert plan["source"] == "pre_analysis" and plan["note"] == "three files change"
    assert agent.store.usage_totals(r.session_id)["calls"] == 2  # the analysis call is recorded like any call


def test_pre_analysis_lets_a_simple_request_through(make_agent):
    agent = make_agent(['{"is_complex": false, "reasoning": "a greeting", "plan": []}', "hello"], plugins=(clawkit_plans,),
                       tools=["update_plan"], plugin_config={"plans": {"pre_analysis": {"enabled": True}}})
    r = agent.run("hi there")
    assert r.reply == "hello"
    assert "plan" not in agent.store.load_metadata(r.session_id)
    ev = [e["data"] for e in agent.store.events(r.session_id) if e["type"] == "plan.pre_analysis"]
    assert ev == [{"ok": True, "is_complex": False, "reasoning": "a greeting", "steps": 0}]


def test_pre_analysis_garbage_is_reported_not_fatal(make_agent):
    agent = make_agent(["I think it is complex!", "done"], plugins=(clawkit_plans,),
                       plugin_config={"plans": {"pre_analysis": {"enabled": True}}})
    r = agent.run("do the thing")
    assert r.reply == "done"
    ev = [e["data"] for e in agent.store.events(r.session_id) if e["type"] == "plan.pre_analysis"]
    assert ev[0]["ok"] is False


def test_parse_accepts_fenced_json_and_rejects_wrong_shapes():
    assert parse('```json\n{"is_complex": true, "reasoning": "r", "plan": ["a", " ", "b"]}\n```')["plan"] == ["a", "b"]
    assert parse('{"is_complex": "yes"}') is None
    assert parse("no json") is None
