"""Workspace sections in .agents/prompts/*.md: frontmatter, errors with path and line, hot reload."""

from __future__ import annotations

import os
import time

import pytest

import clawkit_contributors
from clawkit.config import collect_sections, validate_agent
from clawkit.hooks import HookRunner
from clawkit.loop import Agent
from clawkit.testing import plugin_manager
from clawkit.testing import ScriptedProvider
from clawkit.types import SessionClassification
from clawkit_contributors import WorkspacePrompts


@pytest.fixture(autouse=True)
def _stop_watchers():
    yield
    clawkit_contributors.close_all()


@pytest.fixture
def prompts(workspace):
    d = workspace / ".agents" / "prompts"
    d.mkdir(parents=True)
    return d


def build(workspace, script=("ok",), **config):
    pm = plugin_manager(clawkit_contributors)
    data = {"name": "helper", "model": "scripted/test", "workspace": str(workspace), **config}
    cfg = validate_agent(data, "<test>", {}, collect_sections(HookRunner(pm)))
    return Agent(cfg, pm=pm, provider=ScriptedProvider(list(script)), persist=False)


def test_frontmatter_fields_and_defaults(prompts):
    (prompts / "security.md").write_text("---\nid: sec\ntags: [domain:security, 'custom:audit']\npriority: 7\nheading: Security\nmax_chars: 200\n---\nValidate input.\n")
    (prompts / "plain.md").write_text("No frontmatter at all.\n")
    wp = WorkspacePrompts(prompts, watch=False)
    by = {c.id: c for c in wp.contributors}
    assert set(by) == {"sec", "plain"} and not wp.errors
    sec = by["sec"]
    assert (sec.priority, sec.max_chars, sec.heading, sec.content) == (7, 200, "Security", "Validate input.")
    assert [str(t) for t in sec.tags] == ["domain:security", "custom:audit"]
    assert by["plain"].priority == 100 and by["plain"].tags == []


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("---\nid: a\ntags: [oops\n---\nbody\n", 3, "invalid YAML"),
        ("---\nid: a\npriority: high\n---\nbody\n", 3, "priority"),
        ("---\nid: a\ntags: [mood:sad]\n---\nbody\n", 3, "unknown dimension 'mood'"),
        ("---\nid: a\ncolour: red\n---\nbody\n", 3, "colour: unknown key"),
        ("---\nid: a\nbody without a closing line\n", 1, "never closed"),
        ("---\n- just\n- a list\n---\nbody\n", 2, "must be a mapping"),
    ],
)
def test_malformed_files_are_reported_with_path_and_line_and_skipped(prompts, text, line, message):
    (prompts / "good.md").write_text("---\nid: good\n---\nStill here.\n")
    (prompts / "bad.md").write_text(text)
    wp = WorkspacePrompts(prompts, watch=False)
    assert [c.id for c in wp.contributors] == ["good"]
    (err,) = wp.errors
    assert err.path.endswith("bad.md") and err.line == line and message in err.message
    assert str(err).startswith(f"{prompts / 'bad.md'}:{line}: ")


def test_duplicate_ids_are_reported(prompts):
    (prompts / "a.md").write_text("---\nid: same\n---\none\n")
    (prompts / "b.md").write_text("---\nid: same\n---\ntwo\n")
    wp = WorkspacePrompts(prompts, watch=False)
    assert [c.content for c in wp.contributors] == ["one"]
    assert "already used by a.md" in wp.errors[0].message


def test_malformed_file_is_reported_as_an_event(workspace, prompts):
    (prompts / "bad.md").write_text("---\npriority: [\n---\nx\n")
    agent = build(workspace)
    r = agent.run("hi")
    (ev,) = agent.store.events(r.session_id, "contributors.invalid")
    assert ev["data"]["path"].endswith("bad.md") and ev["data"]["line"] == 2


def test_workspace_sections_are_selected_by_classification(workspace, prompts):
    (prompts / "sec.md").write_text("---\ntags: [domain:security]\n---\nSECURITY RULES\n")
    (prompts / "fe.md").write_text("---\ntags: [domain:frontend]\n---\nFRONTEND RULES\n")

    class Classifier:
        name = "fixed-classifier"

        @clawkit_contributors.hookimpl
        def classify_session(self, session, messages):
            return SessionClassification(topic="coding", domain=["security"])

    pm = plugin_manager(clawkit_contributors, Classifier())
    data = {"name": "helper", "model": "scripted/test", "workspace": str(workspace)}
    agent = Agent(validate_agent(data, "<t>", {}, collect_sections(HookRunner(pm))), pm=pm, provider=ScriptedProvider(["ok"]), persist=False)
    agent.run("audit this")
    system = agent.provider.requests[0].system
    assert "SECURITY RULES" in system and "FRONTEND RULES" not in system


