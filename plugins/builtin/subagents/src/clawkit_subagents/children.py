"""Building a child agent: its own config, held to the parent's, sharing the parent's store.

Attenuation, never escalation (docs/plugins/subagents.md, "Children inside their parent"):

* workspace — the parent's effective workspace or a folder inside it (:func:`child_workspace`),
  never the folder of the child's own file; one outside is a clear error;
* tools — the intersection of the child's own ``tools:``, the declaration's narrowing
  and the parent's effective tools (the parent's own ``agent_*`` tools never pass down);
* grants — the child's own policy grants survive only when a parent grant covers them;
  a child that declares none works under the parent's;
* risk, sandbox, shield, budgets, skills, MCP servers — the stricter of parent and child
  (:mod:`.merge`); plugins that gate calls stay on;
* memory — the child's own partition below the parent's, recalled by the parent as untrusted;
* depth — a child at the tree's limit is offered no agent tools of its own;
* approvals — the child has its own session on its own channel (``subagent``: the parent's
  approvals and ``/elevated`` do not carry over, and nothing elevates it) and asks through
  the parent's approver, naming itself.
"""

from __future__ import annotations

import fnmatch
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawkit.config import collect_sections, parse_yaml, validate_agent
from clawkit.errors import ConfigError

from .config import SubagentsConfig, SubagentSpec

AGENT_TOOL_PREFIX = "agent_"
CHILD_CHANNEL = "subagent"  # children's own channel: non-interactive, never elevated


@dataclass
class Lineage:
    """Where an agent sits in a tree of agents (kept on the :class:`clawkit.loop.Agent`)."""

    depth: int = 0
    max_depth: int = 2  # absolute: no agent at this depth is offered agent tools
    max_parallel: int = 4
    name: str = ""
    parent: Any = None  # weak: a child must not keep its parent alive
    tools: list[str] = field(default_factory=list)
    grants: list[dict[str, Any]] = field(default_factory=list)


def lineage(agent: Any) -> Lineage:
    found = getattr(agent, "_clawkit_lineage", None)
    if found is None:
        limits = agent.config.limits
        found = Lineage(0, limits.max_depth, limits.max_parallel_subagents, agent.config.name,
                        tools=effective_tools(agent), grants=_grants_of(agent.config))
        agent._clawkit_lineage = found
    return found


def effective_tools(agent: Any) -> list[str]:
    """The tools ``agent`` may use itself, without its own sub-agent tools."""
    own = {n for n in agent.tools.declared if n.startswith(AGENT_TOOL_PREFIX)}
    return [t.name for t in agent.tools.visible() if t.name not in own]


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def expand_groups(entries: list[str], groups: dict[str, tuple[str, ...]]) -> list[str]:
    """``tools:`` entries with allowlist group names (``skills`` — declared by a plugin through
    ``register.group``) replaced by the group's patterns, so a child listing a group keeps what
    the group admits in its parent."""
    out: list[str] = []
    for entry in entries:
        out.extend(groups.get(entry, (entry,)))
    return out


