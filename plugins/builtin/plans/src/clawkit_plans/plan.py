"""The plan: its config, the ``update_plan`` tool and the prompt section."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clawkit.config import ModelConfig
from clawkit.prompt import PromptContributor, PromptSection
from clawkit.tools import ToolError, tool

KEY = "plan"
Status = Literal["pending", "in_progress", "done", "blocked"]
MARK = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]", "blocked": "[!]"}


class PreAnalysisConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    enabled: bool = Field(False, description="ask a 'lead architect' call whether a request is complex, and plan it first")
    model: ModelConfig | None = Field(None, description="model for pre-analysis (a cheap one); default: the agent's model")
    max_steps: int = Field(12, ge=1, le=50, description="longest plan pre-analysis may set")

    @field_validator("model", mode="before")
    @classmethod
    def _model_string(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v


class PlansConfig(BaseModel):
    """``plugins.plans`` in the agent YAML."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    max_steps: int = Field(30, ge=1, le=200, description="most steps a plan may have")
    pre_analysis: PreAnalysisConfig = Field(default_factory=PreAnalysisConfig)


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=300)
    status: Status = "pending"


def config(ctx: Any) -> PlansConfig:
    cfg = ctx.plugin_config("plans")
    return cfg if isinstance(cfg, PlansConfig) else PlansConfig()


def store_plan(ctx: Any, steps: list[dict[str, Any]], note: str | None, source: str) -> dict[str, Any]:
    """Replace the session's plan, emit ``plan.updated`` and rebuild the prompt for the next round."""
    previous = ctx.session.get(KEY) or {}
    plan = {"steps": steps, "note": note or "", "updated": time.time(), "source": source}
    ctx.session.set(KEY, plan)
    done_before = sum(1 for s in previous.get("steps", []) if s.get("status") == "done")
    done = sum(1 for s in steps if s["status"] == "done")
    ctx.emit("plan.updated", steps=len(steps), done=done, completed=max(0, done - done_before), source=source)
    ctx.invalidate_prompt()
    return plan


@tool(trusted_output=True)  # the plan it returns is the model's own, not outside content
def update_plan(steps: list[PlanStep], note: str | None = None, ctx: Any = None) -> str:
    """Replace the plan for this task. Call it first for multi-step work, then whenever a step's status changes.

    Args:
        steps: every step of the plan, in order, each with a title and a status (pending, in_progress, done, blocked)
        note: an optional remark about the plan (why it changed, what blocks it)
    """
    cfg = config(ctx)
    if not steps:
        raise ToolError("a plan needs at least one step")
    if len(steps) > cfg.max_steps:
        raise ToolError(f"a plan has at most {cfg.max_steps} steps; got {len(steps)}")
    rows = [s.model_dump() for s in steps]
    store_plan(ctx, rows, note, "model")
    done = sum(1 for s in rows if s["status"] == "done")
    return f"Plan updated: {len(rows)} steps, {done} done."


def render(plan: dict[str, Any]) -> str:
    lines = [f"{i}. {MARK.get(s.get('status'), '[ ]')} {s.get('title', '')}" for i, s in enumerate(plan.get("steps", []), 1)]
    if plan.get("note"):
        lines.append(f"Note: {plan['note']}")
    return "\n".join(lines)


class PlanContributor(PromptContributor):
    """The session's plan in every request, with the instruction to follow and update it."""

    id = "plans.plan"
    priority = 30
    source = "plan"

    def should_contribute(self, ctx: Any) -> bool:
        return ctx.session is not None and ("update_plan" in ctx.tools or bool(ctx.session.get(KEY)))

    def contribute(self, ctx: Any) -> PromptSection | None:
        plan = ctx.session.get(KEY)
        can_update = "update_plan" in ctx.tools
        if not plan or not plan.get("steps"):
            if not can_update:
                return None
            return PromptSection("Plan", "For a task of several steps, call update_plan with the steps before you start, and keep it current.")
        text = "Follow this plan ([x] done, [>] in progress, [!] blocked, [ ] pending):\n" + render(plan)
        if can_update:
            text += "\nCall update_plan whenever a step's status changes or the plan must change."
        return PromptSection("Plan", text)
