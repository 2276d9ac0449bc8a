"""The routed skill's manifest, checked before a routed child is spawned (issue 30, seed 002 step 18)."""

from __future__ import annotations

from clawkit_subagents.dispatch import manifest_refusal

WEB = [{"capability": "net.http", "allow": ["*"], "skill": "web"}, {"deny": ["fs.write", "shell"], "skill": "web"}]


def test_a_denied_capability_refuses_with_the_skill_the_capability_and_the_tool():
    reason = manifest_refusal("web", WEB, "helper", ["web_fetch", "shell_exec"])
    assert reason == ("the routed skill 'web' denies shell.exec in its manifest, which sub-agent 'helper' would need "
                      "(its tool shell_exec)")


def test_an_ungranted_capability_refuses():
    reason = manifest_refusal("web", WEB[:1], "helper", ["read_file"])
    assert reason is not None and "does not grant fs.read" in reason and "read_file" in reason


def test_granted_capabilities_and_unmapped_tools_pass():
    assert manifest_refusal("web", WEB, "helper", ["web_fetch", "memory_save"]) is None
    aliases = [{"capability": "filesystem.read", "paths": ["docs/**"]}, {"capability": "network"}]
    assert manifest_refusal("docs", aliases, "helper", ["read_file", "list_dir", "web_fetch"]) is None
    assert manifest_refusal("docs", [{"deny": "write"}], "helper", ["edit_file"]) is not None  # a single string
