"""clawkit-skills: skills compiled from ``.claws`` and ``SKILL.md`` files, hot-reloaded.

How it plugs in:

* ``message_received`` — finds (or creates) the agent's :class:`SkillRegistry`,
  rescans it (stat-based, cheap), starts the watchfiles thread, emits queued
  reload/error events, and syncs skill tools into the agent's tool registry.
* ``register_prompt_contributor`` — ``skills.index`` (a compact list of available
  skills: name + one line) and ``skills.active`` (the full compiled section of each
  skill active this turn: selected by ``ctx.state["route"]["skills"]``, loaded by
  the model with ``load_skill``, or listed in ``always``).
* ``before_llm_call`` — adds the active skills' IDL tool schemas to the request
  (and removes inactive skills' ones), sets ``ctx.state["capability_requests"]``.
* ``register_tools`` — ``load_skill(name)``.
* ``register_commands`` — ``clawkit skills list | show NAME | check | stats``.

Executing a skill tool (``skill_<name>``) does not act: it validates the
arguments against the IDL schema, fills ``@dialect`` hints, and returns the
arguments with the skill's plan and guardrails as JSON for the model to follow.
"""

from __future__ import annotations

import json
import logging
import time
import weakref
from pathlib import Path
from typing import Any

from clawkit import hookimpl
from clawkit.prompt import PromptContributor, PromptSection
from clawkit.tools import Tool, ToolError
from pydantic import BaseModel, ConfigDict, Field

from .claws import ClawsError, parse_claws, read_telemetry, with_telemetry, write_telemetry
from .compiler import CompiledSkill, SkillCompileError, compile_claws, compile_file, compile_skill_md, missing_requirements
from .registry import SkillEntry, SkillRegistry, shipped_dirs

__all__ = [
    "SkillsConfig", "SkillRegistry", "SkillEntry", "CompiledSkill", "SkillCompileError", "ClawsError",
    "compile_claws", "compile_skill_md", "compile_file", "parse_claws", "with_telemetry", "write_telemetry",
    "read_telemetry", "missing_requirements", "registry_for", "active_skills", "available_skills", "lexicon_for",
]

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
    grant_tools: bool = Field(True, description="skill tools and load_skill are inert, so the plugin allows them itself; "
                                                  "false: the agent's tools allowlist decides (use skill_* and load_skill)")
    index_limit: int = Field(40, ge=0, description="most skills listed in the compact index")
    write_telemetry: bool = Field(False, description="record skill-tool executions in the .claws TELEMETRY block")
    config: dict[str, Any] = Field(default_factory=dict, description="values SKILL.md `requires.config` keys are checked against")


# --- registry per agent ------------------------------------------------------------------------

_registries: "weakref.WeakKeyDictionary[Any, SkillRegistry]" = weakref.WeakKeyDictionary()
_by_id: dict[int, SkillRegistry] = {}


def settings(agent_config: Any) -> SkillsConfig:
    cfg = agent_config.plugin("skills") if agent_config is not None else None
    if isinstance(cfg, SkillsConfig):
        return cfg
    if isinstance(cfg, BaseModel):
        return SkillsConfig.model_validate({k: v for k, v in cfg.model_dump().items() if k != "enabled"})
    if isinstance(cfg, dict):
        return SkillsConfig.model_validate({k: v for k, v in cfg.items() if k != "enabled"})
    return SkillsConfig()


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


def active_skills(ctx: Any, reg: SkillRegistry | None = None) -> list[CompiledSkill]:
    """Skills active in this turn: ``always`` + routed + loaded, available ones only, in that order."""
    reg = reg or ctx.state.get("skills.registry") or registry_for(ctx)
    cfg = settings(ctx.agent)
    route = ctx.state.get("route") or {}
    names: list[str] = list(cfg.always) + list(route.get("skills") or []) + list(ctx.session.get(LOADED_KEY, []) or [])
    names += ctx.state.get("skills.loaded_now", [])
    out: list[CompiledSkill] = []
    for n in names:
        sk = reg.get(n)
        if sk is not None and sk not in out and not reg.unavailable_reason(n):
            out.append(sk)
    return out


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
_synced: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()


def _flush_counters(ctx: Any, reg: SkillRegistry) -> None:
    done = _flushed.setdefault(reg, {})
    for key, value in list(reg.counters.items()):
        if value != done.get(key, 0):
            bump(ctx.session.store.conn, key, value - done.get(key, 0))
            done[key] = value


