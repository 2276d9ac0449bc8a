"""End to end over real HTTP (litellm → loopback model_server): a weather request reaches
the weather skill; its compiled tool schema and section are in the model request; edits
on disk change the next request; a broken edit keeps the previous version."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

import clawkit_skills
from clawkit import hookimpl
from clawkit.testing.server import Reply

pytest.importorskip("clawkit_litellm")

REPO = Path(__file__).resolve().parents[4]
WEATHER = REPO / "skills" / "weather.claws"


class Router:
    """What the translation device does for a weather request: ``route.skills = ["weather"]``."""

    name = "e2e-router"

    @hookimpl
    def message_received(self, ctx, message):
        if "weather" in message.content.lower():
            ctx.state["route"] = {"intent": "weather", "profile": "research", "confidence": 0.95, "skills": ["weather"], "tools": []}


@pytest.fixture
def http_agent(make_agent, model_server, tmp_path, monkeypatch):
    from clawkit.config import ModelConfig
    from clawkit_litellm.provider import LitellmProvider

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")

    def build(model="openai/test", router=True):
        base = model_server.url if model.startswith("openai/") else model_server.base_url
        provider = LitellmProvider(ModelConfig(name=model, api_base=base, api_key="x", max_retries=0))
        plugins = (clawkit_skills, Router()) if router else (clawkit_skills,)
        cfg = {"skills": {"user_dir": str(tmp_path / "no-user-skills"), "watch": True}}
        if not router:  # no router at all: the full install's translation device is turned off too
            cfg["translation"] = {"enabled": False}
        return make_agent(provider=provider, plugins=plugins, plugin_config=cfg, model=model, tools=["skills"])

    return build


def system_of(req) -> str:
    body = req.body
    if isinstance(body.get("system"), list):  # Anthropic
        return "".join(b.get("text", "") for b in body["system"])
    return next((m["content"] for m in req.messages if m["role"] == "system"), "")


def tool_names(req) -> list[str]:
    return [t.get("function", {}).get("name") or t.get("name") for t in req.tools]


def test_weather_request_routes_to_weather_skill_and_reload_changes_next_request(http_agent, model_server, workspace):
    skills = workspace / "skills"
    skills.mkdir()
    target = skills / "weather.claws"
    shutil.copy(WEATHER, target)
    model_server.script(
        Reply.tool_calls([("skill_weather", {"location": "Paris", "days": 2})]),
        "Paris: 21 °C and sunny; tomorrow showers, take an umbrella.",
        "Lyon: 19 °C.",
        "Nice: 24 °C.",
    )
    agent = http_agent()

    async def go():
        r1 = await agent.turn("What's the weather in Paris for the next two days?")
        target.write_text(target.read_text().replace("**Tone:** Brief and concrete", "**Tone:** EDITED tone")
                          .replace("  days?: integer", "  hourly?: boolean\n  days?: integer"))
        r2 = await agent.turn("And the weather in Lyon?", session_id=r1.session_id)
        target.write_text(target.read_text().replace("hourly?: boolean", "hourly?: bool ean ("))
        r3 = await agent.turn("Weather in Nice?", session_id=r1.session_id)
        return r1, r2, r3

    r1, r2, r3 = asyncio.run(go())
    assert r1.reply.startswith("Paris: 21 °C") and r3.reply == "Nice: 24 °C."
    first = model_server.requests[0]
    compiled = clawkit_skills.compile_file(WEATHER)
    sent = next(t for t in first.tools if t["function"]["name"] == "skill_weather")
    assert sent == compiled.openai_tools()[0]
    assert compiled.system_prompt_section in system_of(first)
    # the skill tool ran and answered with its plan
    tool_msg = next(m for m in model_server.requests[1].messages if m["role"] == "tool")
    assert '"arguments": {"location": "Paris", "days": 2}' in tool_msg["content"] and "Geocode the location" in tool_msg["content"]
    # the edit on disk is in the next request, without a restart
    edited = model_server.requests[2]
    assert "Tone: EDITED tone" in system_of(edited)
    props = next(t for t in edited.tools if t["function"]["name"] == "skill_weather")["function"]["parameters"]["properties"]
    assert "hourly" in props
    # the broken edit keeps the previous version, and the error is reported as an event
    broken = model_server.requests[3]
    assert "Tone: EDITED tone" in system_of(broken) and "skill_weather" in tool_names(broken)
    errors = agent.store.events(r1.session_id, "skills.error")
    assert errors and errors[-1]["data"]["file"] == str(target) and errors[-1]["data"]["kept"] == "weather"
    line = next(i for i, ln in enumerate(target.read_text().splitlines(), 1) if "bool ean (" in ln)
    assert errors[-1]["data"]["line"] == line and errors[-1]["data"]["block"] == "CLAW-IDL"


def test_load_skill_over_http_with_anthropic_tool_shape(http_agent, model_server):
    model_server.script(Reply.tool_calls([("load_skill", {"name": "weather"})]), "Loaded; where are you?")
    agent = http_agent(model="anthropic/claude-sonnet-4-5", router=False)
    asyncio.run(agent.turn("I need a forecast"))
    before, after = model_server.requests
    assert before.path == "/v1/messages"
    assert "load_skill" in tool_names(before) and "skill_weather" not in tool_names(before)
    assert "- weather: Current weather" in system_of(before) and "### Skill: weather" not in system_of(before)
    sent = next(t for t in after.tools if t["name"] == "skill_weather")
    assert sent["input_schema"] == clawkit_skills.compile_file(WEATHER).anthropic_tools()[0]["input_schema"]
    assert "### Skill: weather" in system_of(after)
