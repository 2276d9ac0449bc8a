"""Skill tools (a skill's IDL interfaces as inert tools) and ``load_skill``.

Executing a skill tool validates the arguments against the IDL schema, fills
``@dialect`` hints, and returns the arguments with the skill's plan and guardrails
as JSON; it never acts by itself.
"""

from __future__ import annotations

import json
import re
import weakref
from pathlib import Path
from typing import Any

from clawkit.tools import Tool, ToolError

from .claws import read_telemetry, write_telemetry
from .compiler import CompiledSkill
from .registry import SkillRegistry
from .state import LOADED_KEY, SkillsConfig, bump, log, registry_for

_synced: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()

class SkillTool(Tool):
    """A skill's IDL interface as a tool: validates and returns the plan, never acts."""

    skill_name: str = ""
    skill: Any = None

    def offered(self, ctx: Any) -> bool:
        """Shown to the model only while its skill is active (routed, loaded or ``always``)."""
        from .state import active_skills

        try:
            return any(s.name == self.skill_name for s in active_skills(ctx))
        except Exception:
            return False

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:  # JSON Schema validation happens in run
        return {"arguments": dict(arguments)}


def fill_dialect(ctx: Any, tool: "SkillTool", arguments: dict[str, Any]) -> dict[str, Any]:
    """Fill missing fields that carry an ``@dialect`` hint, in place; returns what was filled.

    Runs in ``before_tool_call`` ahead of every gate (the shield validates the filled
    arguments) and again when the tool runs (a no-op by then)."""
    filled: dict[str, Any] = {}
    skill, td = tool.skill, tool.definition
    props = (td.parameters or {}).get("properties", {})
    for fld, key in skill.dialect_hints.get(td.name, {}).items():
        if fld not in arguments or arguments[fld] in (None, ""):
            value = dialect_value(ctx, key, props.get(fld) or {})
            if value is not None:
                arguments[fld] = filled[fld] = value
    return filled


def _make_skill_tool(skill: CompiledSkill, td: Any, write_back: bool) -> SkillTool:
    def run_skill_tool(arguments: dict[str, Any], ctx: Any = None) -> str:
        import jsonschema

        args = dict(arguments)
        filled = fill_dialect(ctx, tool, args)
        call = getattr(ctx, "call", None) if ctx is not None else None
        if call is not None:  # filled earlier, in before_tool_call
            filled = {**((getattr(ctx, "state", None) or {}).get("skills.filled", {}).get(call.id) or {}), **filled}
        errors = sorted(jsonschema.Draft202012Validator(td.parameters).iter_errors(args), key=lambda e: list(e.path))
        if errors:
            detail = "; ".join(f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:5])
            raise ToolError(f"invalid arguments for {td.name}: {detail}")
        if ctx is not None:
            bump(ctx.session.store, f"tool:{skill.name}")
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
    tool.skill = skill
    return tool


_URL = re.compile(r"https?://[^\s<>()\"']+")
_CMD = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"(?<![\w/:])((?:\.{0,2}/|~/)?(?:[\w.-]+/)*[\w-]+\.[A-Za-z0-9]{1,8}|(?:\.{0,2}/|~/)(?:[\w.-]+/?)+)")


def _last_user(ctx: Any) -> str | None:
    return next((m.content for m in reversed(ctx.session.history) if m.role == "user"), None)


def dialect_value(ctx: Any, key: str, schema: dict[str, Any] | None = None) -> Any:
    """The value a ``@dialect`` source stands for in this turn (None when it has none).

    ``context.query``/``message``/``text``/``task`` — the user's latest message;
    ``context.action`` — the enum value of the field the message names (else the
    router's intent when allowed); ``context.url`` — the first URL in the message;
    ``context.path`` — the first file path; ``context.cmd`` — the first `backticked`
    command; ``context.workspace``; ``context.session_id``; any other dotted key is
    looked up in the turn state."""
    if ctx is None:
        return None
    schema = schema or {}
    text = _last_user(ctx) or ""
    if key in ("context.query", "context.message", "context.text", "user.message", "context.task"):
        return text or None
    if key == "context.action":
        choices = [c for c in schema.get("enum") or [] if isinstance(c, str)]
        words = set(re.findall(r"[\w-]+", text.lower()))
        named = next((c for c in choices if c.lower() in words), None)
        intent = ((getattr(ctx, "state", None) or {}).get("route") or {}).get("intent")
        if named is not None:
            return named
        if intent and (not choices or intent in choices):
            return intent
        return schema.get("default")
    if key == "context.url":
        m = _URL.search(text)
        return m.group(0).rstrip(".,;") if m else None
    if key == "context.cmd":
        m = _CMD.search(text)
        return m.group(1) if m else None
    if key == "context.path":
        m = _PATH.search(_URL.sub(" ", text))
        return m.group(1).rstrip(".,;") if m else None
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


