"""Per-agent skills state: the plugin's config model, the registry of each running agent,
the active skills of a turn, and the plugin's metrics table."""

from __future__ import annotations

import fnmatch
import logging
import time
import weakref
from pathlib import Path
from typing import Any, Literal

from clawkit.config import section_of
from clawkit.storage import declare, metrics_table, metrics_upsert
from pydantic import BaseModel, ConfigDict, Field

from .compiler import CompiledSkill
from .registry import SkillRegistry, shipped_dirs

log = logging.getLogger("clawkit.skills")
LOADED_KEY = "skills.loaded"  # session metadata: skills the model loaded with load_skill


class SkillsConfig(BaseModel):
    """``plugins: {skills: {...}}`` in the agent YAML."""

    model_config = ConfigDict(extra="forbid")

    workspace_dir: str = Field("skills", description="skills folder inside the agent's workspace (highest precedence)")
    paths: list[str] = Field(default_factory=list, description="extra skill folders, after the workspace's")
    user_dir: str = Field("~/.clawkit/skills", description="the user's skills folder")
    shipped: bool = Field(True, description="include skills shipped by plugins (and clawkit's examples)")
    watch: bool = Field(True, description="hot reload with a watchfiles thread (changes also apply at every turn start)")
    always: list[str] = Field(default_factory=list, description="skills active on every turn")
    disabled: list[str] = Field(default_factory=list, description="skills never offered")
    load_skill_tool: bool = Field(True, description="offer the load_skill tool so the model can load a listed skill")
    index_limit: int = Field(40, ge=0, description="most skills listed in the compact index")
    write_telemetry: bool = Field(False, description="record skill-tool executions in the .claws TELEMETRY block")
    config: dict[str, Any] = Field(default_factory=dict, description="values SKILL.md `requires.config` keys are checked against")
    routed_manifests: Literal["guide", "ask"] = Field(
        "guide", description="a skill the router only matched: its manifest guides (guide), or a call it would not "
        "allow is asked of the user first (ask) — never a silent veto of a tool the agent lists")


# --- registry per agent ------------------------------------------------------------------------

_registries: "weakref.WeakKeyDictionary[Any, SkillRegistry]" = weakref.WeakKeyDictionary()
_by_id: dict[int, SkillRegistry] = {}


def settings(agent_config: Any) -> SkillsConfig:
    """The agent's section (validated; remembered per agent config: :func:`clawkit.config.section_of`)."""
    return section_of(agent_config, "skills", SkillsConfig)


def sources_for(workspace: str | Path, cfg: SkillsConfig) -> list[tuple[str, Path]]:
    ws = Path(workspace)
    sources = [("workspace", ws / cfg.workspace_dir)]
    sources += [("path", (ws / p) if not Path(p).expanduser().is_absolute() else Path(p).expanduser()) for p in cfg.paths]
    sources.append(("user", Path(cfg.user_dir).expanduser()))
    if cfg.shipped:
        sources += shipped_dirs()
    return sources


def build_registry(agent_config: Any) -> SkillRegistry:
    """A registry for ``agent_config`` (scanned, not watching)."""
    cfg = settings(agent_config)
    context = {**agent_config.model_dump(mode="json", exclude={"plugins"}), **cfg.config} if agent_config is not None else dict(cfg.config)
    reg = SkillRegistry(sources_for(agent_config.workspace, cfg), disabled=cfg.disabled, config=context)
    reg.sync()
    return reg


def registry_for(ctx: Any) -> SkillRegistry:
    """The registry of the running agent (``ctx.runtime``), created on first use."""
    owner = ctx.runtime if getattr(ctx, "runtime", None) is not None else ctx.agent
    try:
        reg = _registries.get(owner)
    except TypeError:
        reg = _by_id.get(id(owner))
    if reg is None:
        reg = build_registry(ctx.agent)
        try:
            _registries[owner] = reg
            weakref.finalize(owner, reg.stop_watching)
        except TypeError:
            _by_id[id(owner)] = reg
    return reg


def release(*owners: Any) -> None:
    """The agent (runtime and/or config) closes: its registry stops watching."""
    for owner in owners:
        try:
            reg = _registries.pop(owner, None)
        except TypeError:
            reg = None
        reg = reg or _by_id.pop(id(owner), None)
        if reg is not None:
            reg.stop_watching()


SKILLS_GROUP = ("load_skill", "read_skill_file", "skill_*")  # what `tools: [skills]` admits


#: Agent Skills / Claude tool names in ``allowed-tools`` and the clawkit tools they mean
AGENT_SKILLS_TOOLS = {"read": "read_file", "write": "write_file", "edit": "edit_file", "multiedit": "edit_file",
                      "bash": "shell_exec", "glob": "glob", "grep": "grep", "ls": "list_dir",
                      "webfetch": "web_fetch", "websearch": "web_search"}


