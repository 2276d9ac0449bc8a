"""The prompt contributors: a compact skills index, and the active skills' full sections."""

from __future__ import annotations

from typing import Any

from clawkit.prompt import PromptContributor, PromptSection

from .state import active_of, admitted, settings

class SkillIndexContributor(PromptContributor):
    """A compact list of the available skills (name + one line) — never their full text."""

    id = "skills.index"
    priority = 80
    source = "skills"

    def contribute(self, ctx: Any) -> PromptSection | None:
        reg = ctx.state.get("skills.registry")
        if reg is None or "load_skill" not in ctx.tools:  # the index only makes sense with load_skill
            return None
        cfg = settings(ctx.agent)
        active = {s.name for s in _active(ctx, reg)}
        tools = getattr(ctx, "registry", None)
        skills = [s for s in reg.available() if s.name not in active and admitted(tools, s)][: cfg.index_limit]
        if not skills:
            return None
        lines = [f"- {s.name}: {s.description}" for s in skills]
        head = "Available skills" + (" (call `load_skill` with a name to load its instructions and tools):" if cfg.load_skill_tool else ":")
        return PromptSection("Skills", head + "\n" + "\n".join(lines))


class ActiveSkillsContributor(PromptContributor):
    """The full compiled sections of the skills active this turn."""

    id = "skills.active"
    priority = 85
    source = "skills"
    compressible = False  # never trimmed: dropped whole, and its skills' tools with it

    def contribute(self, ctx: Any) -> PromptSection | None:
        reg = ctx.state.get("skills.registry")
        if reg is None or ctx.session is None:
            return None
        active = _active(ctx, reg)
        if not active:
            return None
        return PromptSection("Active skills", "\n\n".join(s.system_prompt_section for s in active),
                             tools=tuple(t.name for s in active for t in s.tool_definitions))


def _active(cctx: Any, reg: Any) -> list:
    """:func:`~.state.active_skills` for a ContributorContext (its tool registry is ``registry``)."""
    return active_of(cctx, cctx.agent, cctx.state, cctx.session, cctx.registry, reg)
