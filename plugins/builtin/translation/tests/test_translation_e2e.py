"""End to end over real HTTP (the litellm provider → loopback ``model_server``):

* a model reply that echoes ``CT/1 REQ …``, ``[ClawTalk routing: …]``, ClawDense and
  hand-off lines reaches the user clean, streamed (artifacts cut across SSE chunks)
  and as the final reply;
* with the real skills plugin, "what's the weather in Paris?" is routed by the
  translation device to the ``weather`` skill, whose compiled tool schema is in the
  model request's tools and whose section is in the system prompt — and the routing
  decision itself is in neither.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import clawkit_translation
from clawkit.testing.server import Reply

pytest.importorskip("clawkit_litellm")

REPO = Path(__file__).resolve().parents[4]
ECHO = (
    "CT/1 REQ web_search q=\"paris weather\" limit=3\n"
    "---\n"
    "{\"note\": \"payload a model copied\"}\n"
    "[ClawTalk routing: intent=weather, profile=research, confidence=0.91]\n"
    "Paris: 21 °C and sunny [ClawTalk routing: skill=weather] today.\n"
    ">>$sub(researcher) goal=\"double-check\"\n"
    "<=?web:s status=ok results=3\n"
    "ok, take sunglasses — and write to me@example.com.\n"
)
CLEAN = "Paris: 21 °C and sunny today.\nok, take sunglasses — and write to me@example.com.\n"


@pytest.fixture
def http_agent(make_agent, model_server, tmp_path, monkeypatch):
    from clawkit.config import ModelConfig
    from clawkit_litellm.provider import LitellmProvider

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")

    def build(plugins=(clawkit_translation,), plugin_config=None):
        provider = LitellmProvider(ModelConfig(name="openai/test", api_base=model_server.url, api_key="x", max_retries=0))
        return make_agent(provider=provider, plugins=plugins, plugin_config=plugin_config, model="openai/test",
                          tools=["skills"] if any(getattr(p, "__name__", "") == "clawkit_skills" for p in plugins) else [])

    return build


class Collect:
    def __init__(self):
        self.items = []

    def __call__(self, outbound):
        self.items.append((outbound.kind, outbound.content))

    def text(self, kind):
        return [c for k, c in self.items if k == kind]


@pytest.mark.parametrize("chunk_chars", [1, 4, 9])
def test_echoed_artifacts_reach_the_user_clean_streamed_and_final(http_agent, model_server, chunk_chars):
    model_server.script(Reply.text(ECHO, chunk_chars=chunk_chars))
    agent = http_agent()
    got = Collect()
    result = asyncio.run(agent.turn("weather in Paris?", deliver=got))
    assert model_server.requests[0].stream
    assert len(got.text("stream_chunk")) > 5  # really streamed
    assert "".join(got.text("stream_chunk")) == CLEAN
    assert got.text("final_reply") == [CLEAN] and result.reply == CLEAN
    # the session keeps what the model said; only deliveries are scrubbed
    assert agent.store.messages(result.session_id)[-1].content == ECHO


def test_non_streamed_final_reply_is_clean(http_agent, model_server):
    model_server.script(Reply.text(ECHO))
    agent = http_agent()
    result = asyncio.run(agent.turn("weather in Paris?"))  # no deliver: no streaming
    assert result.reply == CLEAN


def test_weather_request_routes_to_the_weather_skill(http_agent, model_server, tmp_path):
    clawkit_skills = pytest.importorskip("clawkit_skills")
    weather = REPO / "skills" / "weather.claws"
    if not weather.exists():
        pytest.skip("the shipped weather skill is not in this checkout")
    model_server.script("Paris: 21 °C and sunny.")
    agent = http_agent(
        plugins=(clawkit_translation, clawkit_skills),
        plugin_config={"skills": {"user_dir": str(tmp_path / "none"), "watch": False, "paths": [str(REPO / "skills")]}},
    )
    result = asyncio.run(agent.turn("what's the weather in Paris?"))
    assert result.reply == "Paris: 21 °C and sunny."
    route = agent.session(result.session_id).get("translation.route")
    assert route["skills"][0] == "weather" and route["profile"] == "research"
    req = model_server.requests[0]
    compiled = clawkit_skills.compile_file(weather)
    assert compiled.openai_tools()[0] in req.tools
    system = next(m["content"] for m in req.messages if m["role"] == "system")
    assert compiled.system_prompt_section in system
    wire = json.dumps(req.body)
    assert "confidence" not in wire and "\"intent\"" not in wire and "ClawTalk" not in wire
