"""Issue 27 item 7 through the real CLI with every builtin loaded: model choice from routing. A
routed skill's or a confident profile's ``modelOverride`` wins over the agent's model; a route less
confident than ``escalation.below`` goes to the stronger model; a fallback chain answers when the
chosen model fails; the sub-agent dispatch threshold defaults to the seed's 0.7 and is
configurable. Old main: none of these keys existed and every turn used the agent's model; dispatch
happened from 0.35."""

from __future__ import annotations

from typing import Any

import pytest

from clawkit.testing.server import Fault

from .conftest import Cases, run_batch, write_agent

pytestmark = pytest.mark.e2e

RESEARCH = "Look up the population of Lisbon and give me the sources"
UNSURE = "what is the population of Lisbon"  # research, confidence 0.625
SKILL = """# MANIFEST
id: ledger-audit
keywords: [ledger audit]
modelOverride: openai/auditor
---
# VIBE
**Purpose:** Audit the ledger.
---
# CLAW-IDL
interface LedgerArgs {
  year?: number;
}
"""
CHILD = """\
subagents:
  researcher:
    agent: {name: researcher, model: {name: openai/child, api_base: "URL", api_key: sk-test, max_retries: 0, timeout: 20}, tools: [read_file]}
    description: Researches questions
"""


def model_of(request: Any) -> str:
    return str(request.body.get("model", "")).split("/")[-1]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, server, audit_home):
    root = tmp_path_factory.mktemp("seeds-models")
    cases = Cases()
    server.reset()
    server.script(*([cases] * 60))
    jobs: list[dict[str, Any]] = []

    def job(name: str, message: str, plugins: str, *replies: Any, extra: str = "", files: dict[str, str] | None = None):
        ws = root / name
        write_agent(ws, server, ["read_file", "skills"], plugins, extra=extra.replace("URL", server.url))
        for rel, text in (files or {}).items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text)
        tag = cases.add(name, *(replies or ("ok",)))
        jobs.append({"name": name, "cwd": str(ws), "argv": ["run", "agent.yaml", f"{message} {tag}", "--json"]})

    job("default", RESEARCH, "")
    job("profile", RESEARCH, "translation:\n  profiles:\n    research: {modelOverride: openai/strong}\n")
    job("skill", "run the ledger audit for 2025", "translation:\n  profiles:\n    research: {modelOverride: openai/strong}\n",
        files={"skills/ledger-audit.claws": SKILL})
    job("escalate", UNSURE, "translation:\n  escalation: {model: openai/stronger, below: 0.7}\n")
    job("fallback", RESEARCH, "translation:\n  profiles:\n    research: {modelOverride: openai/primary, fallbackModels: [openai/backup]}\n",
        lambda req: Fault.status(400, "primary is down") if model_of(req) == "primary" else "backup answered")
    route = "translation:\n  profiles:\n    research: {subagent: researcher}\n"
    job("threshold-default", UNSURE, route, "lead answered", extra=CHILD)
    job("threshold-low", UNSURE, route + "  dispatch_threshold: 0.5\n", "child answered", "lead answered", extra=CHILD)
    return {"cases": cases, "results": run_batch(jobs, audit_home, root)}


def _models(outcome, name) -> list[str]:
    res = outcome["results"][name]
    assert res["rc"] == 0, res["stderr"][-3000:]
    return [model_of(r) for r in outcome["cases"].requests[name]]


def test_the_agent_model_without_a_routed_choice(outcome):
    assert _models(outcome, "default") == ["test"]


def test_a_profile_model_override_wins_over_the_agent_model(outcome):
    assert _models(outcome, "profile") == ["strong"]


def test_a_routed_skill_model_override_wins_over_the_profile(outcome):
    assert _models(outcome, "skill") == ["auditor"]


def test_a_low_confidence_route_escalates_to_the_stronger_model(outcome):
    assert _models(outcome, "escalate") == ["stronger"]


def test_the_fallback_chain_answers_when_the_chosen_model_fails(outcome):
    assert _models(outcome, "fallback") == ["primary", "backup"]
    assert outcome["results"]["fallback"]["json"]["reply"] == "backup answered"


def test_the_dispatch_threshold_defaults_to_0_7_and_is_configurable(outcome):
    assert _models(outcome, "threshold-default") == ["test"]  # 0.625 < 0.7: the lead answers itself
    calls = outcome["results"]["threshold-default"]["json"]["tool_calls"]
    assert not [c for c in calls if c["name"] == "agent_researcher"]
    assert sorted(_models(outcome, "threshold-low")) == ["child", "test"]  # 0.625 >= 0.5: dispatched
