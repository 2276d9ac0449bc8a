"""A tool's capability is declared once (``@tool(capability=…)`` → ``ToolDef.capability``) and read by
every gate that enforces skill manifests — the Kernel Shield on the agent's own calls and
clawkit-subagents before a child is spawned (``clawkit.effects``). Before, each gate kept its own
copy of a tool → capability table: a user's own tool had no capability anywhere, so a manifest
that denies ``fs.write`` or limits ``net.http`` to one host did not govern it, and the two copies
had drifted (``read_tool_output`` was ``fs.read`` for sub-agents only; now for neither: it re-reads
the stored output of a call that already passed the gates).

Through ``clawkit.Agent`` (where users register their own tools), every builtin loaded, against
the loopback model: the weather skill (``skills/weather.claws``: ``net.http`` to open-meteo only,
``deny: fs.write``) bound with ``always``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import clawkit
from clawkit import tool
from clawkit.effects import STANDARD, capability_of
from clawkit.testing.server import ModelServer, Reply
from clawkit.types import ToolDef

pytestmark = pytest.mark.e2e

WEATHER = Path(__file__).resolve().parents[1] / "skills" / "weather.claws"
RAN: list[str] = []


@tool(capability="fs.write")
def save_note(text: str) -> str:
    """Save a note to the notes file."""
    RAN.append(f"save_note:{text}")
    return "saved"


@tool(capability="net.http")
def post_webhook(url: str, body: str = "") -> str:
    """POST a body to a webhook URL."""
    RAN.append(f"post_webhook:{url}")
    return "posted"


def count_words(text: str) -> int:
    """Count the words in a text (declares no capability: manifests do not govern it)."""
    RAN.append("count_words")
    return len(text.split())


@pytest.fixture(autouse=True)
def _full_install(monkeypatch):
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)


def _agent(server: ModelServer, tmp_path: Path, **extra):
    (tmp_path / "skills").mkdir(exist_ok=True)
    shutil.copy(WEATHER, tmp_path / "skills" / "weather.claws")
    model = {"name": "openai/test", "api_base": server.url, "api_key": "sk-test", "max_retries": 0}
    return clawkit.Agent(model, tools=[save_note, post_webhook, count_words, "skills"], workspace=str(tmp_path),
                         skills={"always": ["weather"], "user_dir": str(tmp_path / "none"), "watch": False}, **extra)


def test_a_declared_capability_is_governed_by_the_bound_skills_manifest(tmp_path):
    RAN.clear()
    with ModelServer() as server:
        server.script(
            Reply.tool_calls([("save_note", {"text": "hi"}), ("post_webhook", {"url": "https://evil.example/hook"}),
                              ("post_webhook", {"url": "https://api.open-meteo.com/v1/ping"}),
                              ("count_words", {"text": "a b"})]),
            "done")
        agent = _agent(server, tmp_path, policy={"risk": {"post_webhook": "safe", "save_note": "safe"}})
        try:
            result = agent.run("note it and tell the hook")
            calls = {(c["name"], str(c["arguments"].get("url", ""))): c for c in result.tool_calls}
            assert calls[("save_note", "")]["blocked"]  # deny: fs.write
            assert calls[("post_webhook", "https://evil.example/hook")]["blocked"]  # net.http only to open-meteo
            assert not calls[("post_webhook", "https://api.open-meteo.com/v1/ping")]["blocked"]
            assert not calls[("count_words", "")]["blocked"]
            assert sorted(RAN) == ["count_words", "post_webhook:https://api.open-meteo.com/v1/ping"]
            reasons = [e["data"]["reason"] for e in agent.store.events(result.session_id, "shield.blocked")]
            assert any("fs.write" in r and "weather" in r for r in reasons), reasons
            assert any("grant net.http only for other resources" in r for r in reasons), reasons
        finally:
            agent.close()


def test_a_child_with_a_declared_tool_is_checked_against_the_manifest_before_it_spawns(tmp_path):
    RAN.clear()
    with ModelServer() as server:
        server.script(Reply.tool_calls([("agent_scribe", {"task": "write the note"})]), "the scribe was refused")
        agent = _agent(server, tmp_path, policy={"risk": {"agent_scribe": "safe"}}, subagents={"scribe": {
            "agent": {"name": "scribe", "model": {"name": "openai/test", "api_base": server.url, "api_key": "sk-test"},
                      "tools": ["save_note"]},
            "description": "Writes notes"}})
        try:
            result = agent.run("have the scribe write it")
            (spawn,) = result.tool_calls
            assert spawn["name"] == "agent_scribe" and spawn["blocked"], spawn
            said = [m["content"] for m in server.requests[1].messages if m["role"] == "tool"][0]
            assert "the skill 'weather' denies fs.write in its manifest" in said and "save_note" in said, said
            assert RAN == [] and len(server.requests) == 2  # the child never ran
        finally:
            agent.close()


def test_one_table_precedence_override_then_declared_then_standard():
    declared = ToolDef(name="read_file", capability="Net/HTTP")
    assert capability_of("read_file", None) == "fs.read" == STANDARD["read_file"]
    assert capability_of("read_file", declared) == "net.http"
    assert capability_of("read_file", declared, {"read_file": "shell exec"}) == "shell.exec"
    assert capability_of("count_words", ToolDef(name="count_words")) is None
    # the two copies disagreed on it; it re-reads a gated call's stored output, so manifests do not govern it
    assert "read_tool_output" not in STANDARD
