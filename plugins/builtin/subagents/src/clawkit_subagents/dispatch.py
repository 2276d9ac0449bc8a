"""Dispatch from the translation device: a confident route to a sub-agent becomes an
``agent_<name>`` call through the one gate pipeline.

The translation plugin puts ``route["dispatch"] = [{"agent", "task", "intent", "skills"}, ...]``
in the turn state when a profile names a sub-agent (several entries for a message it
decomposed into intents: MULTI). This plugin does not spawn anything itself: it plans one
``agent_<name>`` call per entry (``ctx.plan_tool_call(..., origin="router")``), and the
kernel makes them — concurrently — exactly like calls the model made: ``before_tool_call``
gates (policy risk, sequence rules, the shield), approvals, the audit ledger, the child's
answer wrapped as data by ``after_tool_call``, persisted as tool results. The lead's model
then answers from those results. Before a routed child is spawned, the manifest of the
skill the router chose for it is checked (:func:`skill_refusal`, in this plugin's
``before_tool_call``): a skill whose manifest denies or does not grant what the child's
tools would do refuses the dispatch, with the reason.
"""

from __future__ import annotations

from typing import Any

ORIGIN = "router"
ROUTED_KEY = "subagents.routed"  # turn state: call id -> {"agent", "intent", "skills"}

# tool -> capability, for the tools a child can be given (the names skill manifests use; more
# can be mapped in the shield's ``capability_map`` — the check here covers the builtin tools)
TOOL_CAPABILITIES = {
    "read_file": "fs.read", "list_dir": "fs.read", "glob": "fs.read", "grep": "fs.read", "read_tool_output": "fs.read",
    "write_file": "fs.write", "edit_file": "fs.write",
    "shell_exec": "shell.exec",
    "web_fetch": "net.http", "web_search": "net.http",
}
ALIASES = {
    "fs.read": {"fs.read", "filesystem.read", "file.read", "files.read", "fs", "filesystem", "files", "read"},
    "fs.write": {"fs.write", "filesystem.write", "file.write", "files.write", "fs", "filesystem", "files", "write"},
    "shell.exec": {"shell.exec", "shell", "exec", "process.exec", "process.spawn", "command", "commands", "system.exec"},
    "net.http": {"net.http", "net.fetch", "net", "network", "network.http", "http", "https", "web", "web.fetch", "internet"},
}


def dispatch(ctx: Any, items: list[dict[str, Any]]) -> None:
    """Plan one routed ``agent_<name>`` call per dispatch entry naming a declared sub-agent."""
    declared = ctx.agent.subagents
    wanted = [i for i in items if isinstance(i, dict) and declared.get(str(i.get("agent"))) is not None
              and str(i.get("task") or "").strip()]
    if not wanted:
        return None
    routed = ctx.state.setdefault(ROUTED_KEY, {})
    ids = []
    for item in wanted:
        agent = str(item["agent"])
        call = ctx.plan_tool_call(f"agent_{agent}", {"task": str(item["task"])}, origin=ORIGIN)
        routed[call.id] = {"agent": agent, "intent": item.get("intent"), "skills": list(item.get("skills") or [])}
        ids.append(call.id)
    ctx.emit("subagent.dispatch", agents=[str(i["agent"]) for i in wanted], intents=[i.get("intent") for i in wanted],
             calls=ids, origin=ORIGIN)
    return None


def _names(value: Any) -> set[str]:
    if value is None:
        return set()
    items = value if isinstance(value, (list, tuple, set)) else [value]
    return {str(v).strip().lower() for v in items}


def _covers(names: set[str], capability: str) -> bool:
    return bool(names & ALIASES.get(capability, {capability}))


def manifest_refusal(skill: str, items: list[dict[str, Any]], agent: str, tools: list[str]) -> str | None:
    """Why skill ``skill``'s manifest permission ``items`` forbid a child with ``tools``; None when
    they allow it. A capability a child tool needs must be granted by a ``capability:`` item and
    named by no ``deny:`` item (deny wins), as the shield rules for calls."""
    denied = set().union(*(_names(i.get("deny")) for i in items if "capability" not in i)) if items else set()
    granted = set().union(*(_names(i.get("capability")) for i in items if "capability" in i)) if items else set()
    for tool in tools:
        capability = TOOL_CAPABILITIES.get(tool)
        if capability is None:
            continue
        if _covers(denied, capability):
            return (f"the routed skill {skill!r} denies {capability} in its manifest, which sub-agent {agent!r} "
                    f"would need (its tool {tool})")
        if not _covers(granted, capability):
            return (f"the routed skill {skill!r} does not grant {capability} in its manifest, which sub-agent "
                    f"{agent!r} would need (its tool {tool})")
    return None


def _child_tools(ctx: Any, name: str, spec: Any) -> list[str]:
    """The tools the child would have: its effective (attenuated) tool list."""
    from .children import child_for, lineage

    return list(lineage(child_for(ctx.runtime, name, spec)).tools)


def skill_refusal(ctx: Any, call: Any) -> str | None:
    """For a routed ``agent_<name>`` call: the first routed skill whose manifest forbids what the
    child would need, as a reason; None when every routed skill allows it (or none was routed)."""
    routed = (ctx.state.get(ROUTED_KEY) or {}).get(call.id)
    if not routed or not routed.get("skills"):
        return None
    hooks = ctx.hooks
    listed = [sk for found in hooks.call_sync("list_skills", ctx=ctx) for sk in (found or [])] if hooks.has("list_skills") else []
    by_name = {getattr(sk, "name", None): sk for sk in listed}
    spec = ctx.agent.subagents.get(routed["agent"])
    try:
        tools = _child_tools(ctx, routed["agent"], spec)
    except Exception as exc:  # a child that cannot be built cannot be checked: refused, with why
        return f"sub-agent {routed['agent']!r} cannot start, so the routed skill's manifest cannot be checked: {exc}"
    for name in routed["skills"]:
        skill = by_name.get(name)
        if skill is None:
            continue
        items = [dict(i) for i in (getattr(skill, "capability_requests", None) or [])]
        if not items:
            continue
        reason = manifest_refusal(name, items, routed["agent"], tools)
        if reason is not None:
            return reason
    return None
