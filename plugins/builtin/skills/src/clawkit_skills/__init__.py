"""clawkit-skills: skills compiled from ``.claws`` and ``SKILL.md`` files, hot-reloaded.

How it plugs in:

* ``message_received`` — finds (or creates) the agent's :class:`SkillRegistry`,
  refreshes it (stats what the last scan saw; rescans only on a change), starts the watchfiles thread, emits queued
  reload/error events, and syncs skill tools into the agent's tool registry — nothing at all for an
  agent whose ``tools:`` can admit no skill (:func:`~.state.admits_no_skill`).
* ``register_prompt_contributor`` — ``skills.index`` (a compact list of available
  skills: name + one line) and ``skills.active`` (the full compiled section of each
  skill active this turn: selected by ``ctx.state["route"]["skills"]``, loaded by
  the model with ``load_skill``, or listed in ``always``).
* ``before_llm_call`` — adds the active skills' IDL tool schemas to the request
  (and removes inactive skills' ones), sets ``ctx.state["capability_requests"]`` from
  the skills chosen deliberately (``always``, ``load_skill``) — a routed skill guides the
  prompt but does not narrow the agent's own tools.
* ``register_tools`` — ``load_skill(name)``.
* ``register_commands`` — ``clawkit skills list | show NAME | check | stats``.

Executing a skill tool (``skill_<name>``) does not act: it validates the
arguments against the IDL schema, fills ``@dialect`` hints, and returns the
arguments with the skill's plan and guardrails as JSON for the model to follow.
"""

from __future__ import annotations

import weakref
from typing import Any

from clawkit import hook_order, hookimpl
from clawkit.lazy import lazy_exports, lazy_module

__all__ = [
    "SkillsConfig", "SkillRegistry", "SkillEntry", "CompiledSkill", "SkillCompileError", "ClawsError",
    "compile_claws", "compile_skill_md", "compile_file", "parse_claws", "with_telemetry", "write_telemetry",
    "read_telemetry", "missing_requirements", "registry_for", "active_skills", "available_skills", "lexicon_for",
    "build_registry", "SkillTool", "LOADED_KEY",
]