def sync_tools(ctx: Any, reg: SkillRegistry, cfg: SkillsConfig) -> None:
    """Mirror the registry's skill tools into the agent's tool registry (all skills, so a
    call from an earlier turn still runs; before_llm_call shows only the active ones)."""
    tools = ctx.tools
    marker = (reg.version,)
    if _synced.get(tools) == marker:
        return
    wanted: dict[str, SkillTool] = {}
    for sk in reg.available():
        for td in sk.tool_definitions:
            if td.name not in wanted:
                wanted[td.name] = _make_skill_tool(sk, td, cfg.write_telemetry)
    for name in [n for n, t in tools.tools.items() if isinstance(t, SkillTool) and n not in wanted]:
        tools.remove(name)
    for name, tool in wanted.items():
        old = tools.tools.get(name)
        if old is not None and not isinstance(old, SkillTool):
            log.warning("skill tool %s clashes with a tool of the same name; skipped", name)
            continue
        tools.add(tool)  # the agent's allowlist still decides whether it is shown or run
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
    reasons = list(reg.unavailable_reason(name))
    from .state import missing_tools

    missing = missing_tools(getattr(ctx, "tools", None), sk)
    if missing:
        reasons.append(f"it needs tool(s) {', '.join(missing)}, which this agent's tools do not allow")
    if reasons:
        raise ToolError(f"skill {name!r} is unavailable here: {'; '.join(reasons)}")
    loaded = list(ctx.session.get(LOADED_KEY, []) or [])
    if name not in loaded:
        ctx.session.set(LOADED_KEY, loaded + [name])
    ctx.emit("skills.loaded", skill=name, tools=[t.name for t in sk.tool_definitions])
    ctx.invalidate_prompt()  # the next round of this turn must see the skill's section
    bump(ctx.session.store, f"loaded:{name}")
    tools = ", ".join(t.name for t in sk.tool_definitions)
    return (f"Skill {name} loaded for this session: its instructions are now in your system prompt"
            + (f" and its tools are available: {tools}." if tools else ".") + "\n\n" + sk.system_prompt_section)




MAX_SKILL_FILE = 256_000  # bytes read_skill_file returns at most


def skill_folder(sk: CompiledSkill) -> Path | None:
    """The folder a ``SKILL.md`` skill lives in (its bundled files: ``FORMS.md``, ``scripts/…``);
    None for a ``.claws`` file (one file, no folder of its own)."""
    return Path(sk.path).resolve().parent if sk.format == "skill.md" else None


def read_skill_file(skill: str, path: str, ctx: Any) -> str:
    """Read a file bundled with a skill (read-only), wherever the skill is installed.

    Args:
        skill: the skill's name, exactly as listed.
        path: the file's path inside the skill's folder, e.g. FORMS.md or scripts/fill.py.
    """
    reg = ctx.state.get("skills.registry") or registry_for(ctx)
    sk = reg.get(skill)
    if sk is None or reg.unavailable_reason(skill):
        known = ", ".join(s.name for s in reg.available()) or "none"
        raise ToolError(f"unknown or unavailable skill {skill!r}; available skills: {known}")
    folder = skill_folder(sk)
    if folder is None:
        raise ToolError(f"skill {skill!r} is a single .claws file: it has no folder of bundled files")
    target = (folder / path).resolve()
    if target != folder and folder not in target.parents:
        raise ToolError(f"{path!r} is outside the folder of skill {skill!r} ({folder})")
    if not target.is_file():
        raise ToolError(f"no file {path!r} in the folder of skill {skill!r} ({folder})")
    data = target.read_bytes()[:MAX_SKILL_FILE]
    return data.decode("utf-8", "replace")


class SkillFileTool(Tool):
    """``read_skill_file``, offered only while an active skill has a folder of bundled files."""

    def offered(self, ctx: Any) -> bool:
        from .state import active_skills

        try:
            return any(skill_folder(s) is not None for s in active_skills(ctx))
        except Exception:
            return False


def skill_file_tool() -> SkillFileTool:
    from dataclasses import fields

    from clawkit.tools import tool_from_function

    base = tool_from_function(read_skill_file, name="read_skill_file")
    return SkillFileTool(**{f.name: getattr(base, f.name) for f in fields(Tool)})
