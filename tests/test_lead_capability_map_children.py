"""The shield's ``capability_map`` (a user's mapping of their own tool to a capability) governs a
sub-agent's tools at the spawn check as it governs the agent's own calls at the shield: one table,
read the same on both paths (``clawkit.effects.capability_of``, override first). Before, the spawn
check ignored the map, so a child given a mapped tool spawned under a skill whose manifest denies
that capability, while the same call by the parent was blocked.

Through ``clawkit.Agent``, every builtin loaded, the loopback model; the weather skill
(``deny: fs.write``) bound with ``always``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import clawkit
from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

WEATHER = Path(__file__).resolve().parents[1] / "skills" / "weather.claws"
RAN: list[str] = []


def publish(text: str) -> str:
    """Publish a page of text (writes files; declares no capability of its own)."""
    RAN.append(text)
    return "published"


@pytest.fixture(autouse=True)
def _full_install(monkeypatch):
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)


def _agent(server: ModelServer, tmp_path: Path) -> clawkit.Agent:
    (tmp_path / "skills").mkdir(exist_ok=True)
    shutil.copy(WEATHER, tmp_path / "skills" / "weather.claws")
    model = {"name": "openai/test", "api_base": server.url, "api_key": "sk-test", "max_retries": 0}
    return clawkit.Agent(
        model, tools=[publish, "skills"], workspace=str(tmp_path),
        skills={"always": ["weather"], "user_dir": str(tmp_path / "none"), "watch": False},
        shield={"capability_map": {"publish": "fs.write"}},
        policy={"risk": {"publish": "safe", "agent_publisher": "safe"}},
        subagents={"publisher": {"agent": {"name": "publisher", "model": model, "tools": ["publish"]},
                                 "description": "Publishes pages"}})


def test_a_mapped_tool_is_the_same_capability_for_the_parent_and_for_a_child(tmp_path):
    RAN.clear()
    with ModelServer() as server:
        server.script(Reply.tool_calls([("publish", {"text": "by the parent"}),
                                        ("agent_publisher", {"task": "publish the page"})]),
                      "both were refused")
        agent = _agent(server, tmp_path)
        try:
            result = agent.run("publish it, yourself and through the publisher")
            calls = {c["name"]: c for c in result.tool_calls}
            assert calls["publish"]["blocked"] and calls["agent_publisher"]["blocked"], calls
            said = [m["content"] for m in server.requests[1].messages if m["role"] == "tool"]
            assert any("the skill 'weather' denies fs.write in its manifest" in s and "publish" in s
                       and "publisher" in s for s in said), said
            assert RAN == [] and len(server.requests) == 2  # neither the parent's call nor the child ran
        finally:
            agent.close()