def needed_tools(skill: CompiledSkill) -> list[str]:
    """Agent tools a skill needs: ``requires.tools`` (a SKILL.md or a .claws manifest) and a SKILL.md's
    ``allowed-tools`` (``Bash(git:*)`` → ``shell_exec``, ``Read`` → ``read_file``, or clawkit names)."""
    # a .claws manifest's `tools` says what the skill uses, often optional: only `requires.tools` gates
    out = list(skill.requires.get("tools", []))
    if skill.format == "skill.md":
        for entry in skill.allowed_tools:
            name = entry.split("(", 1)[0].strip()
            tool = AGENT_SKILLS_TOOLS.get(name.lower().replace("_", ""), name if name.islower() else None)
            if tool and tool not in out:
                out.append(tool)
    return out


def missing_tools(tools: Any, skill: CompiledSkill) -> list[str]:
    """The tools ``skill`` needs that the agent's ``tools:`` allowlist does not allow."""
    return [t for t in needed_tools(skill) if tools is None or not tools.allowed(t)]


def admitted(tools: Any, skill: CompiledSkill) -> bool:
    """Whether the agent's allowlist admits ``skill``: ``load_skill`` is allowed (the
    ``skills`` entry allows it) or one of the skill's own tools is — and every tool the
    skill needs is allowed (a skill the agent could not carry out is never offered)."""
    if tools is None:
        return False
    if not (tools.allowed("load_skill") or any(tools.allowed(td.name) for td in skill.tool_definitions)):
        return False
    return not missing_tools(tools, skill)


def _may_admit_a_skill(pattern: str) -> bool:
    """Whether allowlist entry ``pattern`` (a name or an ``fnmatch`` glob) could allow ``load_skill`` or a
    skill's tool — every one is named ``skill_…`` (:func:`~.compiler.tool_name`)."""
    if fnmatch.fnmatchcase("load_skill", pattern):
        return True
    cut = min((i for i in (pattern.find(c) for c in "*?[") if i >= 0), default=-1)
    if cut < 0:  # a plain name
        return pattern.startswith("skill_")
    head = pattern[:cut]  # what every name the glob matches starts with
    return head.startswith("skill_") or "skill_".startswith(head)


_no_skill: dict[int, tuple[tuple[str, ...], bool]] = {}  # id(allowlist patterns) -> (them, no entry may admit a skill)


def admits_no_skill(tools: Any) -> bool:
    """True when the agent's ``tools:`` allowlist can admit no skill at all: no entry (name, glob or group)
    and no declared tool allows ``load_skill`` or any ``skill_*`` tool. Then no skill can be listed,
    routed to, loaded or active (:func:`admitted`), whatever the skill folders hold, and the plugin has
    nothing to do for the agent's turns. False when unsure (a tool registry without an allowlist).
    Worked out once per allowlist (the registry's expanded patterns: a new tuple when it or a group changes)."""
    patterns, declared = getattr(tools, "patterns", None), getattr(tools, "declared", None)
    if not callable(patterns) or not isinstance(declared, set):
        return False
    allow = patterns()
    hit = _no_skill.get(id(allow))
    if hit is None or hit[0] is not allow:
        if len(_no_skill) >= 64:
            _no_skill.clear()
        hit = _no_skill[id(allow)] = (allow, not any(_may_admit_a_skill(p) for p in allow))
    return hit[1] and not (declared and any(n == "load_skill" or n.startswith("skill_") for n in declared))


def active_skills(ctx: Any, reg: SkillRegistry | None = None) -> list[CompiledSkill]:
    """Skills active in this turn: ``always`` + routed + loaded, available and admitted by
    the agent's ``tools:`` allowlist, in that order."""
    return active_of(ctx, ctx.agent, ctx.state, ctx.session, getattr(ctx, "tools", None), reg)


def active_of(ctx: Any, agent: Any, state: dict[str, Any], session: Any, tools: Any,
              reg: SkillRegistry | None = None) -> list[CompiledSkill]:
    """:func:`active_skills` from a turn's parts (``ctx`` finds the registry when ``reg`` is None)."""
    cfg = settings(agent)
    route = state.get("route")
    routed = route.get("skills") if route else None
    loaded = session.get(LOADED_KEY)
    loaded_now = state.get("skills.loaded_now")
    dispatched = _dispatched(session)
    if not (cfg.always or routed or loaded or loaded_now or dispatched):
        return []  # nothing named: the usual turn asks nothing of the registry
    reg = reg or state.get("skills.registry") or registry_for(ctx)
    names: list[str] = [*cfg.always, *dispatched, *(routed or ()), *(loaded or ()), *(loaded_now or ())]
    out: list[CompiledSkill] = []
    for n in names:
        sk = reg.get(n)
        if sk is not None and sk not in out and not reg.unavailable_reason(n) and admitted(tools, sk):
            out.append(sk)
    return out


def dispatched_skills(ctx: Any) -> list[str]:
    """In a sub-agent's session: the skills its parent's router dispatched it for (session metadata
    ``subagent.skills``, written by the sub-agents plugin). The child works with them *bound*:
    their sections in its prompt, their tools offered, their manifests binding its calls."""
    return _dispatched(getattr(ctx, "session", None))


