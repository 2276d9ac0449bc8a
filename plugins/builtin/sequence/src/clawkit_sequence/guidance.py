"""Seed 001, Approach A: prerequisites stated in the prompt, and checkpoint tools.

* :func:`tool_notes` — one sentence per sequence rule, put next to the tool it governs in
  the prompt's ``## Tools`` section (turn state ``tool_notes``: ``{tool: [note, …]}``, read
  by the contributors plugin's tools summary). "call read_file on the same path before
  edit_file", so the model meets the rule before it meets the block.
* :func:`checkpoint_tools` — ``think_about_*``-style tools configured in YAML
  (``sequence.checkpoints``): calling one returns its templated text (``{note}``,
  ``{agent}``, ``{tools_used}`` filled in), a prompt for the model to reflect before it
  goes on. They are offered only to agents that list them in ``tools:``.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

NOTES_KEY = "tool_notes"


class Checkpoint(BaseModel):
    """One checkpoint tool: ``description`` for the model, ``prompt`` returned when called."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field("Pause and think before you go on.", description="what the model is told the tool is for")
    prompt: str = Field(description="text returned by the tool; {note}, {agent} and {tools_used} are filled in")


def rule_note(rule: Any) -> str:
    """The sentence stating ``rule`` for the model."""
    need = (" or " if rule.mode == "any" else " and ").join(rule.requires)
    pairs = rule.pairs()
    same = ""
    if pairs:
        same = " on the same " + ", ".join(theirs if mine == theirs else f"{theirs} (as {mine})" for mine, theirs in pairs)
    when = " (for an existing file)" if rule.existing_only else ""
    return f"call {need}{same} before this tool{when}" + ("" if rule.enforce else " (advised)")


def tool_notes(ctx: Any, rules: list[Any]) -> None:
    """Add each rule's note to ``ctx.state["tool_notes"]`` under every visible tool it governs."""
    if not rules or ctx.tools is None:
        return
    notes: dict[str, list[str]] = ctx.state.setdefault(NOTES_KEY, {})
    names = [t.name for t in ctx.tools.visible()]
    for rule in rules:
        text = rule_note(rule)
        for name in names:
            if fnmatch.fnmatchcase(name, rule.tool) and text not in notes.setdefault(name, []):
                notes[name].append(text)


class _Defaults(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def checkpoint_tools(register: Any, checkpoints: dict[str, Checkpoint]) -> None:
    """Register one tool per configured checkpoint (the agent's ``tools:`` list decides)."""
    for name, cp in checkpoints.items():
        register(_checkpoint(cp), name=name)


def _checkpoint(cp: Checkpoint) -> Any:
    def checkpoint(note: str = "", ctx: Any = None) -> str:
        used = sorted(set(ctx.state.get(USED_KEY) or [])) if ctx is not None else []
        values = _Defaults(note=note, agent=getattr(getattr(ctx, "agent", None), "name", ""), tools_used=", ".join(used) or "none yet")
        try:
            return cp.prompt.format_map(values)
        except (ValueError, IndexError, AttributeError):
            return cp.prompt

    checkpoint.__doc__ = f"""{cp.description}

    Args:
        note: what you have so far, in a sentence or two.
    """
    return checkpoint


USED_KEY = "sequence.tools_used"  # turn state: names of the tools that ran this turn
