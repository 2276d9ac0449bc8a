"""The translation device inside an agent: routing, tool profiles, scrubbing every delivery, metrics."""

from __future__ import annotations

import json

import pytest

import clawkit_translation
from clawkit import hookimpl
from clawkit.config import ConfigError
from clawkit.testing import ScriptedProvider
from clawkit_translation import TranslationConfig, route_message
from clawkit_translation.ct1 import CT1Message
from clawkit_translation.router import IntentRouter, SkillInfo

ECHO = (
    "CT/1 REQ web_search q=\"paris weather\" limit=3\n"
    "[ClawTalk routing: intent=weather, profile=research, confidence=0.91]\n"
    ">>$sub(researcher) goal=\"check forecast\"\n"
    "It is sunny in Paris [ClawTalk routing: done] today.\n"
    "ok?web:s q=paris\n"
    "- ok, bring sunglasses\n"
)
CLEAN = "It is sunny in Paris today.\n- ok, bring sunglasses\n"


def tools():
    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: file path
        """
        return "content"

    def web_search(query: str) -> str:
        """Search the web.

        Args:
            query: what to search
        """
        return "results"

    def exec(command: str) -> str:
        """Run a shell command.

        Args:
            command: the command
        """
        return "ok"

    return [read_file, web_search, exec]


class ToolsPlugin:
    @hookimpl
    def register_tools(self, register, agent):
        for fn in tools():
            register(fn)


@pytest.mark.parametrize(
    "text,intent,profile",
    [
        ("what's the weather in Paris?", "weather", "research"),
        ("search the web for nodejs vulnerabilities", "web_search", "research"),
        ("fix the bug in app.py", "code", "coder"),
        ("remember that I prefer tea", "remember", "memory"),
        ("open https://example.com and click login", "browse", "browser"),
        ("remind me every morning at 8am to drink water", "schedule", "automation"),
        ("restart the nginx service", "shell", "system"),
        ("hi there!", "greeting", "conversation"),
    ],
)
def test_intent_classification(text, intent, profile):
    got_intent, got_profile, confidence = IntentRouter().classify(text)
    assert (got_intent, got_profile) == (intent, profile) and 0.5 <= confidence < 1


def test_classification_is_stable_across_repeats():
    """The router keeps no state between messages: the same text gets the same answer however often and in
    whatever order it comes (its speed, < 1 ms a message, is measured by tests/benchmarks/bench_translation.py)."""
    router = IntentRouter()
    msgs = ["what's the weather in Paris?", "fix the bug in app.py " * 20, "hi", "remind me every day at 9am"]
    first = [IntentRouter().classify(m) for m in msgs]
    assert [router.classify(msgs[i % 4]) for i in range(2000)] == first * 500


def test_skill_matching_by_name_description_and_keywords():
    skills = [SkillInfo("weather", "Current conditions and forecasts"), SkillInfo("github-issues", "Triage GitHub issues"),
              SkillInfo("trips", "", ("flight", "hotel booking"))]
    r = IntentRouter()
    assert r.match_skills("what's the weather in Paris?", skills) == ["weather"]
    assert r.match_skills("list open issues on github", skills) == ["github-issues"]
    assert r.match_skills("find me a flight to Rome", skills) == ["trips"]
    assert r.match_skills("tell me a joke", skills) == []


@pytest.fixture
def build(workspace):
    """``build(script, plugin_config=None, tools=[...], chunk_size=0, extra=())`` → an Agent with the
    translation plugin and a ``plugins:`` section (make_agent's ``plugins`` are plugin objects)."""
    from clawkit.config import collect_sections, validate_agent
    from clawkit.hooks import HookRunner
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager

    made = []

    def factory(script=(), plugin_config=None, tools=("read_file", "web_search", "exec"), chunk_size=0, extra=(), **config):
        data = {"name": "t", "model": "scripted/test", "workspace": str(workspace), "tools": list(tools),
                "plugins": plugin_config or {}, **config}
        # narrow: the router's own decisions on stand-in tools (web_search, exec) that the full install does not have;
        # test_translation_e2e.py drives routing with everything loaded
        pm = get_plugin_manager(extra=(clawkit_translation, ToolsPlugin(), *extra), load_entry_points=False)
        cfg = validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm)))
        agent = Agent(cfg, pm=pm, provider=ScriptedProvider(script, chunk_size=chunk_size))
        made.append(agent)
        return agent

    yield factory
    for a in made:
        a.store.close()


class Spy:
    def __init__(self):
        self.routes = []
        self.delivered = []

    @hookimpl(trylast=True)
    def before_llm_call(self, ctx, request):
        self.routes.append(dict(ctx.state.get("route") or {}))

    def deliver(self, outbound):
        self.delivered.append((outbound.kind, outbound.content, dict(outbound.metadata)))


