"""A child that lists an allowlist group (``tools: [skills]``) keeps what the group admits in its
parent: the group name is expanded to its patterns before the child's tools are narrowed to the
parent's (it used to match no tool name, so the child silently lost every skill tool)."""

from __future__ import annotations

from clawkit_subagents.children import build_child, close_children, effective_tools


def test_a_child_listing_the_skills_group_keeps_the_parents_skill_tools(make_agent):
    parent = make_agent(script=["ok"], tools=["read_file", "skills"], subagents={
        "helper": {"description": "Uses skills.", "agent": {"name": "helper", "instructions": "Help.",
                                                           "model": {"name": "scripted"},
                                                           "tools": ["skills", "read_file"]}},
        "narrowed": {"description": "Only skills.", "tools": ["skills"],
                     "agent": {"name": "narrowed", "instructions": "Help.", "model": {"name": "scripted"},
                               "tools": ["skills", "read_file"]}},
    })
    parent_tools = effective_tools(parent)
    skill_tools = {n for n in parent_tools if n in ("load_skill", "read_skill_file") or n.startswith("skill_")}
    assert "load_skill" in skill_tools, parent_tools
    try:
        specs = parent.config.subagents.root
        child = build_child(parent, "helper", specs["helper"])
        assert skill_tools <= set(child.config.tools) and "read_file" in child.config.tools, child.config.tools
        narrowed = build_child(parent, "narrowed", specs["narrowed"])
        assert skill_tools <= set(narrowed.config.tools) and "read_file" not in narrowed.config.tools, narrowed.config.tools
        for c in (child, narrowed):
            c.close()
    finally:
        close_children(parent)