def bump(conn: Any, metric: str, by: float = 1.0) -> None:
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS skills_metrics (metric TEXT PRIMARY KEY, value REAL NOT NULL, updated REAL NOT NULL)")
        conn.execute(
            "INSERT INTO skills_metrics (metric, value, updated) VALUES (?, ?, ?) "
            "ON CONFLICT(metric) DO UPDATE SET value = value + excluded.value, updated = excluded.updated",
            (metric, by, time.time()),
        )
    except Exception as exc:  # metrics never break a turn
        log.debug("skills metrics: %r", exc)


# --- hooks -------------------------------------------------------------------------------------------


@hookimpl
def register_config(register):
    register("skills", SkillsConfig)


@hookimpl
def register_tools(register, agent):
    if settings(agent).load_skill_tool:
        register(load_skill, name="load_skill")


@hookimpl
def message_received(ctx, message):
    reg = registry_for(ctx)
    cfg = settings(ctx.agent)
    reg.sync()
    if cfg.watch:
        reg.start_watching()
    ctx.state["skills.registry"] = reg
    for type_, data in reg.drain_events():
        ctx.emit(type_, **data)
    _flush_counters(ctx, reg)
    _sync_tools(ctx, reg, cfg)


@hookimpl
def register_prompt_contributor(register, agent):
    register(SkillIndexContributor())
    register(ActiveSkillsContributor())


@hookimpl
def before_llm_call(ctx, request):
    reg = ctx.state.get("skills.registry") or registry_for(ctx)
    cfg = settings(ctx.agent)
    active = active_skills(ctx, reg)
    skill_tools = {n for n, t in ctx.tools.tools.items() if getattr(t, "skill_name", None)}
    request.tools = [t for t in request.tools if t.name not in skill_tools]
    present = {t.name for t in request.tools}
    if cfg.load_skill_tool and "load_skill" not in present and "load_skill" in ctx.tools.tools and ctx.tools.allowed("load_skill"):
        request.tools.append(ctx.tools.tools["load_skill"].definition)
        present.add("load_skill")
    for sk in active:
        for td in sk.tool_definitions:
            if td.name not in present and ctx.tools.allowed(td.name):
                request.tools.append(td)
                present.add(td.name)
    ctx.state["skills.active"] = [s.name for s in active]
    ctx.state["capability_requests"] = [dict(item) for s in active for item in s.capability_requests]
    if active and not ctx.state.get("_skills_selected_emitted"):
        ctx.state["_skills_selected_emitted"] = True
        ctx.emit("skills.active", skills=[s.name for s in active], tools=[t.name for s in active for t in s.tool_definitions])
        for s in active:
            bump(ctx.session.store.conn, f"active:{s.name}")


@hookimpl
def register_commands(cli):
    from .cli import add_commands

    add_commands(cli)


# --- skill tools ---------------------------------------------------------------------------------------


class SkillTool(Tool):
    """A skill's IDL interface as a tool: validates and returns the plan, never acts."""

    skill_name: str = ""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:  # JSON Schema validation happens in run
        return {"arguments": dict(arguments)}


def _make_skill_tool(skill: CompiledSkill, td: Any, write_back: bool) -> SkillTool:
    def run_skill_tool(arguments: dict[str, Any], ctx: Any = None) -> str:
        import jsonschema

        args = dict(arguments)
        filled = {}
        for fld, key in skill.dialect_hints.get(td.name, {}).items():
            if fld not in args or args[fld] in (None, ""):
                value = _dialect_value(ctx, key)
                if value is not None:
                    args[fld] = filled[fld] = value
        errors = sorted(jsonschema.Draft202012Validator(td.parameters).iter_errors(args), key=lambda e: list(e.path))
        if errors:
            detail = "; ".join(f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:5])
            raise ToolError(f"invalid arguments for {td.name}: {detail}")
        if ctx is not None:
            bump(ctx.session.store.conn, f"tool:{skill.name}")
        if write_back and skill.format == "claws":
            _record_execution(skill)
        return json.dumps({
            "skill": skill.name, "tool": td.name, "arguments": args, "auto_filled": filled,
            "plan": skill.execution_plan, "guardrails": skill.guardrails, "uses_tools": skill.allowed_tools,
            "note": "This skill tool does not act by itself: follow the plan with your other tools, within the guardrails.",
        }, ensure_ascii=False)

    from pydantic import create_model

    tool = SkillTool(td, run_skill_tool, create_model(f"{td.name}_args"), True, False)
    tool.skill_name = skill.name
    return tool


def _dialect_value(ctx: Any, key: str) -> Any:
    if ctx is None:
        return None
    if key in ("context.query", "context.message", "context.text", "user.message"):
        return next((m.content for m in reversed(ctx.session.history) if m.role == "user"), None)
    if key in ("context.workspace", "workspace"):
        return str(ctx.workspace)
    if key in ("context.session_id", "session.id"):
        return ctx.session.id
    cur: Any = ctx.state
    for part in key.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur if isinstance(cur, (str, int, float, bool)) else None