def test_route_is_state_metadata_and_event_never_prompt(build):
    spy = Spy()
    agent = build(["Sunny."], {"translation": {"skill_keywords": {"weather": ["forecast"]}}}, instructions="You are helpful.", extra=(spy,))
    res = agent.run("what's the weather in Paris?")
    route = spy.routes[0]
    assert route["intent"] == "weather" and route["profile"] == "research" and route["skills"] == ["weather"]
    assert sorted(route["tools"]) == ["exec", "read_file", "web_search"]
    req = agent.provider.requests[0]
    blob = req.system + json.dumps([m.model_dump() for m in req.messages]) + json.dumps(req.metadata)
    for leak in ("research", "confidence", "intent", "route", "ClawTalk"):
        assert leak not in blob
    assert agent.session(res.session_id).get("translation.route") == route
    events = agent.store.events(res.session_id, "translation.route")
    assert events and events[0]["data"]["profile"] == "research" and events[0]["data"]["elapsed_us"] < 50_000  # generous: a loaded CI box; speed is measured in benchmarks


def test_profile_restricts_tools_never_adds_and_adds_its_text(build):
    cfg = {"translation": {"profiles": {"coder": {"tools": ["read_file", "write_*", "shell"], "prompt": "Prefer small diffs."}}}}
    agent = build(["done", "hello"], cfg, tools=["read_file", "web_search"])
    agent.run("fix the bug in app.py")
    agent.run("hi there")
    coder, chat = agent.provider.requests
    assert [t.name for t in coder.tools] == ["read_file"]  # exec is not allowed by the agent: never added
    assert "Prefer small diffs." in coder.system
    assert sorted(t.name for t in chat.tools) == ["read_file", "web_search"]  # no profile config: untouched
    assert "Prefer small diffs." not in chat.system


def test_low_confidence_restricts_nothing(build):
    cfg = {"translation": {"min_confidence": 0.95, "profiles": {"coder": {"tools": ["read_file"]}}}}
    agent = build(["ok"], cfg)
    agent.run("fix the bug in app.py")
    assert len(agent.provider.requests[0].tools) == 3


def test_streamed_and_final_delivery_are_clean(build):
    spy = Spy()
    agent = build([ECHO], chunk_size=3, extra=(spy,))
    res = agent.run("hello", deliver=spy.deliver)
    chunks = [c for k, c, _ in spy.delivered if k == "stream_chunk"]
    finals = [c for k, c, _ in spy.delivered if k == "final_reply"]
    assert "".join(chunks) == CLEAN
    assert finals == [CLEAN] and res.reply == CLEAN
    assert spy.delivered[-2][2].get("final") is True  # the flush chunk
    assert agent.store.events(res.session_id, "translation.stripped")


@pytest.mark.parametrize("size", [1, 2, 5, 7, 13, 64])
def test_artifacts_spanning_chunks(build, size):
    spy = Spy()
    agent = build([ECHO], chunk_size=size, extra=(spy,))
    res = agent.run("hello", deliver=spy.deliver)
    assert "".join(c for k, c, _ in spy.delivered if k == "stream_chunk") == CLEAN == res.reply


def test_other_delivery_points_are_scrubbed(build):
    agent = build(["x"])
    session = agent.session()
    from clawkit.context import TurnContext

    ctx = TurnContext(agent.config, session, agent.hooks, agent.tools, agent_obj=agent)
    got = []
    import asyncio

    out = asyncio.run(agent.send(ctx, "notice", "CT/1 STATUS run=a3f progress=0.7\nWorking on it.", got.append))
    assert out.content == "Working on it."
    dense = asyncio.run(agent.send(ctx, "routed", "", got.append, to="researcher", ct1=CT1Message.build("REQ", "web_search", query="paris", limit=3)))
    assert dense.content == "?web:s paris 3" and dense.metadata["transport"] == "clawdense"