def attenuate(parent_tools: list[str], own: list[str], narrowing: list[str] | None,
              groups: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    own = expand_groups(own, groups or {})
    narrowing = None if narrowing is None else expand_groups(narrowing, groups or {})
    return [n for n in parent_tools if _matches(n, own) and (narrowing is None or _matches(n, narrowing))]


def _section(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_defaults=True)
    return dict(value) if isinstance(value, dict) else {}


def _grants_of(config: Any) -> list[dict[str, Any]]:
    return list(_section(config.plugin("policy")).get("grants") or [])


def _covered(values: list[str], by: list[str]) -> bool:
    return all(v in by or _matches(v, by) for v in values)


def covered(grant: dict[str, Any], parent_grants: list[dict[str, Any]]) -> bool:
    """True when one parent grant allows everything ``grant`` asks for."""
    tools = grant.get("tools") or ["*"]
    for p in parent_grants:
        if grant.get("access", "rw") == "rw" and p.get("access", "rw") == "ro" and grant.get("paths"):
            continue  # a read-only parent grant never covers a writable one
        if (_covered(tools, p.get("tools") or ["*"]) and _covered(grant.get("paths") or [], p.get("paths") or [])
                and _covered(grant.get("hosts") or [], p.get("hosts") or [])
                and _covered(grant.get("commands") or [], p.get("commands") or [])):
            return True
    return False


def _load_data(parent: Any, name: str, spec: SubagentSpec) -> tuple[dict[str, Any], str, dict, Path]:
    source = parent.config.source_file
    base = source.parent if source is not None else Path(parent.config.workspace)
    if isinstance(spec.agent, dict):
        where = f"{source or '<agent>'}: subagents.{name}.agent"
        return dict(spec.agent), where, {}, base
    path = (base / spec.agent).resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source or '<agent>'}: subagents.{name}.agent: cannot read {path}: {exc.strerror or exc}") from None
    data, lines = parse_yaml(text, str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: an agent file must be a mapping of keys (name, model, …)")
    return data, str(path), lines, path.parent


_sections: "weakref.WeakKeyDictionary[Any, list]" = weakref.WeakKeyDictionary()


def _sections_for(parent: Any) -> list:
    found = _sections.get(parent.pm)
    if found is None:
        found = _sections[parent.pm] = collect_sections(parent.hooks)
    return found


def child_workspace(parent: Any, data: dict[str, Any], where: str) -> str:
    """The child's workspace: the parent's effective one (after ``--workspace``,
    ``CLAWKIT_WORKSPACE``, the parent's YAML), or a folder inside it that the child's own
    ``workspace:`` names (relative to the parent's workspace). Never wider, never elsewhere:
    the same answer from the CLI, ``serve``, the workers and the test kit."""
    root = Path(parent.config.workspace).resolve()
    named = data.get("workspace")
    if named is None or str(named).strip() in ("", "."):
        return str(root)
    path = Path(str(named)).expanduser()
    path = (path if path.is_absolute() else root / path).resolve()
    if path != root and root not in path.parents:
        raise ConfigError(f"{where}: workspace {path} is outside the parent's workspace {root}: "
                          "a sub-agent works in its parent's workspace or a folder inside it")
    if not path.is_dir():
        raise ConfigError(f"{where}: workspace {path} does not exist (a folder inside the parent's workspace {root})")
    return str(path)


def tool_risks(parent: Any) -> dict[str, str]:
    """Each tool the parent may hand down, with its registered risk level."""
    return {t.name: str(getattr(t.definition.risk, "value", t.definition.risk)) for t in parent.tools.visible()}


def build_child(parent: Any, name: str, spec: SubagentSpec) -> Any:
    """A new :class:`clawkit.loop.Agent` for sub-agent ``name`` of ``parent``."""
    from clawkit.loop import Agent

    from .merge import hold, hold_mcp, kept_on

    up = lineage(parent)
    data, where, lines, base = _load_data(parent, name, spec)
    data["workspace"] = child_workspace(parent, data, where)
    hold_mcp(parent.config, data)
    own_tools = list(data.get("tools") or [])
    tools = attenuate(up.tools, own_tools, spec.tools, getattr(parent.tools, "groups", None))
    data["tools"] = tools
    parent_off = set(parent.config.disabled_plugins())
    keep_on = kept_on(parent.pm, parent_off)
    plugins = hold(parent.config, dict(data.get("plugins") or {}), tool_risks(parent), keep_on)
    policy = dict(plugins.get("policy") or {})
    own_grants = list(policy.get("grants") or [])
    policy["grants"] = [g for g in own_grants if isinstance(g, dict) and covered(g, up.grants)] if own_grants else list(up.grants)
    if policy["grants"] or "policy" in plugins:
        plugins["policy"] = policy
    memory = _section(parent.config.plugin("memory"))
    parent_memory_on = parent.config.plugin("memory") is not None and "memory" not in parent_off
    if parent_memory_on and (plugins.get("memory") or {}).get("enabled", True) is not False:
        plugins["memory"] = child_memory(parent, memory, dict(plugins.get("memory") or {}), name)
    data["plugins"] = plugins
    cfg = validate_agent(data, where, lines, _sections_for(parent), base_dir=base)
    cfg._source = Path(where) if isinstance(spec.agent, str) else parent.config.source_file  # its own sub-agents resolve from there
    depth = up.depth + 1
    max_depth = min(up.max_depth, depth + cfg.limits.max_depth)
    if depth >= max_depth and getattr(cfg, "subagents", None):
        cfg.subagents = SubagentsConfig()  # at the limit: offered no agent tools
    off = set(cfg.disabled_plugins())
    pm = parent.pm if off == parent_off else _plugins_without(parent.pm, off)
    # its own non-interactive channel: nothing a model writes can elevate a child
    child = Agent(cfg, pm=pm, store=parent.store, approver=_asking_through(parent, name), channel=CHILD_CHANNEL)
    child._clawkit_lineage = Lineage(depth, max_depth, min(up.max_parallel, cfg.limits.max_parallel_subagents), name,
                                     weakref.ref(parent), effective_tools(child), policy["grants"])
    return child


def check_child(config: Any, name: str, spec: SubagentSpec) -> None:
    """At the parent's start: sub-agent ``name``'s file (or inline mapping) read, its workspace
    placed and its keys validated against the parent's plugins, as :func:`build_child` will at
    spawn — so a broken child file stops the run with its file, line and field (ConfigError)
    instead of reaching only the parent's model, as a tool error, once it is called."""
    from types import SimpleNamespace

    parent = SimpleNamespace(config=config)
    data, where, lines, base = _load_data(parent, name, spec)  # (a fresh mapping: an inline one is copied)
    data["workspace"] = child_workspace(parent, data, where)
    validate_agent(data, where, lines, base_dir=base, model=type(config))


def child_memory(parent: Any, memory: dict[str, Any], mine: dict[str, Any], name: str) -> dict[str, Any]:
    """The child's memory: the parent's file, the child's own partition below the parent's
    (``lead>researcher``: the parent recalls it only as untrusted data), reading the parent's."""
    parent_db = memory.get("db") or str(Path(parent.config.workspace) / ".clawkit" / "memory.db")
    if not Path(parent_db).is_absolute():
        parent_db = str((Path(parent.config.workspace) / parent_db).resolve())
    parent_partition = memory.get("partition") or parent.config.name
    readable = {parent_partition, *(memory.get("read_partitions") or [])}
    mine["db"] = parent_db  # one memory file for the tree: the child reads the parent's episodes…
    mine["partition"] = f"{parent_partition}>{name}"  # …and writes only its own partition, whatever its file says
    mine["child_of"] = parent_partition
    mine["read_partitions"] = sorted(readable | {p for p in mine.get("read_partitions") or [] if p in readable})
    for key in ("embedding", "chunking"):  # one index, one embedding model: a child's cannot send text elsewhere
        if key in memory:
            mine[key] = memory[key]
        else:
            mine.pop(key, None)
    root = Path(parent.config.workspace).resolve()
    mine["paths"] = [p for p in mine.get("paths") or [] if _inside(str(p), root)]  # nothing indexed from outside
    return mine


def _inside(path: str, root: Path) -> bool:
    """A memory ``paths`` entry (file, folder or glob) that stays inside ``root``."""
    p = Path(path).expanduser()
    if ".." in p.parts:
        return False
    if not p.is_absolute():
        return True
    return p == root or root in p.parents


def _plugins_without(pm: Any, off: set[str]) -> Any:
    """The parent's plugins (entry points and objects an embedding app added) minus those the
    child's file disables: the child never gains a plugin the parent did not load."""
    from clawkit.plugins import get_plugin_manager

    new = get_plugin_manager(load_entry_points=False)
    for name, plugin in pm.list_name_plugin():
        if name not in off and new.get_plugin(name) is None and not new.is_registered(plugin):
            new.register(plugin, name=name)
    new._clawkit_dists = getattr(pm, "_clawkit_dists", {})
    return new


def _asking_through(parent: Any, name: str) -> Any:
    """The child's approver: the parent's, with the request naming the child (None when the
    parent has none: a non-interactive run denies)."""
    if parent.approver is None:
        return None

    def approver(call: Any, reason: str, ctx: Any) -> Any:
        ask = parent.approver
        return ask(call, f"sub-agent {name!r} asks: {reason}", ctx) if ask is not None else False

    return approver


_children: "weakref.WeakKeyDictionary[Any, dict[str, Any]]" = weakref.WeakKeyDictionary()


def child_for(parent: Any, name: str, spec: SubagentSpec) -> Any:
    """The parent's child agent ``name``, built once and reused (each spawn is a new session)."""
    kids = _children.setdefault(parent, {})
    child = kids.get(name)
    if child is None:
        child = kids[name] = build_child(parent, name, spec)
    return child


def close_children(parent: Any) -> None:
    """Close the children, deepest first, while the parent's store is still open: their plugins
    stop and join their threads (``agent_closing`` — a child's memory worker, say); the store
    they share stays open, it is the parent's (an agent closes only a store it opened)."""
    for child in (_children.pop(parent, None) or {}).values():
        close_children(child)
        child.close()


def open_parents() -> list[Any]:
    return list(_children.keys())


def confinement(child: Any) -> dict[str, Any]:
    """What the child runs under, after its file was held to its parent's (stored with each of
    its sessions, so an auditor sees the effective workspace, channel, jail, shield and risks).
    Worked out once per child agent: its config does not change."""
    known = getattr(child, "_clawkit_confinement", None)
    if known is not None:
        return known
    from .merge import _level, _risk_of

    def mode_of(section: str, key: str) -> Any:
        value = child.config.plugin(section)
        if value is None or getattr(value, "enabled", True) is False or section in child.config.disabled_plugins():
            return None
        return _level(getattr(value, key, None))

    policy = child.config.plugin("policy")
    risk = dict(getattr(policy, "risk", None) or {}) if policy is not None else {}
    child._clawkit_confinement = {
        "workspace": str(child.config.workspace), "channel": child.channel,
        "sandbox": mode_of("sandbox", "mode"), "shield": mode_of("shield", "mode"),
        "risk": {t.name: _risk_of({k: _level(v) for k, v in risk.items()}, t.name, _level(t.definition.risk))
                 for t in child.tools.visible()},
    }
    return child._clawkit_confinement
