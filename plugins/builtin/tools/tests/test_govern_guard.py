"""What governs the next run: the snapshot that undoes an unjailed command's changes, and the
skill-folder approval (asked every time, naming the file; the write happens only when approved)."""

from __future__ import annotations

import os

import clawkit_tools
from clawkit import hookimpl
from clawkit.governing import GoverningPath
from clawkit.testing.scripted import ScriptedReply
from clawkit.snapshot import Snapshot


def test_snapshot_restores_modified_deleted_and_created_entries(tmp_path):
    conf = tmp_path / "conf"
    (conf / "sub").mkdir(parents=True)
    (conf / "a.yaml").write_text("sandbox: bwrap\n")
    (conf / "sub" / "b.md").write_text("keep me")
    os.symlink("a.yaml", conf / "link")
    (conf / "state.db").write_text("the agent's own database: not ours to restore")
    agent_yaml = tmp_path / "agent.yaml"
    agent_yaml.write_text("name: x\n")
    snap = Snapshot.take([GoverningPath(str(conf), "config"), GoverningPath(str(agent_yaml), "the agent"),
                          GoverningPath(str(conf / "sub"), "inside"), GoverningPath(str(tmp_path / "missing"), "later")])
    (conf / "a.yaml").write_text("sandbox: off\n")
    (conf / "sub" / "b.md").unlink()
    os.unlink(conf / "link")
    os.symlink("/etc/passwd", conf / "link")
    (conf / "new").mkdir()
    (conf / "new" / "x").write_text("planted")
    (tmp_path / "missing").write_text("planted")
    agent_yaml.write_text("name: x\nplugins: {sandbox: {mode: 'off'}}\n")
    (conf / "state.db").write_text("written by the agent meanwhile")
    lines = snap.restore()
    assert (conf / "a.yaml").read_text() == "sandbox: bwrap\n" and (conf / "sub" / "b.md").read_text() == "keep me"
    assert os.readlink(conf / "link") == "a.yaml" and not (conf / "new").exists() and not (tmp_path / "missing").exists()
    assert agent_yaml.read_text() == "name: x\n"
    assert (conf / "state.db").read_text() == "written by the agent meanwhile"
    text = "\n".join(lines)
    assert f"{agent_yaml} (modified; restored)" in text and f"{conf / 'new'} (created; removed)" in text
    assert f"{conf / 'sub' / 'b.md'} (deleted; restored)" in text
    assert snap.changes() == []


class SkillFolder:
    """Stands in for the skills plugin: its folder is a consent path."""

    @hookimpl
    def governing_paths(self, agent):
        return [(os.path.join(str(agent.workspace), "skills"), "a skills folder (workspace)", True)]


def test_skill_file_needs_an_approval_naming_it_each_time(make_agent, workspace):
    asked = []

    def approver(call, reason, ctx):
        asked.append(reason)
        return len(asked) == 1  # yes the first time, no the second

    (workspace / "skills").mkdir()
    agent = make_agent([ScriptedReply(tool_calls=[("write_file", {"path": "skills/a/SKILL.md", "content": "one"})]),
                        ScriptedReply(tool_calls=[("write_file", {"path": "skills/b/SKILL.md", "content": "two"})]),
                        "done"], tools=["write_file"], plugins=(clawkit_tools, SkillFolder()), approver=approver)
    result = agent.run("write skills")
    assert (workspace / "skills" / "a" / "SKILL.md").read_text() == "one"
    assert not (workspace / "skills" / "b").exists()
    assert len(asked) == 2 and "skills/a/SKILL.md" in asked[0] and "skills/b/SKILL.md" in asked[1]
    assert all("later runs of this agent" in r for r in asked)
    assert result.tool_calls[1]["blocked"]
