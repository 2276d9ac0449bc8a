"""The merge rules a child's plugin sections are held to (docs/plugins/subagents.md, "Children
inside their parent"): the stricter of parent and child wins, key by key."""

from __future__ import annotations

from types import SimpleNamespace

from clawkit_subagents.children import covered
from clawkit_subagents.merge import hold, hold_mcp, hold_policy, hold_sandbox, hold_shield, hold_skills


class _Section(dict):
    def model_dump(self, mode: str = "python") -> dict:
        return dict(self)


def _parent(**sections):
    return SimpleNamespace(plugin=lambda name: _Section(sections[name]) if name in sections else None)


def test_risk_never_drops_below_the_parents_and_an_unset_child_inherits_it():
    tools = {"shell_exec": "unsafe", "read_file": "safe", "memory_save": "guarded", "web_fetch": "safe"}
    held = hold_policy({"risk": {"memory_save": "safe", "web_fetch": "unsafe"}},
                       {"risk": {"read_file": "guarded", "shell_exec": "safe", "*": "safe"}}, tools)
    assert held["risk"]["shell_exec"] == "unsafe"  # lowering refused
    assert held["risk"]["web_fetch"] == "unsafe"  # the parent's override stays
    assert held["risk"]["memory_save"] == "safe"  # the parent's own choice passes down when the child says nothing…
    assert held["risk"]["read_file"] == "guarded"  # …and a child may be stricter
    assert list(held["risk"])[:4] == list(tools)  # exact names first: the parent's level decides before any glob


def test_shield_sandbox_and_policy_switches_keep_the_stricter_setting():
    shield = hold_shield({"mode": "permissive", "wrap": "always", "thresholds": {"log": 0.3, "approve": 0.7},
                          "weights": {"unsafe": 0.5}, "trust": {"after_untrusted": 0.9}, "untrusted_tools": ["web_fetch"],
                          "taint_threshold": 1.0, "capability_map": {"x": "network"}},
                         {"mode": "audit-only", "wrap": "never", "thresholds": {"log": 0.9, "approve": 0.2},
                          "weights": {"unsafe": 0.1}, "untrusted_tools": [], "taint_threshold": 9.0,
                          "capability_map": {"x": "read", "y": "write"}})
    assert shield["mode"] == "permissive" and shield["wrap"] == "always"
    assert shield["thresholds"] == {"log": 0.3, "approve": 0.2} and shield["weights"] == {"unsafe": 0.5}
    assert shield["untrusted_tools"] == ["web_fetch"] and shield["taint_threshold"] == 1.0
    assert shield["capability_map"] == {"x": "network", "y": "write"}
    assert hold_shield({"mode": "permissive"}, {"mode": "strict"})["mode"] == "strict"
    sandbox = hold_sandbox({"mode": "bwrap", "bwrap": "bwrap", "network_grants": "proxy", "cpu_seconds": 60,
                            "extra_ro_paths": ["/opt/tool"], "hidden_paths": ["/etc/shadow"]},
                           {"mode": "off", "bwrap": "/tmp/fake", "network_grants": "all", "cpu_seconds": 600,
                            "extra_ro_paths": ["/", "/opt/tool"], "hidden_paths": []})
    assert sandbox["mode"] == "bwrap" and sandbox["bwrap"] == "bwrap" and sandbox["network_grants"] == "proxy"
    assert sandbox["cpu_seconds"] == 60 and sandbox["extra_ro_paths"] == ["/opt/tool"]
    assert sandbox["hidden_paths"] == ["/etc/shadow"]
    policy = hold_policy({"step_grants": False, "step_grant_scope": "step", "audit": True, "egress_tools": ["web_fetch"],
                          "guarded_approval": "call", "approval_ttl": 60},
                         {"step_grants": True, "step_grant_scope": "persistent", "audit": False, "egress_tools": [],
                          "guarded_approval": "tool", "approval_ttl": 99999}, {})
    assert policy["step_grants"] is False and policy["step_grant_scope"] == "step" and policy["audit"] is True
    assert policy["egress_tools"] == ["web_fetch"] and policy["guarded_approval"] == "call" and policy["approval_ttl"] == 60


