"""The skills plugin inside an agent: prompt economy, routing, load_skill, skill tools,
capability requests, discovery precedence, gating, hot reload and broken edits."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from pathlib import Path

import pytest

import clawkit_skills
from clawkit import hookimpl
from clawkit.testing import ScriptedReply, call

REPO = Path(__file__).resolve().parents[4]
WEATHER = REPO / "skills" / "weather.claws"


class Router:
    """Stands in for the translation device: routes weather questions to the weather skill."""

    name = "test-router"

    @hookimpl
    def message_received(self, ctx, message):
        if "weather" in message.content.lower():
            ctx.state["route"] = {"intent": "weather", "profile": "research", "confidence": 0.9, "skills": ["weather"], "tools": []}


class Probe:
    """Records what the skills plugin left in turn state for other plugins (the shield)."""

    name = "test-probe"

    def __init__(self):
        self.capabilities: list = []
        self.active: list = []

    @hookimpl(trylast=True)
    def before_llm_call(self, ctx, request):
        self.capabilities.append(list(ctx.state.get("capability_requests", [])))
        self.active.append(list(ctx.state.get("skills.active", [])))


@pytest.fixture
def user_dir(tmp_path):
    d = tmp_path / "user-skills"
    d.mkdir()
    return d


@pytest.fixture
def agent_for(make_agent, user_dir):
    def build(script=(), *, extra=(), skills=None, **config):
        cfg = {"user_dir": str(user_dir), "watch": False, **(skills or {})}
        config.setdefault("tools", ["skills"])  # the allowlist entry that admits skills
        return make_agent(list(script), plugins=(clawkit_skills, *extra), plugin_config={"skills": cfg}, **config)

    return build


def turns(agent, *texts):
    async def go():
        sid, results = None, []
        for t in texts:
            r = await agent.turn(t, session_id=sid)
            sid = r.session_id
            results.append(r)
        return results

    return asyncio.run(go())


def line_of(path: Path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln)


def tool_names(request) -> list[str]:
    return [t.name for t in request.tools]


def test_index_is_compact_and_full_section_only_when_routed(agent_for):
    probe = Probe()
    agent = agent_for(["Hello!", "Sunny, 21 °C."], extra=(Router(), probe))
    turns(agent, "hi there", "what's the weather in Paris?")
    plain, routed = agent.provider.requests
    assert "## Skills" in plain.system and "- weather: Current weather and short forecasts" in plain.system
    assert "### Skill: weather" not in plain.system and "skill_weather" not in tool_names(plain)
    assert "load_skill" in tool_names(plain)
    # routed: full section in the system prompt, IDL schema in the tools, not in the index any more
    assert "### Skill: weather (v1.0.0)" in routed.system and "When performing this skill" in routed.system
    assert "- weather: " not in routed.system
    weather_tool = next(t for t in routed.tools if t.name == "skill_weather")
    assert weather_tool.parameters["required"] == ["location"]
    assert weather_tool.parameters == clawkit_skills.compile_file(WEATHER).tool_definitions[0].parameters
    # the lexicon never reaches a prompt
    for text in (plain.system, routed.system, json.dumps([t.model_dump() for t in routed.tools])):
        assert "hybrid_stenography" not in text and "FCST" not in text
    assert probe.active == [[], ["weather"]]
    assert probe.capabilities[0] == []
    # issue 30 (changed deliberately): a skill the router only matched guides the prompt; its manifest does
    # not narrow the agent's own calls (a keyword guess must not veto the work asked for)
    assert probe.capabilities[1] == []


def test_a_loaded_or_always_skill_binds_its_manifest(agent_for):
    probe = Probe()
    agent = agent_for([ScriptedReply.calls(call("load_skill", name="weather")), "ok"], extra=(probe,))
    turns(agent, "Oslo today?")
    grant = {"capability": "net.http", "allow": ["api.open-meteo.com", "geocoding-api.open-meteo.com"], "skill": "weather"}
    assert probe.capabilities[0] == [] and grant in probe.capabilities[1]
    probe = Probe()
    always = agent_for(["a"], skills={"always": ["weather"]}, extra=(probe,))
    turns(always, "hi")
    assert grant in probe.capabilities[0]


def test_load_skill_then_skill_tool_returns_plan_with_dialect_fill(agent_for):
    agent = agent_for([
        ScriptedReply.calls(call("load_skill", name="weather")),
        ScriptedReply.calls(call("skill_weather", units="metric")),
        "It is 18 °C in Oslo.",
        "Still 18 °C.",
    ])
    first, second = turns(agent, "Oslo today?", "and now?")
    reqs = agent.provider.requests
    assert "skill_weather" not in tool_names(reqs[0]) and "### Skill: weather" not in reqs[0].system
    assert "skill_weather" in tool_names(reqs[1]) and "### Skill: weather" in reqs[1].system
    loaded = reqs[1].messages[-1]
    assert loaded.role == "tool" and loaded.content.startswith("Skill weather loaded for this session")
    result = json.loads(reqs[2].messages[-1].content)
    assert result["arguments"] == {"units": "metric", "location": "Oslo today?"}  # location auto-filled (@dialect:context.query)
    assert result["auto_filled"] == {"location": "Oslo today?"}
    assert result["plan"][0].startswith("Geocode the location") and result["guardrails"]
    # stays loaded for the rest of the session
    assert "skill_weather" in tool_names(reqs[3]) and "### Skill: weather" in reqs[3].system
    events = [e["type"] for e in agent.store.events(first.session_id)]
    assert "skills.loaded" in events and "skills.active" in events


def test_skill_tool_rejects_invalid_arguments(agent_for):
    agent = agent_for([ScriptedReply.calls(call("skill_weather", location="Rome", units="kelvin")), "ok"], extra=(Router(),))
    turns(agent, "weather in Rome")
    msg = agent.provider.requests[1].messages[-1]
    # (with the full install the shield's argument check answers first: "Error: blocked by shield: invalid ...")
    assert msg.content.startswith("Error:")
    assert "invalid arguments for skill_weather: units: 'kelvin' is not one of" in msg.content


def test_load_skill_unknown_and_unavailable(agent_for, workspace):
    gated = workspace / "skills" / "deploy"
    gated.mkdir(parents=True)
    (gated / "SKILL.md").write_text("---\nname: deploy\ndescription: Deploy it.\nmetadata:\n  requires:\n    bins: [no-such-binary-zz]\n---\nDo it.\n")
    agent = agent_for([ScriptedReply.calls(call("load_skill", name="deploy"), call("load_skill", name="nope")), "ok"])
    turns(agent, "deploy please")
    req = agent.provider.requests[0]
    assert "- deploy:" not in req.system  # unavailable skills are not offered
    results = [m.content for m in agent.provider.requests[1].messages if m.role == "tool"]
    assert results[0] == "Error: skill 'deploy' is unavailable here: missing binaries: no-such-binary-zz"
    assert results[1].startswith("Error: unknown skill 'nope'; available skills:")


def test_precedence_workspace_over_user_over_shipped(agent_for, workspace, user_dir):
    text = WEATHER.read_text()
    (user_dir / "weather.claws").write_text(text.replace("**Purpose:** Current weather", "**Purpose:** USER weather"))
    agent = agent_for(["a", "b", "c"], extra=(Router(),))
    (ws := workspace / "skills").mkdir()
    (ws / "w.claws").write_text(text.replace("**Purpose:** Current weather", "**Purpose:** WORKSPACE weather"))
    turns(agent, "weather?")
    assert "WORKSPACE weather" in agent.provider.requests[0].system
    reg = clawkit_skills.registry_for(type("C", (), {"runtime": agent, "agent": agent.config})())
    assert reg.skills["weather"].source == "workspace" and len(reg.skills["weather"].shadowed) == 2
    (ws / "w.claws").unlink()
    turns(agent, "weather?")
    assert "USER weather" in agent.provider.requests[1].system
    (user_dir / "weather.claws").unlink()
    turns(agent, "weather?")
    assert "Current weather and short forecasts" in agent.provider.requests[2].system


def test_edit_between_turns_changes_next_request_and_broken_edit_keeps_last_good(agent_for, workspace, caplog):
    ws = workspace / "skills"
    ws.mkdir()
    target = ws / "weather.claws"
    shutil.copy(WEATHER, target)
    agent = agent_for(["one", "two", "three", "four"], extra=(Router(),))
    r1 = turns(agent, "weather in Lyon?")[0]
    text = target.read_text()
    edited = text.replace("**Tone:** Brief and concrete", "**Tone:** Poetic and EDITED").replace(
        '  units?: "metric" | "imperial";', '  units?: "metric" | "imperial";\n  hourly?: boolean   // hour by hour')
    target.write_text(edited)
    sid = r1.session_id
    asyncio.run(agent.turn("weather in Lyon again?", session_id=sid))
    req2 = agent.provider.requests[1]
    assert "Tone: Poetic and EDITED" in req2.system
    assert "hourly" in next(t for t in req2.tools if t.name == "skill_weather").parameters["properties"]
    # a broken edit: the previous (edited) version stays active and the error is reported
    target.write_text(edited.replace("hourly?: boolean", "hourly?: booleen"))
    with caplog.at_level(logging.WARNING, logger="clawkit.skills"):
        asyncio.run(agent.turn("weather once more?", session_id=sid))
    req3 = agent.provider.requests[2]
    assert "Tone: Poetic and EDITED" in req3.system and "skill_weather" in tool_names(req3)
    errors = agent.store.events(sid, "skills.error")
    assert errors and errors[-1]["data"]["file"] == str(target) and errors[-1]["data"]["line"] == line_of(target, "hourly?: booleen")
    assert errors[-1]["data"]["block"] == "CLAW-IDL" and "booleen" in errors[-1]["data"]["message"]
    assert errors[-1]["data"]["kept"] == "weather"
    assert any("weather.claws" in r.getMessage() and "keeping the last good version" in r.getMessage() for r in caplog.records)
    # fixing the file makes it current again
    target.write_text(edited.replace("Poetic and EDITED", "Fixed"))
    asyncio.run(agent.turn("weather, fixed?", session_id=sid))
    assert "Tone: Fixed" in agent.provider.requests[3].system
    assert [e["type"] for e in agent.store.events(sid) if e["type"].startswith("skills.")].count("skills.reloaded") >= 2


def test_added_and_deleted_files_between_turns(agent_for, workspace):
    agent = agent_for(["a", "b", "c"])
    r = turns(agent, "hello")[0]
    assert "- haiku:" not in agent.provider.requests[0].system
    d = workspace / "skills" / "haiku"
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text("---\nname: haiku\ndescription: Answer in a haiku.\n---\nThree lines: 5, 7, 5 syllables.\n")
    asyncio.run(agent.turn("hello", session_id=r.session_id))
    assert "- haiku: Answer in a haiku." in agent.provider.requests[1].system
    shutil.rmtree(d)
    asyncio.run(agent.turn("hello", session_id=r.session_id))
    assert "- haiku:" not in agent.provider.requests[2].system
    types = [e["type"] for e in agent.store.events(r.session_id)]
    assert "skills.added" in types and "skills.removed" in types


def test_the_agents_allowlist_decides_skill_tools(agent_for):
    closed = agent_for(["a"], extra=(Router(),), tools=[])
    turns(closed, "weather?")
    assert tool_names(closed.provider.requests[0]) == []
    assert "Skill" not in closed.provider.requests[0].system  # no index, no active section
    opened = agent_for(["a"], extra=(Router(),), tools=["skill_*", "load_skill"])
    turns(opened, "weather?")
    assert sorted(tool_names(opened.provider.requests[0])) == ["load_skill", "skill_weather"]
    only_weather = agent_for(["a"], extra=(Router(),), tools=["skill_weather"])
    turns(only_weather, "weather?")
    req = only_weather.provider.requests[0]
    assert tool_names(req) == ["skill_weather"] and "### Skill: weather" in req.system and "## Skills" not in req.system


def test_an_allowlist_that_admits_no_skill_leaves_the_plugin_idle(agent_for, monkeypatch):
    """tools: without load_skill or any skill_* tool: no skill can be listed, routed, loaded or active, so
    the plugin builds no registry and keeps none current for that agent's turns (docs/plugins/skills.md)."""
    from clawkit.tools import ToolRegistry
    from clawkit_skills import state

    built = []
    real = state.build_registry
    monkeypatch.setattr(state, "build_registry", lambda cfg: built.append(cfg) or real(cfg))
    probe = Probe()
    closed = agent_for(["a", "b"], extra=(Router(), probe), tools=[], skills={"always": ["code-review"]})
    turns(closed, "weather?", "and tomorrow's weather?")
    assert built == [] and probe.active == [[], []] and probe.capabilities == [[], []]
    assert "Skill" not in closed.provider.requests[0].system
    assert clawkit_skills._ADVISORY == state.ADVISORY_KEY  # the idle path's key, named without importing state
    for allow, idle in [([], True), (["ping", "read_*"], True), (["load_skill"], False), (["skills"], False),
                        (["skill_weather"], False), (["skill_*"], False), (["*"], False), (["s*"], False),
                        (["?kill_x"], False), (["[sl]*"], False), (["skillz"], True), (["sk"], True)]:
        reg = ToolRegistry(allow)
        reg.add_group("skills", state.SKILLS_GROUP)
        assert state.admits_no_skill(reg) is idle, allow
    declared = ToolRegistry(["ping"])
    assert state.admits_no_skill(declared)
    declared.declared.add("skill_weather")  # allowed by a declaration elsewhere
    assert not state.admits_no_skill(declared)