def test_metrics_and_cli(build, tmp_path, capsys):
    from clawkit.cli import main

    agent = build(["CT/1 ACK\nfine"])
    agent.run("fix the bug in app.py")
    db = agent.store.path if hasattr(agent.store, "path") else agent.config.workspace / ".clawkit" / "state.db"
    from clawkit_translation import encode_for_transport, decode_from_transport
    from clawkit.context import TurnContext

    session = agent.session()
    ctx = TurnContext(agent.config, session, agent.hooks, agent.tools, agent_obj=agent)
    m = CT1Message.build("RES", "read_file", status="ok", path="src/app.py")
    assert decode_from_transport(ctx, encode_for_transport(ctx, m)) == m
    agent.store.flush()  # metrics queued outside a turn are committed with the store's next write
    assert main(["--db", str(db), "translation", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["messages_routed"] == 1 and stats["routes_by_profile"] == {"coder": 1}
    assert stats["artifacts_stripped"] == 1 and stats["messages_encoded"] == 1 and stats["messages_decoded"] == 1
    assert 0 < stats["transport_ratio_vs_json"] < stats["transport_ratio_vs_ct1"] < 1
    assert main(["translation", "route", "what's the weather in Paris?"]) == 0
    assert json.loads(capsys.readouterr().out)["intent"] == "weather"


def test_config_errors_name_the_field(build):
    with pytest.raises(ConfigError, match="profiles"):
        build([], {"translation": {"profiles": {"hacker": {"tools": []}}}})
    with pytest.raises(ConfigError, match="lexicon"):
        build([], {"translation": {"lexicon": {"mappings": {"5": "five"}}}})


def test_route_message_is_pure_and_configurable():
    cfg = TranslationConfig(keywords={"automation": ["zapier"]})
    assert route_message("connect zapier to my inbox", cfg).profile == "automation"
    assert route_message("connect zapier to my inbox").profile != "automation"


class Neighbour:
    """Another plugin writing session metadata right after the router (a full metadata write)."""

    @hookimpl(trylast=True)
    def message_received(self, ctx, message):
        ctx.session.set("neighbour", ctx.session.get("neighbour", 0) + 1)


def test_route_is_on_disk_with_the_message_and_keeps_other_keys(build):
    agent = build(["one", "two", "three"], extra=(Neighbour(),))
    sid = agent.run("what's the weather in Paris?").session_id
    stored = agent.store.load_metadata(sid)  # the database, not the session in memory
    assert stored["translation.route"]["profile"] == "research" and stored["neighbour"] == 1
    # another route in the same session replaces the key; the neighbour's key survives
    agent.run("fix the bug in app.py", session_id=sid)
    stored = agent.store.load_metadata(sid)
    assert stored["translation.route"]["profile"] == "coder" and stored["neighbour"] == 2
    # corrupted metadata on disk does not break the turn (the kernel reads it as {})
    agent.store.conn.execute("UPDATE sessions SET metadata = 'not json' WHERE id = ?", (sid,))
    agent._sessions.clear()
    agent.run("hi there!", session_id=sid)
    assert agent.store.load_metadata(sid)["translation.route"]["profile"] == "conversation"
    from clawkit_translation import metrics

    assert metrics.read(agent.store.path)["routed"] == 3


@pytest.mark.parametrize("text", ["Is it raining in Paris?", "Has it snowed in Oslo?", "what's the weather in Paris?"])
def test_skill_keywords_match_their_inflections(text):
    from clawkit_translation.router import SkillInfo

    weather = SkillInfo(name="weather", description="Current weather and short forecasts for any place.",
                        keywords=("weather", "forecast", "rain", "snow", "umbrella"))
    other = SkillInfo(name="code-review", description="Review a change for bugs.", keywords=("review", "diff"))
    assert IntentRouter().match_skills(text, [other, weather]) == ["weather"]


def test_the_trie_keyword_pattern_finds_what_a_longest_first_list_finds():
    import random
    import re

    from clawkit_translation import router as R

    alts = sorted(R._TABLE, key=len, reverse=True)
    listed = re.compile(r"(?<![\w'])(" + "|".join(re.escape(a).replace(r"\ ", r"\s+") for a in alts) + r")(?:e?s)?(?![\w'])")
    vocab = list(R._TABLE) + [w for k in R._TABLE for w in k.split()] + ["the", "tests", "x", "don't", "2", "\n", "  "]
    rng = random.Random(13)
    for _ in range(500):
        text = " ".join(w + rng.choice(["", "s", "es", "ing", ",", "'"]) for w in rng.choices(vocab, k=rng.randint(1, 10)))
        assert [m.group(1) for m in R._PATTERN.finditer(text)] == [m.group(1) for m in listed.finditer(text)], text


def test_turn_metrics_sharing_a_store_are_summed_into_one_statement(tmp_path):
    """Increments queued on a store until its next commit are written by one statement in it (their
    sums); once that commit has begun, later ones wait for the next commit."""
    from clawkit.sessions import SessionStore
    from clawkit_translation import metrics

    store = SessionStore(tmp_path / "state.db")
    seen: list[str] = []
    store.conn.set_trace_callback(lambda sql: seen.append(sql) if "translation_metrics" in sql else None)
    metrics.bump_with_turn(store, "routed", 1.0, ("profile:research", 1.0))  # two turns, one commit
    metrics.bump_with_turn(store, "routed", 1.0, ("profile:coder", 1.0))
    metrics.bump_with_turn(store, "artifacts_stripped", 3)
    assert metrics.read(store.path) == {}  # nothing written before the commit
    store.flush()
    assert metrics.read(store.path) == {"routed": 2.0, "profile:research": 1.0, "profile:coder": 1.0,
                                        "artifacts_stripped": 3.0}
    assert len([s for s in seen if s.startswith("INSERT INTO translation_metrics")]) == 1
    metrics.bump_with_turn(store, "routed")  # after the commit: a new sum, written by the next one
    store.flush()
    assert metrics.read(store.path)["routed"] == 3.0
    store.close()