# ``clawkit --help`` imports every plugin: yaml, pydantic and the compiler load on first
# use. name -> submodule
_EXPORTS = {
    **dict.fromkeys(("ClawsError", "parse_claws", "read_telemetry", "with_telemetry", "write_telemetry"), "claws"),
    **dict.fromkeys(("CompiledSkill", "SkillCompileError", "compile_claws", "compile_file", "compile_skill_md",
                     "missing_requirements"), "compiler"),
    **dict.fromkeys(("ActiveSkillsContributor", "SkillIndexContributor"), "contributors"),
    **dict.fromkeys(("SkillEntry", "SkillRegistry"), "registry"),
    **dict.fromkeys(("SkillTool", "load_skill", "sync_tools"), "skilltools"),
    **dict.fromkeys(("LOADED_KEY", "SkillsConfig", "active_skills", "binding_skills", "available_skills", "build_registry",
                     "bump", "flush_counters", "lexicon_for", "registry_for", "settings"), "state"),
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
# the implementation, imported by the first hook call (an import statement costs microseconds per call)
_state = lazy_module(__name__, "state")
_skilltools = lazy_module(__name__, "skilltools")
_CONTRIBUTORS: list = []
_ADVISORY = "advisory_capability_requests"  # state.ADVISORY_KEY (read here without importing state)
_IDLE = "skills.idle"  # turn state: this agent's tools: admit no skill (message_received found; state.admits_no_skill)


def _idle(ctx, state) -> bool:
    """This agent's ``tools:`` admit no skill (as message_received found, or asked now)."""
    return bool(ctx.state.get(_IDLE)) or state.admits_no_skill(ctx.tools)


def _contributors() -> list:
    """The two prompt contributors (stateless: one pair serves every agent and turn)."""
    if not _CONTRIBUTORS:
        from .contributors import ActiveSkillsContributor, SkillIndexContributor

        _CONTRIBUTORS[:] = [SkillIndexContributor(), ActiveSkillsContributor()]
    return _CONTRIBUTORS


# --- hooks -------------------------------------------------------------------------------------------


@hookimpl
def register_config(register):
    from .state import SkillsConfig

    register("skills", SkillsConfig)


@hookimpl
def register_tools(register, agent):
    from .skilltools import load_skill
    from .state import SKILLS_GROUP, settings

    # `tools: [skills]` admits load_skill and every skill tool; nothing is allowed behind the list's back
    if hasattr(register, "group"):
        register.group("skills", SKILLS_GROUP)
    if settings(agent).load_skill_tool:
        register(load_skill, name="load_skill")
    from .skilltools import skill_file_tool

    register(skill_file_tool())  # offered while an active skill has a folder (SKILL.md)


@hookimpl
@hook_order(30)
def message_received(ctx, message):
    state = _state()
    if state.admits_no_skill(ctx.tools):  # no skill can be admitted for this agent: no registry to keep current
        ctx.state[_IDLE] = True  # (what the turn's later hooks ask)
        return None
    reg = state.registry_for(ctx)
    cfg = state.settings(ctx.agent)
    reg.refresh()
    if cfg.watch:
        reg.start_watching()
    ctx.state["skills.registry"] = reg
    failed = []
    for type_, data in (reg.drain_events() if reg.events else ()):  # (a file changed: events queued)
        ctx.emit(type_, **data)
        if type_ == "skills.error":
            failed.append(state.reload_failure_line(data))
    state.flush_counters(ctx, reg)
    _skilltools().sync_tools(ctx, reg, cfg)
    if cfg.always or ctx.session.get(state.LOADED_KEY) or state.dispatched_skills(ctx):
        # calls planned before the first model call (a routed dispatch) are judged by the same manifests
        ctx.state["capability_requests"] = state.binding_requests(ctx, reg)
    if failed and hasattr(ctx, "notice"):  # the chat user hears of a broken edit, not only the log
        return ctx.notice("\n".join(failed), verbose_only=False, source="skills")


@hookimpl
def governing_paths(agent):
    """The agent's skill folders govern its later runs: a file tool writes there only after an
    approval naming the file (consent), a command never (docs/plugins/skills.md)."""
    import os

    from .state import settings, sources_for

    cfg = settings(agent)
    return [(os.path.realpath(str(path)), f"a skills folder ({kind})", True)
            for kind, path in sources_for(agent.workspace, cfg.model_copy(update={"shipped": False}))]


@hookimpl
def register_prompt_contributor(register, agent):
    for c in _contributors():
        register(c)


@hookimpl
@hook_order(10)
def before_llm_call(ctx, request):
    # the kernel offers the skill tools itself (SkillTool.offered: only while the skill is active)
    turn = ctx.state
    reg = turn.get("skills.registry")
    if reg is None and turn.get(_IDLE):  # (message_received found that no skill can be admitted for this agent)
        turn["skills.active"], turn["capability_requests"], turn[_ADVISORY] = [], [], []
        return
    state = _state()
    if reg is None and state.admits_no_skill(ctx.tools):
        active = []  # (no skill can be admitted for this agent)
    else:
        active = state.active_skills(ctx, reg or state.registry_for(ctx))
    if not active:  # the usual turn: nothing active, nothing requested
        turn["skills.active"], turn["capability_requests"], turn[_ADVISORY] = [], [], []
        return
    ctx.state["skills.active"] = [s.name for s in active]
    # only skills chosen deliberately (always, load_skill) narrow the agent's own calls; a routed one guides
    binding = state.binding_skills(ctx, active)
    ctx.state["capability_requests"] = state.binding_requests(ctx, reg, active, binding)
    ctx.state[state.ADVISORY_KEY] = state.advisory_requests(ctx, active, binding)
    if not ctx.state.get("_skills_selected_emitted"):
        ctx.state["_skills_selected_emitted"] = True
        ctx.emit("skills.active", skills=[s.name for s in active], tools=[t.name for s in active for t in s.tool_definitions])
        for s in active:
            state.bump(ctx.session.store, f"active:{s.name}")


@hookimpl
def agent_closing(agent, runtime):
    """Stop watching this agent's skill directories; the shared watcher thread is joined
    once no open agent watches anything."""
    from .state import release

    release(runtime, agent)


@hookimpl
@hook_order(10)
def before_tool_call(ctx, call):
    # fill @dialect arguments before any gate validates them (the shield's schema check)
    tool = ctx.tools.tools.get(call.name) if ctx.tools is not None else None
    if getattr(tool, "skill_name", None) and isinstance(call.arguments, dict):
        from .skilltools import fill_dialect

        filled = fill_dialect(ctx, tool, call.arguments)
        ctx.state.setdefault("skills.filled", {})[call.id] = dict(filled)
        if filled:
            ctx.emit("skills.filled", tool=call.name, call_id=call.id, fields=sorted(filled))
    return None


@hookimpl
def list_skills(ctx):
    state = _state()
    reg = ctx.state.get("skills.registry")
    if reg is None and _idle(ctx, state):
        return []  # none could be admitted (what the filter below would find, without a registry)
    if reg is None:
        reg = state.registry_for(ctx)
        reg.refresh()
    tools = ctx.tools
    available = reg.available_view()
    patterns, declared = getattr(tools, "patterns", None), getattr(tools, "declared", None)
    if not callable(patterns) or not isinstance(declared, set):
        return [s for s in available if state.admitted(tools, s)]
    # asked every message (the translation router): the admitted skills are remembered while the
    # registry's available list, the tool registry, its allowlist patterns and its declared tools are the same
    allow = patterns()
    hit = _admitted.get(reg)
    if hit is not None and hit[0] is tools and hit[1] is available and hit[2] is allow and hit[3] == declared:
        return list(hit[4])
    out = [s for s in available if state.admitted(tools, s)]
    _admitted[reg] = (tools, available, allow, frozenset(declared), out)
    return list(out)


_admitted: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()


@hookimpl
def register_commands(cli):
    from .cli import add_commands

    add_commands(cli)