def test_gate_plugins_stay_on_elevation_is_off_and_grants_never_widen():
    parent = _parent(shield={"mode": "strict"}, directives={"allow_elevated": True})
    out = hold(parent, {"shield": {"enabled": False, "mode": "audit-only"},
                        "directives": {"allow_elevated": True, "allow_noninteractive_elevated": True}},
               {}, keep_on={"shield"})
    assert "enabled" not in out["shield"] and out["shield"]["mode"] == "strict"
    assert out["directives"]["allow_elevated"] is False and out["directives"]["elevated_channels"] == []
    ro = [{"tools": ["read_file"], "paths": ["/data"], "access": "ro"}]
    assert covered({"tools": ["read_file"], "paths": ["/data"], "access": "ro"}, ro)
    assert not covered({"tools": ["read_file"], "paths": ["/data"]}, ro)  # rw under a read-only grant
    assert not covered({"tools": ["web_fetch"], "hosts": ["*"]}, [{"tools": ["web_fetch"], "hosts": ["10.0.0.1"]}])


def test_a_child_starts_no_mcp_server_of_its_own_and_reads_skills_only_from_the_parents_folders():
    data = {"mcp": {"servers": {"fs": {"command": "evil"}, "extra": {"command": "rm"}}}}
    hold_mcp(SimpleNamespace(), data)
    assert "mcp" not in data  # a parent without MCP: the child has none
    parent_mcp = SimpleNamespace(model_dump=lambda **kw: {"servers": {"fs": {"command": "mcp-fs"}}})
    data = {"mcp": {"servers": {"fs": {"command": "evil"}}}}
    hold_mcp(SimpleNamespace(mcp=parent_mcp), data)
    assert data["mcp"] == {"servers": {"fs": {"command": "mcp-fs"}}}
    skills = hold_skills({"paths": ["/team/skills"], "user_dir": "~/.clawkit/skills", "disabled": ["a"]},
                         {"paths": ["/tmp/evil", "/team/skills"], "user_dir": "/tmp/evil", "disabled": ["b"]})
    assert skills["paths"] == ["/team/skills"] and skills["user_dir"] == "~/.clawkit/skills"
    assert skills["disabled"] == ["a", "b"]


def test_a_childs_workspace_is_the_parents_or_a_folder_inside_it(tmp_path):
    import pytest

    from clawkit.errors import ConfigError
    from clawkit_subagents.children import child_workspace

    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    parent = SimpleNamespace(config=SimpleNamespace(workspace=ws))
    assert child_workspace(parent, {}, "c.yaml") == str(ws.resolve())
    assert child_workspace(parent, {"workspace": "."}, "c.yaml") == str(ws.resolve())
    assert child_workspace(parent, {"workspace": "sub"}, "c.yaml") == str((ws / "sub").resolve())
    for wider in ("..", str(tmp_path), "/etc", "sub/../../x"):
        with pytest.raises(ConfigError, match="outside the parent's workspace"):
            child_workspace(parent, {"workspace": wider}, "c.yaml")
    with pytest.raises(ConfigError, match="does not exist"):
        child_workspace(parent, {"workspace": "missing"}, "c.yaml")


def test_a_childs_memory_is_its_own_partition_with_the_parents_file_and_embedding(tmp_path):
    from clawkit_subagents.children import child_memory

    parent = SimpleNamespace(config=SimpleNamespace(workspace=tmp_path, name="lead"))
    mine = child_memory(parent, {"embedding": {"provider": "local"}, "read_partitions": ["team"]},
                        {"partition": "lead", "db": "/tmp/other.db", "read_partitions": ["team", "secret"],
                         "embedding": {"provider": "litellm", "api_base": "http://attacker"},
                         "paths": ["docs", "/etc", "../up", str(tmp_path / "notes")]}, "keeper")
    assert mine["partition"] == "lead>keeper" and mine["child_of"] == "lead"
    assert mine["db"] == str(tmp_path / ".clawkit" / "memory.db")
    assert mine["read_partitions"] == ["lead", "team"]
    assert mine["embedding"] == {"provider": "local"}
    assert mine["paths"] == ["docs", str(tmp_path / "notes")]
