"""clawkit-classifier with in-process scripted models (fast); see test_classifier_e2e.py for HTTP."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

import clawkit_classifier
from clawkit import hookimpl
from clawkit.prompt import StaticContributor
from clawkit.testing import ScriptedProvider
from clawkit.types import Event, SessionClassification
from clawkit_classifier import SYSTEM_PROMPT, parse_classification

SECURITY = json.dumps({"label": "Review a login form for SQL injection", "topic": "coding", "complexity": "moderate",
                       "domain": ["security", "python"], "flags": []})
FRONTEND = json.dumps({"label": "Style a button", "topic": "coding", "complexity": "simple", "domain": ["frontend"]})


class ClassifierModel:
    """Registers provider 'cls' whose every instance replays one shared script."""

    name = "test-classifier-model"

    def __init__(self, *script, delay: float = 0.0):
        self.provider = ScriptedProvider(script)
        self.delay = delay
        self.configs = []

    @hookimpl
    def register_providers(self, register):
        def factory(cfg):
            self.configs.append(cfg)
            if not self.delay:
                return self.provider

            outer = self

            class Slow:
                async def complete(self, request, on_text=None):
                    await asyncio.sleep(outer.delay)
                    return await outer.provider.complete(request, on_text)

            return Slow()

        register("cls", factory)


class Sections:
    name = "test-sections"

    @hookimpl
    def register_prompt_contributor(self, register, agent):
        register(StaticContributor("base", "You help.", priority=0))
        register(StaticContributor("security", "SECURITY: validate every input.", tags=["domain:security"]))
        register(StaticContributor("frontend", "FRONTEND: use semantic HTML.", tags=["domain:frontend"]))


CLS_MODEL = {"name": "cls/small", "provider": "cls"}


def build_agent(workspace, script, plugins, plugin_sections):
    """Like the kit's make_agent, with a ``plugins:`` config section (make_agent's ``plugins``
    keyword is taken by the plugin objects)."""
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.testing import plugin_manager

    pm = plugin_manager(*plugins)  # the full install, as the kit's make_agent
    data = {"name": "test-agent", "model": "scripted/test", "workspace": str(workspace), "plugins": plugin_sections}
    cfg = validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm)))
    return Agent(cfg, pm=pm, provider=ScriptedProvider(script), persist=False)


@pytest.fixture
def make(workspace):
    agents = []

    def factory(model_script, classifier_replies, *, delay=0.0, **classifier_cfg):
        cm = ClassifierModel(*classifier_replies, delay=delay)
        agent = build_agent(workspace, model_script, (clawkit_classifier, cm, Sections()),
                            {"classifier": {"model": CLS_MODEL, **classifier_cfg}})
        agents.append(agent)
        return agent, cm

    yield factory
    for a in agents:
        a.store.close()


def events(agent, sid, type):
    return agent.store.events(sid, type)


def test_first_message_is_classified_and_shapes_the_first_prompt(make):
    agent, cm = make(["Looks fine."], [SECURITY])
    r = agent.run("Is this login query safe? cursor.execute('SELECT * FROM users WHERE name=' + name)")
    system = agent.provider.requests[0].system
    assert "SECURITY" in system and "FRONTEND" not in system
    s = agent.session(r.session_id)
    assert s.classification.domain == ["security", "python"]
    assert agent.store.load_classification(r.session_id).label.startswith("Review a login form")
    assert events(agent, r.session_id, "session.classified")
    # one call to the dedicated model, with the classifier's prompt and defaults
    req = cm.provider.requests[0]
    assert req.system == SYSTEM_PROMPT and not req.stream and "login query" in req.messages[0].content
    assert cm.configs[0].name == "cls/small" and cm.configs[0].temperature == 0.0 and cm.configs[0].max_retries == 1


def test_classification_is_not_repeated_every_turn(make):
    agent, cm = make(["one", "two", "three"], [SECURITY])
    sid = agent.run("check my auth code").session_id
    agent.run("and the session cookie?", session_id=sid)
    agent.run("thanks", session_id=sid)
    assert len(cm.provider.requests) == 1
    assert all("SECURITY" in r.system for r in agent.provider.requests)


def test_no_model_configured_skips_with_a_note_and_never_uses_the_main_model(make_agent, caplog):
    agent = make_agent(["hello", "again", "third"], plugins=(clawkit_classifier, Sections()))
    with caplog.at_level(logging.INFO, logger="clawkit.classifier"):
        r = agent.run("hi")
    assert r.reply == "hello"
    assert len(agent.provider.requests) == 1  # only the turn itself: no classification call
    assert agent.session(r.session_id).classification is None
    assert "no classifier model" in caplog.text
    skipped = events(agent, r.session_id, "classifier.skipped")
    assert len(skipped) == 1 and "plugins.classifier.model" in skipped[0]["data"]["reason"]
    agent.run("again", session_id=r.session_id)
    assert len(events(agent, r.session_id, "classifier.skipped")) == 1
    # issue 29 (deliberate change): once per agent in a process, no longer once per session with a
    # `classifier.warned` metadata key — a server's later sessions record nothing for a feature left off
    other = agent.run("a new session")
    assert other.session_id != r.session_id and events(agent, other.session_id, "classifier.skipped") == []
    assert "classifier.warned" not in agent.store.load_metadata(r.session_id)
    fresh = make_agent(["hi"], plugins=(clawkit_classifier, Sections()))  # a new agent (a new process): noted again
    assert len(events(fresh, fresh.run("hi").session_id, "classifier.skipped")) == 1


def test_garbage_output_leaves_the_session_unclassified_and_the_turn_succeeds(make):
    agent, cm = make(["Answer."], ["I'd say it is about computers, probably."])
    r = agent.run("hello there")
    assert r.reply == "Answer." and r.stop_reason == "done"
    assert agent.session(r.session_id).classification is None
    failed = events(agent, r.session_id, "classifier.failed")
    assert failed and "no JSON object" in failed[0]["data"]["reason"]
    assert "SECURITY" not in agent.provider.requests[0].system


def test_partial_json_is_repaired(make):
    partial = '```json\n{"label": "Harden nginx", "topic": "Ops", "complexity": "medium", "domain": "security, nginx"'
    agent, _ = make(["ok"], [partial])
    r = agent.run("harden my nginx config")
    c = agent.session(r.session_id).classification
    assert (c.topic, c.complexity, c.domain) == ("ops", "moderate", ["security", "nginx"])


def test_a_failing_classifier_model_is_isolated(make):
    from clawkit.providers import ProviderError

    agent, _ = make(["fine"], [ProviderError("503 from classifier")])
    r = agent.run("hello")
    assert r.reply == "fine"
    assert "503" in events(agent, r.session_id, "classifier.failed")[0]["data"]["reason"]


def test_failed_attempts_are_bounded(make):
    agent, cm = make(["a", "b", "c"], ["nope", "nope again"], max_attempts=2)
    sid = agent.run("one").session_id
    agent.run("two", session_id=sid)
    agent.run("three", session_id=sid)
    assert len(cm.provider.requests) == 2


def test_slow_classifier_shapes_the_next_prompt_not_the_first(make):
    agent, cm = make(["first", "second"], [SECURITY], delay=0.2, wait_ms=20)

    async def two_turns():
        r1 = await agent.turn("review my login code")
        await asyncio.sleep(0.3)  # the classification finishes in the background
        await agent.turn("and the password reset?", session_id=r1.session_id)
        return r1.session_id

    sid = asyncio.run(two_turns())
    first, second = agent.provider.requests
    assert "SECURITY" not in first.system
    assert "SECURITY" in second.system
    assert agent.session(sid).classification.domain[0] == "security"


def test_wait_is_configurable_and_set_by_the_plugin(make):
    agent, _ = make(["ok"], [SECURITY], delay=0.05, wait_ms=1000)
    r = agent.run("review my login code")  # waits up to 1 s: the 50 ms classifier makes it
    assert "SECURITY" in agent.provider.requests[0].system
    assert agent.session(r.session_id).classification is not None


def test_provider_set_up_counts_neither_against_timeout_nor_wait(workspace):
    """A classifier provider whose set-up (``warm``: a cold import on a busy machine) takes 0.6 s,
    with a 0.3 s timeout and a 0.2 s wait: the 50 ms answer still shapes the first prompt."""
    inner = ScriptedProvider([SECURITY])

    class SlowStart:
        async def warm(self):
            await asyncio.sleep(0.6)

        async def complete(self, request, on_text=None):
            await asyncio.sleep(0.05)
            return await inner.complete(request, on_text)

    class Model:
        @hookimpl
        def register_providers(self, register):
            register("cls", lambda cfg: SlowStart())

    agent = build_agent(workspace, ["ok"], (clawkit_classifier, Model(), Sections()),
                        {"classifier": {"model": CLS_MODEL, "timeout": 0.3, "wait_ms": 200}})
    try:
        r = agent.run("review my login code")
        assert "SECURITY" in agent.provider.requests[0].system
        (timing,) = [e["data"] for e in events(agent, r.session_id, "classifier.timing")]
        assert timing["warm_ms"] >= 550 and timing["request_ms"] < 300 and timing["ok"] is True
        assert not events(agent, r.session_id, "classifier.failed")
    finally:
        agent.store.close()


def test_reclassifies_every_n_turns(make):
    agent, cm = make(["1", "2", "3", "4"], [SECURITY, FRONTEND], reclassify_every=2)
    sid = agent.run("login code review").session_id
    agent.run("more", session_id=sid)
    assert len(cm.provider.requests) == 1
    agent.run("now the css", session_id=sid)  # turn 3: re-classified
    assert len(cm.provider.requests) == 2
    assert "FRONTEND" in agent.provider.requests[2].system and "SECURITY" not in agent.provider.requests[2].system
    assert len(events(agent, sid, "session.classified")) == 2


@pytest.mark.parametrize("event_type", ["compaction", "compaction.after"])
def test_reclassifies_after_compaction(workspace, event_type):
    class Compacts:  # reports a compaction during the first turn's model call, as clawkit-compaction does
        fired = False

        @hookimpl
        def before_llm_call(self, ctx, request):
            if not self.fired and request.metadata.get("purpose") != "classification":
                self.fired = True
                ctx.emit(event_type)

    cm = ClassifierModel(SECURITY, FRONTEND)
    agent = build_agent(workspace, ["1", "2"], (clawkit_classifier, cm, Sections(), Compacts()),
                        {"classifier": {"model": CLS_MODEL}})
    r = agent.run("login code review")
    session = agent.session(r.session_id)
    # compaction is reported as `compaction` (kernel vocabulary) or `compaction.after` (clawkit-compaction)
    assert session.get("reclassify") is True
    agent.run("now the css", session_id=r.session_id)
    assert len(cm.provider.requests) == 2
    assert "FRONTEND" in agent.provider.requests[1].system


def test_other_events_do_not_trigger_reclassification(make):
    agent, _ = make(["1"], [SECURITY])
    r = agent.run("login code review")
    agent.hooks.call_sync("on_event", event=Event(type="compaction.failed", session_id=r.session_id, data={}))
    assert not agent.session(r.session_id).get("reclassify")


def test_config_accepts_a_model_string(workspace):
    agent = build_agent(workspace, ["x"], (clawkit_classifier,), {"classifier": {"model": "openai/gpt-4o-mini", "wait_ms": 100}})
    cfg = agent.config.plugin("classifier")
    assert cfg.model.name == "openai/gpt-4o-mini" and cfg.wait_ms == 100


@pytest.mark.parametrize(
    "text, ok",
    [
        ('{"topic": "coding", "complexity": "hard"}', True),
        ('Sure! Here it is: {"topic": "research", "complexity": "simple", "domain": ["ml"]} Hope it helps', True),
        ('[{"topic": "ops", "complexity": "trivial"}]', True),
        ('{"topic": "coding"}', False),
        ('{"topic": "coding", "complexity": "impossible"}', False),
        ('{"topic": 7, "complexity": "hard"}', False),
        ("", False),
        ("{{{{", False),
        ("null", False),
    ],
)
def test_parse_accepts_repairable_and_rejects_the_rest(text, ok):
    result, why = parse_classification(text)
    assert (result is not None) is ok
    assert bool(why) is not ok


def test_parse_normalises_fields():
    c, _ = parse_classification(json.dumps({"label": "x" * 120, "topic": "Knitting", "complexity": "EASY",
                                            "domain": ["A", "b", "c", "d"], "flags": "Urgent;Sensitive;Other"}))
    assert isinstance(c, SessionClassification)
    assert len(c.label) == 79 and c.topic == "other" and c.complexity == "simple"
    assert c.domain == ["a", "b", "c"] and c.flags == ["urgent", "sensitive"]


def test_a_finished_turns_context_is_not_kept(make):
    """The classifier remembers a turn's context only while the turn runs: it used to keep the last
    512 sessions' contexts (each with its whole history) after their turns ended — memory a server
    never got back, and a copy of a conversation that outlived ``sessions delete``."""
    import gc
    import weakref

    from clawkit_classifier import classifier

    agent, cm = make(["Looks fine.", "again"], [SECURITY])
    seen: list = []
    original = classifier._remember

    class Probe:  # kept in the turn's state: it dies with the turn's context
        pass

    def spy(ctx):
        ctx.state["test.probe"] = probe = Probe()
        seen.append(weakref.ref(probe))
        original(ctx)

    classifier._remember = spy
    try:
        sid = agent.run("Is this login query safe?").session_id
        agent.run("and now?", session_id=sid)
    finally:
        classifier._remember = original
    assert sid not in classifier._live and len(seen) == 2
    gc.collect()
    assert [r() for r in seen] == [None, None]
    assert len(cm.provider.requests) == 1  # classified once, as before


def test_without_a_model_later_sessions_keep_no_turn_context_and_compaction_sets_no_flags(make_agent):
    """Issue 29 goal 5 (deliberate change): with no classifier model nothing is ever classified, so a turn's
    context is kept only for the agent's first session (its classifier.skipped event), and a compaction
    leaves the session's re-classification keys alone (they were set for nothing)."""
    from clawkit_classifier import classifier

    agent = make_agent(["one", "two"], plugins=(clawkit_classifier, Sections()))
    first = agent.run("hi")
    seen: list[bool] = []

    class Probe:
        @hookimpl(trylast=True)
        def message_received(self, ctx, message):
            seen.append(ctx.session.id in classifier._live)

    agent.pm.register(Probe())
    agent.hooks._cache.clear()
    second = agent.run("a new session")
    assert seen == [False] and second.session_id != first.session_id
    session = agent.session(second.session_id)
    classifier._live[second.session_id] = type("Ctx", (), {"agent": agent.config, "session": session})()  # a turn running
    try:
        agent.hooks.call_sync("on_event", event=Event(type="compaction.after", session_id=second.session_id, data={}))
        assert session.get("reclassify") is None and session.get("classifier.attempts") is None
    finally:
        classifier._live.pop(second.session_id, None)
