"""Dispatch from the translation device: a confident route to a sub-agent becomes an
``agent_<name>`` call through the one gate pipeline.

The translation plugin puts ``route["dispatch"] = [{"agent", "task", "intent", "skills"}, ...]``
in the turn state when a profile names a sub-agent (several entries for a message it
decomposed into intents: MULTI). This plugin does not spawn anything itself: it plans one
``agent_<name>`` call per entry (``ctx.plan_tool_call(..., origin="router")``), and the
kernel makes them — concurrently — exactly like calls the model made: ``before_tool_call``
gates (policy risk, sequence rules, the shield), approvals, the audit ledger, the child's
answer wrapped as data by ``after_tool_call``, persisted as tool results. The lead's model
then answers from those results. Before a child is spawned (routed or not), the manifests
of the skills that govern it — the router's skills for a routed task, and the skills bound
to the agent's own calls (``always``, loaded) — are checked against what the child's tools
would do (:func:`skill_decision`, in this plugin's ``before_tool_call``): a denied
capability refuses the spawn, an ungranted one needs approval, each with the reason.
"""

from __future__ import annotations

from typing import Any

from clawkit.effects import canonical, capability_of, covers as _covers

ORIGIN = "router"
ROUTED_KEY = "subagents.routed"  # turn state: call id -> {"agent", "intent", "skills"}

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
    return {canonical(str(v)) for v in items}


def manifest_refusal(skill: str, items: list[dict[str, Any]], agent: str, tools: list[str],
                     definitions: dict[str, Any] | None = None,
                     overrides: dict[str, str] | None = None) -> tuple[str, str] | None:
    """How skill ``skill``'s manifest permission ``items`` rule on a child with ``tools`` (their
    :class:`~clawkit.types.ToolDef` in ``definitions``: a declared capability counts, as at the shield;
    ``overrides``: the child's ``shield.capability_map``, the parent's entries winning, which comes first):
    ``("block", reason)`` when a capability a child tool needs is denied (deny wins),
    ``("require_approval", reason)`` when no ``capability:`` item grants it (the shield's
    permissive rule for an ungranted capability), None when every such capability is granted."""
    denied = set().union(*(_names(i.get("deny")) for i in items if "capability" not in i)) if items else set()
    granted = set().union(*(_names(i.get("capability")) for i in items if "capability" in i)) if items else set()
    ungranted = None
    for tool in tools:
        capability = capability_of(tool, (definitions or {}).get(tool), overrides)
        if capability is None:
            continue
        if _covers(denied, capability):
            return "block", (f"the skill {skill!r} denies {capability} in its manifest, which sub-agent {agent!r} "
                             f"would need (its tool {tool})")
        if ungranted is None and not _covers(granted, capability):
            ungranted = (f"the skill {skill!r} does not grant {capability} in its manifest, which sub-agent {agent!r} "
                         f"would need (its tool {tool})")
    return ("require_approval", ungranted) if ungranted else None


def _child_tools(ctx: Any, name: str, spec: Any) -> tuple[list[str], dict[str, Any], dict[str, str]]:
    """The tools the child would have: its effective (attenuated) tool list, with their definitions,
    and the child's ``shield.capability_map`` (merged: the parent's entries win, :func:`.merge.hold_shield`)
    — the override the shield reads first, so a tool the user mapped (``{deploy: shell.exec}``) is
    the same capability here as at the shield."""
    from .children import child_for, lineage

    child = child_for(ctx.runtime, name, spec)
    names = list(lineage(child).tools)
    found = {n: child.tools.get(n) for n in names}
    return names, {n: t.definition for n, t in found.items() if t is not None}, _capability_map(child)


def _capability_map(child: Any) -> dict[str, str]:
    section = child.config.plugin("shield")
    cmap = section.get("capability_map") if isinstance(section, dict) else getattr(section, "capability_map", None)
    return {str(k): str(v) for k, v in (cmap or {}).items() if v}


def _manifests(ctx: Any, call: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    """(skill, permission items) that govern this spawn: the skills bound to the agent's own calls
    (``capability_requests``: ``always`` and loaded skills) and, for a routed call, the skills the
    router chose for its task."""
    out: dict[str, list[dict[str, Any]]] = {}
    for item in ctx.state.get("capability_requests") or []:
        if isinstance(item, dict):
            out.setdefault(str(item.get("skill") or "?"), []).append(item)
    routed = (ctx.state.get(ROUTED_KEY) or {}).get(call.id)
    names = [n for n in (routed or {}).get("skills") or [] if n not in out]
    if names and ctx.hooks.has("list_skills"):
        listed = {getattr(sk, "name", None): sk for found in ctx.hooks.call_sync("list_skills", ctx=ctx) for sk in (found or [])}
        for name in names:
            items = [dict(i) for i in (getattr(listed.get(name), "capability_requests", None) or [])]
            if items:
                out[name] = items
    return list(out.items())


def skill_decision(ctx: Any, call: Any, agent: str) -> tuple[str, str] | None:
    """Before sub-agent ``agent`` is spawned for ``call``: the first skill manifest that forbids
    (``block``) or does not grant (``require_approval``) what the child's tools would do."""
    manifests = _manifests(ctx, call)
    if not manifests:
        return None
    spec = ctx.agent.subagents.get(agent)
    try:
        tools, definitions, overrides = _child_tools(ctx, agent, spec)
    except Exception as exc:  # a child that cannot be built cannot be checked: refused, with why
        return "block", f"sub-agent {agent!r} cannot start, so the skill manifests cannot be checked: {exc}"
    asked = None
    for skill, items in manifests:
        ruling = manifest_refusal(skill, items, agent, tools, definitions, overrides)
        if ruling is not None and ruling[0] == "block":
            return ruling
        asked = asked or ruling
    return asked
