"""A child is held to its parent's tool-sequence rules (``plugins.sequence``), through ``clawkit run``
with every builtin loaded and the loopback model. The sequence enforcer gates tool calls, so a
child could not switch it off — but its *rules* were taken as the child's file wrote them: a child
whose file says ``sequence: {rules: []}`` (or nothing) wrote over a file it never read, where its
parent is stopped. Now the parent's rules bind the child, which may add its own; the child may
trust tool-result directives only from tools its parent trusts.

The same audit of every section against the merge rules (docs/plugins/subagents.md) found more
keys taken as the child wrote them, held here too: the skills folder of the workspace and
``routed_manifests``, the tools section's remaining caps, the OpenTelemetry switches, and the
project files and prompts folder the prompt contributors read (a child file could quote a file
beside the workspace into its prompt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawkit.testing.server import Reply
from clawkit_subagents.merge import hold_sequence

pytestmark = pytest.mark.e2e

RULE = {"tool": "write_file", "requires": ["read_file"], "match": "path", "existing_only": True,
        "message": "read {path} before writing it"}


def test_a_childs_own_file_cannot_drop_the_parents_sequence_rules(tmp_path, kit, model_server):
    (tmp_path / "notes.md").write_text("KEEP-THIS-LINE\n")
    kit.write(tmp_path / "lead.yaml", f"""
        name: lead
        model: {kit.model_block(model_server, "lead")}
        tools: [read_file, write_file]
        plugins:
          policy: {{risk: {{write_file: safe, agent_writer: safe}}}}
          sequence:
            rules: [{{tool: write_file, requires: [read_file], match: path, existing_only: true,
                      message: "read {{path}} before writing it"}}]
        subagents:
          writer: {{agent: writer.yaml, description: Writes files.}}
        """)
    kit.write(tmp_path / "writer.yaml", f"""
        name: writer
        model: {kit.model_block(model_server, "writer")}
        tools: [read_file, write_file]
        plugins:
          policy: {{risk: {{write_file: safe}}}}
          sequence: {{rules: []}}
        """)
    model_server.script(kit.ByModel(
        lead=[Reply.tool_calls([("write_file", {"path": "notes.md", "content": "by the lead"}),
                                ("agent_writer", {"task": "overwrite notes.md"})]), "done"],
        writer=[Reply.tool_calls([("write_file", {"path": "notes.md", "content": "by the child"})]), "tried"],
    ))
    result = kit.run_json(tmp_path, "lead.yaml", "replace the notes")
    assert result["reply"] == "done"
    assert (tmp_path / "notes.md").read_text() == "KEEP-THIS-LINE\n"  # neither wrote over an unread file
    (child_second,) = kit.requests_for(model_server, "writer")[1:]
    said = [m["content"] for m in child_second.messages if m["role"] == "tool"]
    assert any("read notes.md before writing it" in s for s in said), said


def test_the_merge_rule_keeps_the_parents_rules_and_trusts_no_more_than_the_parent():
    parent = {"rules": [RULE], "count_failed": False, "max_blocks": 2,
              "directives": {"enabled": True, "trusted_tools": ["mcp__mine__*"], "untrusted_tools": ["web_fetch"]}}
    child_rule = {"tool": "shell_exec", "requires": ["read_file"]}
    held = hold_sequence(parent, {"rules": [child_rule, RULE], "count_failed": True, "max_blocks": 5,
                                  "directives": {"enabled": False, "trusted_tools": ["*", "mcp__mine__*"],
                                                 "untrusted_tools": []}})
    assert held["rules"] == [RULE, child_rule]  # the parent's first, once; the child's own added
    assert held["count_failed"] is False and held["max_blocks"] == 5  # a failed call counts only if both say so
    assert held["directives"] == {"enabled": True, "trusted_tools": ["mcp__mine__*"], "untrusted_tools": ["web_fetch"]}
    quiet = hold_sequence(parent, {})
    assert quiet["rules"] == [RULE] and quiet["directives"]["trusted_tools"] == ["mcp__mine__*"]


def test_a_childs_skill_folder_stays_in_its_workspace_and_routed_manifests_stay_as_strict():
    from clawkit_subagents.merge import hold_skills

    parent = {"workspace_dir": "skills", "routed_manifests": "ask", "paths": [], "user_dir": "~/.clawkit/skills"}
    for escaping in ("/etc/skills", "~/elsewhere", "../../shared/skills", "a/../../b"):
        assert hold_skills(parent, {"workspace_dir": escaping})["workspace_dir"] == "skills", escaping
    assert hold_skills(parent, {"workspace_dir": "team/skills"})["workspace_dir"] == "team/skills"
    assert hold_skills(parent, {"routed_manifests": "guide"})["routed_manifests"] == "ask"
    assert hold_skills({"routed_manifests": "guide"}, {"routed_manifests": "ask"})["routed_manifests"] == "ask"


def test_every_size_and_time_cap_of_the_tools_section_is_the_lower():
    from clawkit_subagents.merge import hold_tools

    caps = {"shell_timeout": 30, "max_list_entries": 500, "glob_timeout": 5, "glob_max_visited": 20000}
    held = hold_tools(caps, {k: v * 10 for k, v in caps.items()})
    assert {k: held[k] for k in caps} == caps


def test_a_child_traces_when_its_parent_does_and_captures_text_only_if_the_parent_does():
    from clawkit_subagents.merge import hold_otel

    assert hold_otel({"export": True, "capture_content": False}, {"export": False, "capture_content": True}) == \
        {"export": True, "capture_content": False}
    assert hold_otel({"export": False, "capture_content": True}, {"capture_content": True}) == \
        {"export": False, "capture_content": True}


def test_a_childs_project_files_and_prompts_come_from_its_workspace_not_beside_it(tmp_path, kit, model_server):
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (tmp_path / "secret.md").write_text("BESIDE-THE-WORKSPACE-5521\n")
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "rules.md").write_text("OUTSIDE-PROMPT-8830\n")
    (ws / "AGENTS.md").write_text("INSIDE-AGENTS-1177\n")
    kit.write(tmp_path / "lead.yaml", f"""
        name: lead
        model: {kit.model_block(model_server, "lead")}
        workspace: ws
        plugins: {{policy: {{risk: {{agent_reader: safe}}}}}}
        subagents:
          reader: {{agent: reader.yaml, description: Reads.}}
        """)
    kit.write(tmp_path / "reader.yaml", f"""
        name: reader
        model: {kit.model_block(model_server, "reader")}
        plugins:
          contributors: {{project_files: [AGENTS.md, ../secret.md, {tmp_path / 'secret.md'}], prompts_dir: ../prompts}}
        """)
    model_server.script(kit.ByModel(lead=[Reply.tool_calls([("agent_reader", {"task": "summarise"})]), "done"],
                                    reader=["summarised"]))
    assert kit.run_json(tmp_path, "lead.yaml", "go")["reply"] == "done"
    (child,) = kit.requests_for(model_server, "reader")
    seen = json.dumps(child.body)
    assert "INSIDE-AGENTS-1177" in seen  # its own workspace's project file is quoted
    assert "BESIDE-THE-WORKSPACE-5521" not in seen and "OUTSIDE-PROMPT-8830" not in seen
