"""``clawkit prompt``: the assembled prompt and why each contributor is in or out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawkit import hookimpl
from clawkit.cli import main
from clawkit.commands.prompt import build_report, render_text
from clawkit.prompt import PromptContributor, StaticContributor

AGENT = """\
name: demo
model: openai/gpt-4o-mini
instructions: Answer briefly.
"""


@pytest.fixture
def agent_file(tmp_path: Path) -> Path:
    f = tmp_path / "agent.yaml"
    f.write_text(AGENT)
    return f


class Sections:
    name = "prompt-command-sections"

    @hookimpl
    def register_prompt_contributor(self, register, agent):
        class NeedsMessage(PromptContributor):
            id = "echo"
            priority = 30

            def should_contribute(self, ctx):
                return bool(ctx.message)

            def contribute(self, ctx):
                return f"The user said: {ctx.message}"

        register(StaticContributor("instructions", agent.instructions, priority=0))
        register(StaticContributor("security", "SECURITY " * 5, tags=["domain:security"], priority=10))
        register(StaticContributor("frontend", "FRONTEND", tags=["domain:frontend"], priority=20))
        register(NeedsMessage())
        register(StaticContributor("trailer", "T" * 400, priority=999))


def agent_with_sections(make_agent, **config):
    return make_agent(plugins=(Sections(),), instructions="Answer briefly.", **config)


@pytest.mark.narrow("compares the exact section report of the probe contributors, without the installed ones")
def test_report_gives_every_reason_with_token_sizes(make_agent):
    from clawkit.types import SessionClassification

    agent = agent_with_sections(make_agent, limits={"context_window": 200})
    data = build_report(agent, None, SessionClassification(topic="coding", domain=["security"]))
    reasons = {c["id"]: c["reason"] for c in data["contributors"]}
    assert reasons == {
        "instructions": "untagged",
        "security": "tag matched",
        "echo": "filtered",
        "frontend": "no tag matched",
        "trailer": "cut by budget",
    }
    sizes = {c["id"]: c["tokens"] for c in data["contributors"]}
    assert sizes["instructions"] > 0 and sizes["security"] > 0 and sizes["trailer"] > 0 and sizes["frontend"] == 0
    assert data["prompt"].startswith("Answer briefly.\n\nSECURITY") and data["tokens"] > 0
    text = render_text(data)
    assert "+ instructions" in text and "- trailer" in text and "cut by budget" in text and "domain:security" in text


def test_message_reaches_the_contributors(make_agent):
    agent = agent_with_sections(make_agent)
    data = build_report(agent, "hello there", None)
    assert "The user said: hello there" in data["prompt"]
    assert {c["id"]: c["reason"] for c in data["contributors"]}["security"] == "no tag matched"


def test_cli_without_contributors_prints_the_instructions(agent_file, monkeypatch, capsys):
    # narrow: clawkit prompt with no contributor plugin prints the instructions alone
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "")
    assert main(["prompt", str(agent_file), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["prompt"] == "Answer briefly." and data["tools"] == []
    assert [c["id"] for c in data["contributors"]] == ["instructions"]  # the kernel's own section
    assert not (agent_file.parent / ".clawkit").exists()  # nothing written


@pytest.mark.parametrize(
    "value, message",
    [
        ("{not json", "not valid JSON"),
        ('["coding"]', "expected a JSON object"),
        ('{"domain": ["a", "b", "c", "d"]}', "domain"),
        ("@/nonexistent/c.json", "cannot read"),
    ],
)
def test_bad_classification_is_a_usage_error(agent_file, monkeypatch, capsys, value, message):
    # narrow: argument errors of the kernel's command, no plugin needed
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "")
    assert main(["prompt", str(agent_file), "--classification", value]) == 2
    assert message in capsys.readouterr().err


def test_missing_agent_file(tmp_path, monkeypatch, capsys):
    # narrow: argument errors of the kernel's command, no plugin needed
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "")
    assert main(["prompt", str(tmp_path / "nope.yaml")]) == 2
    assert "no such agent file" in capsys.readouterr().err


def test_cli_json_with_the_contributors_plugin(agent_file, monkeypatch, capsys, tmp_path):
    pytest.importorskip("clawkit_contributors")
    import clawkit_contributors

    # narrow: one contributor plugin's sections, exactly
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "clawkit-contributors")
    prompts = tmp_path / ".agents" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "security.md").write_text("---\ntags: [domain:security]\n---\nThink like an attacker.\n")
    (prompts / "frontend.md").write_text("---\ntags: [domain:frontend]\n---\nUse semantic HTML.\n")
    cls = tmp_path / "c.json"
    cls.write_text('{"topic": "coding", "domain": ["security"]}')
    try:
        assert main(["prompt", str(agent_file), "--message", "is this SQL safe?", "--classification", f"@{cls}", "--json"]) == 0
    finally:
        clawkit_contributors.close_all()
    data = json.loads(capsys.readouterr().out)
    reasons = {c["id"]: (c["included"], c["reason"]) for c in data["contributors"]}
    assert reasons["security"] == (True, "tag matched")
    assert reasons["frontend"] == (False, "no tag matched")
    assert reasons["identity"] == (True, "untagged") and reasons["tools"] == (False, "filtered")
    assert "Think like an attacker." in data["prompt"] and "semantic HTML" not in data["prompt"]
    assert data["classification"]["domain"] == ["security"]
