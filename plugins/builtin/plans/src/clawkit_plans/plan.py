"""The plan: its config, the ``update_plan`` tool and the prompt section."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clawkit import hookimpl
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
    parallel_with: list[int] = Field(default_factory=list, description="numbers (1-based) of other steps that do not "
                                     "depend on this one and can run at the same time: their tool calls go in one response")


def link_parallel(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Check ``parallel_with`` (step numbers in range, not the step itself) and make it symmetric:
    when step 2 runs at once with 3, step 3 runs at once with 2. Steps without a partner lose the key."""
    n = len(rows)
    links: dict[int, set[int]] = {i: set() for i in range(1, n + 1)}
    for i, row in enumerate(rows, 1):
        for j in row.get("parallel_with") or ():
            if not 1 <= j <= n or j == i:
                raise ToolError(f"step {i} ({row['title']!r}): parallel_with names step {j}, "
                                f"which is {'itself' if j == i else f'not a step (the plan has {n})'}")
            links[i].add(j)
            links[j].add(i)
    for i, row in enumerate(rows, 1):
        row.pop("parallel_with", None)
        if links[i]:
            row["parallel_with"] = sorted(links[i])
    return rows


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
    rows = link_parallel([s.model_dump() for s in steps])
    store_plan(ctx, rows, note, "model")
    done = sum(1 for s in rows if s["status"] == "done")
    return f"Plan updated: {len(rows)} steps, {done} done."


def _at_once(step: dict[str, Any]) -> str:
    others = [str(j) for j in step.get("parallel_with") or () if isinstance(j, int)]
    return f" (at once with {', '.join(others)})" if others else ""


def has_parallel(plan: dict[str, Any]) -> bool:
    return any(s.get("parallel_with") for s in plan.get("steps", []) if isinstance(s, dict))


PARALLEL = ("Steps marked \"at once with\" do not depend on each other: when you reach them, make the tool "
            "calls of all of them in one response — they are run in parallel.")


def render(plan: dict[str, Any]) -> str:
    lines = [f"{i}. {MARK.get(s.get('status'), '[ ]')} {s.get('title', '')}{_at_once(s)}"
             for i, s in enumerate(plan.get("steps", []), 1)]
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
        if has_parallel(plan):
            text += "\n" + PARALLEL
        if can_update:
            text += "\nCall update_plan whenever a step's status changes or the plan must change."
        return PromptSection("Plan", text)


@hookimpl
def register_config(register):
    register("plans", PlansConfig)


@hookimpl
def register_tools(register, agent):
    """The ``update_plan`` tool."""
    register(update_plan)


@hookimpl
def register_prompt_contributor(register, agent):
    """The ``## Plan`` section (or a one-line hint when there is no plan yet)."""
    register(_PLAN)


_PLAN = PlanContributor()  # (it keeps no state: one for every agent and turn)
