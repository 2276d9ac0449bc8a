"""The per-turn refresh: stats what the last scan saw and rescans only when something moved."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

import clawkit_skills
from clawkit_skills import registry as registry_mod

REPO = Path(__file__).resolve().parents[4]
WEATHER = REPO / "skills" / "weather.claws"
HAIKU = "---\nname: haiku\ndescription: Answer in a haiku.\n---\nThree lines: 5, 7, 5 syllables.\n"


def age(*paths: Path, seconds: float = 60) -> None:
    """Backdate mtimes so the snapshot is not racy (a real edit moves the mtime to now)."""
    t = time.time_ns() - int(seconds * 1e9)
    for p in paths:
        os.utime(p, ns=(t, t))


@pytest.fixture(params=["inotify", "stat"])
def mode(request, monkeypatch):
    """Both per-turn checks: the inotify queue (Linux) and stat (elsewhere, or no inotify)."""
    from clawkit_skills import changes

    if request.param == "stat":
        monkeypatch.setattr(changes, "notifier", lambda: None)
    elif changes.notifier() is None:
        pytest.skip("no inotify here")
    return request.param


@pytest.fixture
def counted(monkeypatch, mode):
    """A registry over tmp dirs whose full scans are counted."""
    scans = []
    real = registry_mod.SkillRegistry._discover

    def discover(self):
        scans.append(1)
        return real(self)

    monkeypatch.setattr(registry_mod.SkillRegistry, "_discover", discover)
    return scans


def test_refresh_rescans_only_on_change(tmp_path, counted):
    root = tmp_path / "skills"
    (root / "nested").mkdir(parents=True)
    target = root / "weather.claws"
    shutil.copy(WEATHER, target)
    missing = tmp_path / "user-skills"  # does not exist yet
    reg = clawkit_skills.SkillRegistry([("workspace", root), ("user", missing)])
    age(target, root / "nested", root)
    assert reg.refresh() is True and len(counted) == 1  # first call: a full scan
    assert reg.refresh() is False and reg.refresh() is False and len(counted) == 1  # settled: stats only

    # a file added in a sub-directory: its directory's mtime moves
    (root / "nested" / "haiku").mkdir()
    (root / "nested" / "haiku" / "SKILL.md").write_text(HAIKU)
    assert reg.refresh() is True and reg.get("haiku") is not None and len(counted) == 2
    age(root / "nested" / "haiku" / "SKILL.md", root / "nested" / "haiku", root / "nested")
    reg.refresh()
    scans = len(counted)
    assert reg.refresh() is False and len(counted) == scans

    # an in-place edit: the file's own (mtime, size) moves
    target.write_text(target.read_text().replace("**Tone:** Brief", "**Tone:** REFRESHED"))
    assert reg.refresh() is True and "REFRESHED" in reg.get("weather").system_prompt_section
    age(target)
    reg.refresh()

    # a source directory that appears later
    missing.mkdir()
    (missing / "h2").mkdir()
    (missing / "h2" / "SKILL.md").write_text(HAIKU.replace("haiku", "haiku2"))
    assert reg.refresh() is True and reg.get("haiku2") is not None

    # a removal
    shutil.rmtree(root / "nested" / "haiku")
    assert reg.refresh() is True and reg.get("haiku") is None
    assert "skills.removed" in [t for t, _ in reg.drain_events()]


def test_recent_changes_are_rescanned_until_they_settle(tmp_path, counted):
    root = tmp_path / "skills"
    root.mkdir()
    shutil.copy(WEATHER, root / "weather.claws")  # written just now: within RACY_NS of the scan
    reg = clawkit_skills.SkillRegistry([("workspace", root)])
    reg.refresh()
    reg.refresh()
    assert len(counted) == 2  # not trusted yet: a same-tick change could hide behind an equal mtime
    age(root / "weather.claws", root)
    reg.refresh()  # settles
    reg.refresh()
    assert len(counted) == 3


def test_hidden_and_node_modules_folders_are_not_scanned(tmp_path):
    root = tmp_path / "skills"
    for d in (".git", "__pycache__", "node_modules", "ok"):
        (root / d).mkdir(parents=True)
        shutil.copy(WEATHER, root / d / "weather.claws")
    reg = clawkit_skills.SkillRegistry([("workspace", root)])
    reg.sync()
    assert [p.relative_to(root).as_posix() for p in reg.files] == ["ok/weather.claws"]


def test_a_settled_refresh_with_inotify_stats_nothing_watched(tmp_path, monkeypatch):
    from clawkit_skills import changes

    if changes.notifier() is None:
        pytest.skip("no inotify here")
    root = tmp_path / "skills"
    (root / "a" / "b").mkdir(parents=True)
    shutil.copy(WEATHER, root / "a" / "b" / "weather.claws")
    reg = clawkit_skills.SkillRegistry([("workspace", root), ("user", tmp_path / "absent")])
    age(root / "a" / "b" / "weather.claws", root / "a" / "b", root / "a", root, tmp_path)
    reg.refresh()
    reg.refresh()  # (the first check after a scan looks at the absent folder itself)
    stats: list[str] = []
    real = os.stat

    def stat(path, *a, **kw):
        stats.append(str(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(registry_mod.os, "stat", stat)
    assert reg.refresh() is False
    # nothing: the absent folder is watched through its parent, for its own name
    assert stats == []
    (tmp_path / "absent").mkdir()  # and a folder created later is in the very next check
    shutil.copy(WEATHER, tmp_path / "absent" / "other.claws")
    monkeypatch.setattr(registry_mod.os, "stat", real)
    assert reg.refresh() is True
    # an in-place edit three folders down is in the very next check
    monkeypatch.setattr(registry_mod.os, "stat", real)
    target = root / "a" / "b" / "weather.claws"
    target.write_text(target.read_text().replace("**Tone:** Brief", "**Tone:** INOTIFY"))
    assert reg.refresh() is True and "INOTIFY" in reg.get("weather").system_prompt_section


def test_an_edit_behind_a_symlinked_skill_file_is_seen(tmp_path, mode):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    real_file = elsewhere / "weather.claws"
    shutil.copy(WEATHER, real_file)
    root = tmp_path / "skills"
    root.mkdir()
    (root / "weather.claws").symlink_to(real_file)
    reg = clawkit_skills.SkillRegistry([("workspace", root)])
    age(real_file, root)
    reg.refresh()
    reg.refresh()
    real_file.write_text(real_file.read_text().replace("**Tone:** Brief", "**Tone:** LINKED"))
    assert reg.refresh() is True and "LINKED" in reg.get("weather").system_prompt_section


def test_list_skills_follows_the_allowlist_and_the_skills(tmp_path):
    """list_skills remembers each skill's admission between messages; a change of the tools'
    groups or declared names, or of the skills, is answered anew."""
    from types import SimpleNamespace

    from clawkit.tools import ToolRegistry

    root = tmp_path / "skills"
    root.mkdir()
    shutil.copy(WEATHER, root / "weather.claws")
    reg = clawkit_skills.SkillRegistry([("workspace", root)])
    reg.sync()
    tools = ToolRegistry(["add"])
    ctx = SimpleNamespace(state={"skills.registry": reg}, tools=tools)
    assert clawkit_skills.list_skills(ctx) == [] and clawkit_skills.list_skills(ctx) == []
    tools.declared.add("load_skill")
    assert [s.name for s in clawkit_skills.list_skills(ctx)] == ["weather"]
    tools.declared.discard("load_skill")
    tools.allow.append("skills")
    tools.add_group("skills", ("load_skill", "skill_*"))
    assert [s.name for s in clawkit_skills.list_skills(ctx)] == ["weather"]
    (root / "weather.claws").unlink()
    reg.sync()
    assert clawkit_skills.list_skills(ctx) == []


def test_absent_source_folders_are_watched_through_their_parents(tmp_path, counted, mode):
    """A source folder that is not there (several levels missing, or a file in its place) costs the
    per-turn check no stat: its nearest existing parent is watched for the entry that would bring it.
    Other entries coming and going in that parent rescan nothing."""
    if mode == "stat":
        pytest.skip("the inotify check only: without inotify an absent folder's parent is stat'ed (tested above)")
    deep = tmp_path / "home" / ".clawkit" / "skills"  # two levels missing
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "skills").write_text("not a folder")
    reg = clawkit_skills.SkillRegistry([("workspace", tmp_path / "ws" / "skills"), ("user", deep)])
    age(tmp_path / "ws" / "skills", tmp_path / "ws", tmp_path)
    reg.refresh()
    scans = len(counted)
    (tmp_path / "ws" / "notes.txt").write_text("x")  # unrelated entries in the watched parents
    (tmp_path / "other").mkdir()
    assert reg.refresh() is False and len(counted) == scans
    (tmp_path / "home").mkdir()  # the first missing level appears: a rescan, which watches the next one
    assert reg.refresh() is False and len(counted) == scans + 1
    (tmp_path / "home" / ".clawkit").mkdir()
    reg.refresh()
    deep.mkdir()
    shutil.copy(WEATHER, deep / "weather.claws")
    assert reg.refresh() is True and reg.get("weather").source == "user"
    (tmp_path / "ws" / "skills").unlink()  # the file in the workspace's place becomes a folder
    (tmp_path / "ws" / "skills").mkdir()
    shutil.copy(WEATHER, tmp_path / "ws" / "skills" / "weather.claws")
    assert reg.refresh() is True and reg.get("weather").source == "workspace"
