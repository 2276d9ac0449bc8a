"""Skill manifests checked before a child is spawned (issue 30, seed 002 step 18): a denied capability
refuses the spawn, an ungranted one needs approval (the shield's permissive rule), each with why."""

from __future__ import annotations

from clawkit_subagents.dispatch import manifest_refusal

WEB = [{"capability": "net.http", "allow": ["*"], "skill": "web"}, {"deny": ["fs.write", "shell"], "skill": "web"}]


def test_a_denied_capability_blocks_with_the_skill_the_capability_and_the_tool():
    assert manifest_refusal("web", WEB, "helper", ["read_file", "shell_exec"]) == (
        "block", "the skill 'web' denies shell.exec in its manifest, which sub-agent 'helper' would need (its tool shell_exec)")


def test_an_ungranted_capability_needs_approval():
    action, reason = manifest_refusal("web", WEB[:1], "helper", ["read_file"])
    assert action == "require_approval" and "does not grant fs.read" in reason and "read_file" in reason


def test_granted_capabilities_and_unmapped_tools_pass():
    assert manifest_refusal("web", WEB, "helper", ["web_fetch", "memory_save"]) is None
    aliases = [{"capability": "filesystem.read", "paths": ["docs/**"]}, {"capability": "network"}]
    assert manifest_refusal("docs", aliases, "helper", ["read_file", "list_dir", "web_fetch"]) is None
    assert manifest_refusal("docs", [{"deny": "write"}], "helper", ["edit_file"])[0] == "block"  # a single string