def _dispatched(session: Any) -> list[str]:
    meta = session.get("subagent") if session is not None else None
    return [str(n) for n in (meta.get("skills") or [])] if isinstance(meta, dict) else []


def binding_skills(ctx: Any, active: list[CompiledSkill]) -> list[CompiledSkill]:
    """The active skills whose manifest permissions bind this agent's own calls: those chosen
    deliberately — ``always`` in the YAML, or loaded with ``load_skill``. A skill the router
    only matched to the message (keywords) guides the prompt but does not narrow the agent's
    tools: a keyword guess ("fix the login *bug*" matching a read-only review skill) must not
    veto the work asked for. A child dispatched for a routed skill is held to its manifest by
    the sub-agents plugin before it is spawned."""
    if not active:
        return []
    cfg = settings(ctx.agent)
    chosen = set(cfg.always) | set(ctx.session.get(LOADED_KEY, []) or []) | set(ctx.state.get("skills.loaded_now", []))
    chosen |= set(dispatched_skills(ctx))
    return [s for s in active if s.name in chosen]


def binding_requests(ctx: Any, reg: SkillRegistry | None = None, active: list[CompiledSkill] | None = None,
                     binding: list[CompiledSkill] | None = None) -> list[dict[str, Any]]:
    """``ctx.state["capability_requests"]``: the permission items of the binding skills, each with its ``skill``."""
    active = active_skills(ctx, reg) if active is None else active
    if binding is None:
        binding = binding_skills(ctx, active)
    return [dict(item) for s in binding for item in s.capability_requests]


ADVISORY_KEY = "advisory_capability_requests"


def advisory_requests(ctx: Any, active: list[CompiledSkill], binding: list[CompiledSkill] | None = None) -> list[dict[str, Any]]:
    """``ctx.state["advisory_capability_requests"]`` with ``routed_manifests: ask``: the permission
    items of the active skills that do *not* bind (routed ones), each with its ``skill``. The
    shield asks the user before a call one of them would refuse; it never blocks on them."""
    if not active or settings(ctx.agent).routed_manifests != "ask":
        return []
    names = {s.name for s in (binding_skills(ctx, active) if binding is None else binding)}
    return [dict(item) for s in active if s.name not in names for item in s.capability_requests]


def available_skills(ctx: Any) -> list[CompiledSkill]:
    """The skills a router may select this turn (requirements met), sorted by name.

    For the translation device: each has ``name``, ``description``, ``trigger``,
    ``keywords`` and ``weight``; put chosen names in ``ctx.state["route"]["skills"]``.
    """
    return registry_for(ctx).available()


def lexicon_for(ctx: Any, name: str) -> dict[str, Any] | None:
    """A skill's Lexicon (for the ClawDense codec); None when absent. Never put it in a prompt."""
    sk = registry_for(ctx).get(name)
    return sk.lexicon if sk else None


# --- metrics (own table; `clawkit skills stats` reads every *_metrics table) -----------------------


_flushed: "weakref.WeakKeyDictionary[SkillRegistry, dict[str, float]]" = weakref.WeakKeyDictionary()


def flush_counters(ctx: Any, reg: SkillRegistry) -> None:
    """The registry's counters' growth since the last flush, bumped (nothing when unchanged: the usual turn)."""
    counters = reg.counters
    done = _flushed.get(reg)
    if done is not None and done == counters:
        return
    if done is None:
        done = _flushed.setdefault(reg, {})
    for key, value in list(counters.items()):
        if value != done.get(key, 0):
            bump(ctx.session.store, key, value - done.get(key, 0))
        done[key] = value


_METRICS = metrics_table("skills_metrics")
_UPSERT = metrics_upsert("skills_metrics")


_declared: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()  # store -> conn its table was made on


def bump(store: Any, metric: str, by: float = 1.0) -> None:
    """Add ``by`` to ``metric``. Given a session store that offers ``queue``, the row is committed
    with the store's next write (the turn's), not by a write of its own on the reply path;
    given a bare connection, written on it at once."""
    try:
        queue = getattr(store, "queue", None)
        if callable(queue) and hasattr(store, "flush"):
            conn = store.conn
            if _declared.get(store) is not conn:
                declare(conn, _METRICS)
                _declared[store] = conn
            queue(_UPSERT, (metric, by, time.time()))
            return
        conn = getattr(store, "conn", store)
        declare(conn, _METRICS)
        conn.execute(_UPSERT, (metric, by, time.time()))
    except Exception as exc:  # metrics never break a turn
        log.debug("skills metrics: %r", exc)




def reload_failure_line(data: dict[str, Any]) -> str:
    """One line for the user about a skill file that did not compile (a ``skills.error`` event)."""
    where = f"{data.get('file')}:{data.get('line')}" if data.get("line") else str(data.get("file"))
    block = f" ({data.get('block')})" if data.get("block") else ""
    kept = data.get("kept")
    after = f"the last good version of {kept} stays active" if kept else "it is not available"
    return f"skill file {where}{block} did not load: {data.get('message')}; {after}"