def _record_execution(skill: CompiledSkill) -> None:
    try:
        t = read_telemetry(skill.path)
        t["execution_count"] = int(t.get("execution_count") or 0) + 1
        t.setdefault("success_rate", 1.0)
        write_telemetry(skill.path, t)
    except Exception as exc:
        log.warning("could not write telemetry to %s: %r", skill.path, exc)


def _sync_tools(ctx: Any, reg: SkillRegistry, cfg: SkillsConfig) -> None:
    """Mirror the registry's skill tools into the agent's tool registry (all skills, so a
    call from an earlier turn still runs; before_llm_call shows only the active ones)."""
    tools = ctx.tools
    marker = (reg.version, cfg.grant_tools)
    if _synced.get(tools) == marker:
        return
    wanted: dict[str, SkillTool] = {}
    for sk in reg.available():
        for td in sk.tool_definitions:
            if td.name not in wanted:
                wanted[td.name] = _make_skill_tool(sk, td, cfg.write_telemetry)
    for name in [n for n, t in tools.tools.items() if isinstance(t, SkillTool) and n not in wanted]:
        del tools.tools[name]
    for name, tool in wanted.items():
        old = tools.tools.get(name)
        if old is not None and not isinstance(old, SkillTool):
            log.warning("skill tool %s clashes with a tool of the same name; skipped", name)
            continue
        tools.tools[name] = tool
    if cfg.grant_tools:
        for name in list(wanted) + (["load_skill"] if cfg.load_skill_tool else []):
            if name not in tools.allow:
                tools.allow.append(name)
    _synced[tools] = marker


def load_skill(name: str, ctx: Any) -> str:
    """Load a skill listed under "Skills": its full instructions enter your system prompt and its tools become available.

    Args:
        name: the skill's name, exactly as listed.
    """
    reg = ctx.state.get("skills.registry") or registry_for(ctx)
    sk = reg.get(name)
    if sk is None:
        known = ", ".join(s.name for s in reg.available()) or "none"
        raise ToolError(f"unknown skill {name!r}; available skills: {known}")
    reasons = reg.unavailable_reason(name)
    if reasons:
        raise ToolError(f"skill {name!r} is unavailable here: {'; '.join(reasons)}")
    loaded = list(ctx.session.get(LOADED_KEY, []) or [])
    if name not in loaded:
        ctx.session.set(LOADED_KEY, loaded + [name])
    ctx.emit("skills.loaded", skill=name, tools=[t.name for t in sk.tool_definitions])
    bump(ctx.session.store.conn, f"loaded:{name}")
    tools = ", ".join(t.name for t in sk.tool_definitions)
    return (f"Skill {name} loaded for this session: its instructions are now in your system prompt"
            + (f" and its tools are available: {tools}." if tools else ".") + "\n\n" + sk.system_prompt_section)


# --- prompt contributors -----------------------------------------------------------------------------


class SkillIndexContributor(PromptContributor):
    """A compact list of the available skills (name + one line) — never their full text."""

    id = "skills.index"
    priority = 80

    def contribute(self, ctx: Any) -> PromptSection | None:
        reg = ctx.state.get("skills.registry")
        if reg is None:
            return None
        cfg = settings(ctx.agent)
        active = {s.name for s in active_skills(_CtxView(ctx), reg)}
        skills = [s for s in reg.available() if s.name not in active][: cfg.index_limit]
        if not skills:
            return None
        lines = [f"- {s.name}: {s.description}" for s in skills]
        head = "Available skills" + (" (call `load_skill` with a name to load its instructions and tools):" if cfg.load_skill_tool else ":")
        return PromptSection("Skills", head + "\n" + "\n".join(lines))


class ActiveSkillsContributor(PromptContributor):
    """The full compiled sections of the skills active this turn."""

    id = "skills.active"
    priority = 85

    def contribute(self, ctx: Any) -> PromptSection | None:
        reg = ctx.state.get("skills.registry")
        if reg is None or ctx.session is None:
            return None
        active = active_skills(_CtxView(ctx), reg)
        if not active:
            return None
        return PromptSection("Active skills", "\n\n".join(s.system_prompt_section for s in active))


class _CtxView:
    """The parts of a TurnContext that :func:`active_skills` reads, from a ContributorContext."""

    def __init__(self, cctx: Any):
        self.state, self.session, self.agent = cctx.state, cctx.session, cctx.agent
