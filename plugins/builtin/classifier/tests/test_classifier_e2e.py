"""End to end over real HTTP: agent YAML → litellm → loopback model_server, for both the
agent's model and the classifier's, with contributors from .agents/prompts/*.md."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from clawkit.runtime import open_agent

pytest.importorskip("clawkit_litellm")
pytest.importorskip("clawkit_contributors")

CLASSIFIER_MARK = "You classify a conversation"


def write_agent(ws: Path, url: str, wait_ms: int = 10_000) -> Path:
    prompts = ws / ".agents" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "security.md").write_text("---\nid: security\ntags: [domain:security]\npriority: 40\n---\n"
                                         "SECURITY: treat every input as hostile; check for injection.\n")
    (prompts / "frontend.md").write_text("---\nid: frontend\ntags: [domain:frontend]\n---\n"
                                         "FRONTEND: prefer semantic, accessible HTML.\n")
    path = ws / "agent.yaml"
    path.write_text(
        f"""
name: reviewer
model: {{name: openai/main-model, api_base: "{url}", max_retries: 0}}
instructions: Review code carefully.
state_db: state.db
plugins:
  classifier:
    model: {{name: openai/tiny-classifier, api_base: "{url}"}}
    wait_ms: {wait_ms}
"""
    )
    return path


@pytest.fixture
def only_our_plugins(monkeypatch):
    import clawkit_contributors

    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "clawkit-litellm,clawkit-contributors,clawkit-classifier")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    yield
    clawkit_contributors.close_all()  # the workspace watcher


def system_of(req) -> str:
    return next((m["content"] for m in req.messages if m["role"] == "system"), "")


def answer_with(classification: str):
    def respond(req):
        if system_of(req).startswith(CLASSIFIER_MARK):
            return classification
        return "Reviewed."

    return respond


def turns(agent, *texts):
    async def go():
        sid = None
        for t in texts:
            r = await agent.turn(t, session_id=sid)
            sid = r.session_id
        return sid, r

    return asyncio.run(go())


def test_security_message_selects_the_security_contributor(model_server, workspace, only_our_plugins):
    verdict = json.dumps({"label": "SQL injection review", "topic": "coding", "complexity": "moderate",
                          "domain": ["security", "sql"], "flags": []})
    model_server.script(answer_with(verdict))
    agent = open_agent(write_agent(workspace, model_server.url))
    try:
        sid, result = turns(agent, "Is `cursor.execute('SELECT * FROM t WHERE id=' + uid)` safe from injection?", "And the login form?")
        assert result.reply == "Reviewed."
        cls_reqs = [r for r in model_server.requests if system_of(r).startswith(CLASSIFIER_MARK)]
        main_reqs = [r for r in model_server.requests if not system_of(r).startswith(CLASSIFIER_MARK)]
        assert len(cls_reqs) == 1 and cls_reqs[0].body["model"] == "tiny-classifier"
        assert len(main_reqs) == 2 and all(r.body["model"] == "main-model" for r in main_reqs)
        for req in main_reqs:
            system = system_of(req)
            assert "SECURITY: treat every input" in system and "FRONTEND" not in system
            assert "Review code carefully." in system
        c = agent.store.load_classification(sid)
        assert c.domain == ["security", "sql"] and c.label == "SQL injection review"
        assert agent.store.events(sid, "session.classified")
    finally:
        agent.store.close()


def test_garbage_classifier_output_leaves_the_session_unclassified(model_server, workspace, only_our_plugins):
    model_server.script(answer_with("Hmm, hard to say. It's about code? {{{"))
    agent = open_agent(write_agent(workspace, model_server.url))
    try:
        sid, result = turns(agent, "Is my login query safe?")
        assert result.reply == "Reviewed." and result.stop_reason == "done"
        assert agent.store.load_classification(sid) is None
        assert agent.store.events(sid, "classifier.failed")
        main = [r for r in model_server.requests if not system_of(r).startswith(CLASSIFIER_MARK)]
        assert "SECURITY" not in system_of(main[0]) and "FRONTEND" not in system_of(main[0])
    finally:
        agent.store.close()


def test_classifier_http_error_is_isolated(model_server, workspace, only_our_plugins):
    from clawkit.testing.server import Fault

    def respond(req):
        return Fault.status(500, "classifier down") if system_of(req).startswith(CLASSIFIER_MARK) else "Reviewed."

    model_server.script(respond)
    agent = open_agent(write_agent(workspace, model_server.url))
    try:
        sid, result = turns(agent, "hello")
        assert result.reply == "Reviewed."
        assert agent.store.load_classification(sid) is None
        assert "failed" in agent.store.events(sid, "classifier.failed")[0]["data"]["reason"]
    finally:
        agent.store.close()