def test_always_and_disabled(agent_for):
    agent = agent_for(["a"], skills={"always": ["code-review"], "disabled": ["weather"]})
    turns(agent, "hi")
    req = agent.provider.requests[0]
    assert "### Skill: code-review" in req.system and "skill_code_review" in tool_names(req)
    assert "weather" not in req.system


def test_watcher_recompiles_without_a_turn(tmp_path):
    d = tmp_path / "skills"
    d.mkdir()
    f = d / "weather.claws"
    shutil.copy(WEATHER, f)
    reg = clawkit_skills.SkillRegistry([("workspace", d)])
    reg.sync()
    reg.start_watching(step_ms=20)
    try:
        time.sleep(0.1)  # let the OS watch register
        f.write_text(f.read_text().replace("**Tone:** Brief", "**Tone:** WATCHED"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and "WATCHED" not in reg.get("weather").system_prompt_section:
            time.sleep(0.01)
        assert "WATCHED" in reg.get("weather").system_prompt_section
        assert reg.watching
        assert [t for t, _ in reg.drain_events()] == ["skills.added", "skills.reloaded"]
    finally:
        reg.stop_watching()
    assert not reg.watching


def test_compile_cache_by_content_hash(tmp_path):
    d = tmp_path / "skills"
    d.mkdir()
    f = d / "weather.claws"
    shutil.copy(WEATHER, f)
    reg = clawkit_skills.SkillRegistry([("workspace", d)])
    reg.sync()
    original = f.read_text()
    f.write_text(original.replace("Brief", "Short"))
    reg.sync()
    f.write_text(original)  # back to a content already compiled
    reg.sync()
    assert reg.counters["compiled"] == 2 and "Brief and concrete" in reg.get("weather").system_prompt_section
    import os

    os.utime(f, ns=(time.time_ns(), time.time_ns()))  # touched, same content: nothing recompiled, no event
    reg.drain_events()
    reg.sync()
    assert reg.drain_events() == [] and reg.counters["compiled"] == 2


def test_lexicon_exposed_for_the_codec(agent_for):
    agent = agent_for(["a"])
    turns(agent, "hi")
    ctx = type("C", (), {"runtime": agent, "agent": agent.config})()
    assert clawkit_skills.lexicon_for(ctx, "weather")["mappings"]["WX"] == "weather"
    assert clawkit_skills.lexicon_for(ctx, "summarize") is None


def test_one_shared_watcher_and_folders_created_later(tmp_path):
    from clawkit_skills.registry import WATCHER

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    ra = clawkit_skills.SkillRegistry([("workspace", a)])
    rb = clawkit_skills.SkillRegistry([("workspace", b)])  # b does not exist yet
    try:
        ra.start_watching()
        rb.start_watching()
        assert ra.watching and not rb.watching
        thread = WATCHER.thread
        b.mkdir()
        shutil.copy(WEATHER, b / "weather.claws")
        rb.sync()
        rb.start_watching()  # what every turn start does: the new folder is watched now
        assert rb.watching and WATCHER.thread is not thread
        assert sum(1 for t in __import__("threading").enumerate() if t.name == "clawkit-skills-watch") == 1
        time.sleep(0.1)
        (b / "weather.claws").write_text(WEATHER.read_text().replace("**Tone:** Brief", "**Tone:** SHARED"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and "SHARED" not in rb.get("weather").system_prompt_section:
            time.sleep(0.01)
        assert "SHARED" in rb.get("weather").system_prompt_section
    finally:
        ra.stop_watching()
        rb.stop_watching()