def _touch_later(path, text):
    """Write so that mtime certainly differs (coarse filesystem clocks)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def test_an_edited_section_is_used_on_the_next_turn_without_restart(workspace, prompts):
    style = prompts / "style.md"
    style.write_text("---\nid: style\n---\nAnswer in English.\n")
    agent = build(workspace, ["one", "two", "three"])
    sid = agent.run("hello").session_id
    assert "Answer in English." in agent.provider.requests[0].system

    wp = clawkit_contributors.workspace_prompts(agent.config)
    assert wp._thread is not None and wp._thread.is_alive()  # a real watchfiles watcher
    gen = wp.generation
    _touch_later(style, "---\nid: style\n---\nAnswer in Welsh.\n")
    assert wp.wait_for_generation(gen + 1, timeout=10), "watchfiles did not report the edit"
    agent.run("again", session_id=sid)
    second = agent.provider.requests[1].system
    assert "Answer in Welsh." in second and "English" not in second

    # a new file, then a deletion, are picked up the same way
    gen = wp.generation
    (prompts / "extra.md").write_text("EXTRA SECTION\n")
    assert wp.wait_for_generation(gen + 1, timeout=10)
    deadline = time.monotonic() + 10
    while "extra" not in [c.id for c in wp.contributors] and time.monotonic() < deadline:
        wp.wait_for_generation(wp.generation + 1, timeout=1)
    gen = wp.generation
    style.unlink()
    assert wp.wait_for_generation(gen + 1, timeout=10)
    deadline = time.monotonic() + 10
    while "style" in [c.id for c in wp.contributors] and time.monotonic() < deadline:
        wp.wait_for_generation(wp.generation + 1, timeout=1)
    agent.run("third", session_id=sid)
    third = agent.provider.requests[2].system
    assert "EXTRA SECTION" in third and "Welsh" not in third


def test_prompt_builds_do_not_touch_unchanged_files(prompts):
    (prompts / "a.md").write_text("A\n")
    wp = WorkspacePrompts(prompts, watch=False)
    first = wp.contributors[0]
    wp.reload()
    assert wp.contributors[0] is first  # same mtime and size: not re-parsed


def test_directory_created_after_start_is_picked_up(workspace, monkeypatch):
    """Noticed by the first prompt build RECHECK_S after the last look at the directory (a look per
    turn was a stat on the event loop's thread; concurrent turns share one now)."""
    from clawkit_contributors import workspace as ws

    clock = [1000.0]
    monkeypatch.setattr(ws, "time", type("Clock", (), {"monotonic": staticmethod(lambda: clock[0])}))
    agent = build(workspace, ["one", "two", "three"])
    sid = agent.run("hello").session_id
    d = workspace / ".agents" / "prompts"
    d.mkdir(parents=True)
    (d / "late.md").write_text("LATE SECTION\n")
    agent.run("again", session_id=sid)
    assert "LATE SECTION" not in agent.provider.requests[1].system  # looked at RECHECK_S ago: not yet
    clock[0] += ws.RECHECK_S
    agent.run("and again", session_id=sid)
    assert "LATE SECTION" in agent.provider.requests[2].system


def test_relative_workspace_follows_the_working_directory(tmp_path, monkeypatch):
    """The per-config cache of the prompts directory must not outlive a ``chdir``."""
    for name in ("one", "two"):
        d = tmp_path / name / "ws" / ".agents" / "prompts"
        d.mkdir(parents=True)
        (d / "where.md").write_text(f"IN {name.upper()}\n")
    monkeypatch.chdir(tmp_path / "one")
    agent = build("ws", ["a", "b"])
    agent.run("hello")
    monkeypatch.chdir(tmp_path / "two")
    agent.run("hello")
    assert "IN ONE" in agent.provider.requests[0].system
    assert "IN TWO" in agent.provider.requests[1].system
    assert clawkit_contributors.workspace_prompts(agent.config) is clawkit_contributors.workspace_prompts(agent.config)
