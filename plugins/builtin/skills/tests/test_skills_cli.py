"""`clawkit skills list | show | check | stats` through the real clawkit CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture
def cli(monkeypatch, tmp_path, capsys):
    from clawkit.cli import main

    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "clawkit-skills")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user skills leak in
    monkeypatch.chdir(tmp_path)

    def run(*argv):
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_list_shows_shipped_skills_with_availability(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out, _ = cli("skills", "list", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)["skills"]}
    assert {"weather", "web-research", "code-review", "summarize", "git-commit", "github-issues"} <= set(rows)
    assert rows["weather"]["available"] and rows["weather"]["tools"] == ["skill_weather"]
    assert rows["github-issues"]["available"] is False
    assert rows["github-issues"]["reason"] == "missing binaries: gh; missing environment variables: GITHUB_TOKEN"
    code, out, _ = cli("skills", "list")
    assert "github-issues" in out and "unavailable: missing binaries: gh" in out


def test_show_prints_section_tool_schemas_and_guardrails(cli):
    code, out, _ = cli("skills", "show", "weather")
    assert code == 0
    assert "## Prompt section\n### Skill: weather" in out
    assert '"name": "skill_weather"' in out and "## Guardrails" in out and "api.open-meteo.com" in out
    assert "FCST" not in out  # the lexicon is not part of the compiled prompt output
    code, _, err = cli("skills", "show", "nope")
    assert code == 2 and "no skill named 'nope'" in err


def test_check_names_file_and_line_and_fails(cli, tmp_path):
    code, out, _ = cli("skills", "check")
    assert code == 0 and "skill files OK" in out
    ws = tmp_path / "skills"
    ws.mkdir()
    text = (REPO / "skills" / "weather.claws").read_text()
    (ws / "bad.claws").write_text(text.replace("location: string;", "location: strin;"))
    code, out, err = cli("skills", "check")
    assert code == 1
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "location: string;" in ln)
    assert f"{ws / 'bad.claws'}:{line}: [CLAW-IDL] unknown type 'strin'" in out
    assert "1 error(s) in 1 file(s)" in err


def test_agent_option_uses_the_agents_workspace_and_settings(cli, tmp_path):
    ws = tmp_path / "proj"
    (ws / "skills" / "mine").mkdir(parents=True)
    (ws / "skills" / "mine" / "SKILL.md").write_text("---\nname: mine\ndescription: Mine only.\n---\nDo mine.\n")
    agent = tmp_path / "agent.yaml"
    agent.write_text("name: a\nmodel: openai/x\nworkspace: proj\nplugins:\n  skills:\n    shipped: false\n")
    code, out, _ = cli("skills", "list", "--agent", str(agent), "--json")
    assert code == 0 and [r["name"] for r in json.loads(out)["skills"]] == ["mine"]
    code, out, _ = cli("skills", "--agent", str(agent), "show", "mine")
    assert code == 0 and "Do mine." in out
    code, _, err = cli("skills", "list", "--agent", str(tmp_path / "missing.yaml"))
    assert code == 2 and "missing.yaml" in err


def test_stats_reads_every_metrics_table(cli, tmp_path):
    db = tmp_path / ".clawkit" / "state.db"
    db.parent.mkdir()
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE skills_metrics (metric TEXT PRIMARY KEY, value REAL NOT NULL, updated REAL NOT NULL)")
    conn.execute("INSERT INTO skills_metrics VALUES ('loaded:weather', 3, 0)")
    conn.execute("CREATE TABLE translation_metrics (metric TEXT PRIMARY KEY, value REAL)")
    conn.execute("INSERT INTO translation_metrics VALUES ('messages_encoded', 7)")
    conn.execute("CREATE TABLE odd_metrics (x TEXT)")  # not in the shared shape: skipped
    conn.commit()
    conn.close()
    code, out, _ = cli("skills", "stats", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["skills"]["loaded:weather"] == 3 and data["skills"]["skills_available"] >= 4
    assert data["translation"] == {"messages_encoded": 7}
    assert "odd" not in data
    code, out, _ = cli("skills", "stats")
    assert "[translation]" in out and "messages_encoded" in out
