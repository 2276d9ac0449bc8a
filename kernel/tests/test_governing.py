"""clawkit.governing: the set of paths that govern an agent's next run, the ``governing_paths``
hook that extends it, and where plugins read it (``Agent.governing``, ``ctx.governing``)."""

from __future__ import annotations

import os

from clawkit import hookimpl
from clawkit.testing.scripted import ScriptedReply
from clawkit.governing import GoverningPath, config_home, covering, named_yaml_files


class SkillFolders:
    def __init__(self, root):
        self.root = root

    @hookimpl
    def governing_paths(self, agent):
        return [(self.root / "skills", "a skills folder", True), GoverningPath(str(self.root / "policy.d"), "rules")]


class Broken:
    @hookimpl
    def governing_paths(self, agent):
        raise RuntimeError("cannot say")


class SeesGoverning:
    def __init__(self):
        self.seen = None

    @hookimpl
    def register_tools(self, register, agent):
        def look(ctx) -> str:
            """Look."""
            return "looked"

        register(look)

    @hookimpl
    def before_tool_call(self, ctx, call):
        self.seen = ctx.governing


def test_the_set_plugins_extend_and_read(make_agent, workspace):
    watcher = SeesGoverning()
    agent = make_agent([ScriptedReply(tool_calls=[("look", {})]), "ok"], tools=["look"],
                       plugins=(SkillFolders(workspace), Broken(), watcher))
    ws = os.path.realpath(workspace)
    by_path = {g.path: g for g in agent.governing}
    assert {os.path.join(ws, ".agents"), os.path.join(ws, ".clawkit"), config_home()} <= set(by_path)
    assert by_path[os.path.join(ws, "skills")].consent and not by_path[os.path.join(ws, "policy.d")].consent
    assert covering(agent.governing, os.path.join(ws, ".agents", "prompts", "x.md")).what.startswith("the workspace's")
    assert covering(agent.governing, os.path.join(ws, "src", "main.py")) is None
    agent.run("go")
    assert watcher.seen == agent.governing  # a failing plugin was isolated; the others' paths hold


def test_yaml_files_the_agent_names_and_theirs(tmp_path):
    (tmp_path / "kids").mkdir()
    (tmp_path / "kids" / "child.yaml").write_text("name: c\nsubagents: {g: {agent: grand.yml}}\n")
    (tmp_path / "kids" / "grand.yml").write_text("name: g\nsubagents: {back: {agent: ../kids/child.yaml}}\n")
    data = {"subagents": {"c": {"agent": "kids/child.yaml"}, "later": {"agent": "missing.yaml"}}, "other": ["x.txt"]}
    found = named_yaml_files(data, tmp_path)
    assert found == [str(tmp_path / "kids" / "child.yaml"), str(tmp_path / "kids" / "grand.yml"),
                     str(tmp_path / "missing.yaml")]  # a file named but not there yet is governed too


def test_an_agent_on_its_parents_store_inherits_the_parents_set(make_agent, tmp_path):
    from clawkit.config import validate_agent
    from clawkit.loop import Agent

    parent = make_agent(["ok"])
    parent.config._source = tmp_path / "lead.yaml"
    parent.governing = parent.governing + (GoverningPath(str(tmp_path / "lead.yaml"), "the lead's configuration"),)
    child_cfg = validate_agent({"name": "child", "model": "scripted/test", "workspace": str(tmp_path / "kid")}, "<t>", {})
    child = Agent(child_cfg, pm=parent.pm, store=parent.store, provider=parent.provider)
    try:
        assert covering(child.governing, str(tmp_path / "lead.yaml")) is not None  # a child cannot rewrite its lead
    finally:
        child.close()
