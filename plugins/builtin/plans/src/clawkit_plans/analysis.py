"""Pre-analysis: one small "lead architect" call decides whether a request needs a plan."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from clawkit import LlmRequest, Message, hook_order, hookimpl

from .plan import KEY, config, store_plan

log = logging.getLogger("clawkit.plans")

LEAD_ARCHITECT = (
    "You are the lead architect. Decide whether the user's request is complex: it needs several "
    "distinct steps, tools or files, or careful ordering. Answer with JSON only, no prose: "
    '{"is_complex": true|false, "reasoning": "<one sentence>", "plan": ["<step>", ["<step>", "<step>"], ...]} '
    "— the plan lists the steps in order when the request is complex, and is empty otherwise. Steps that do "
    "not depend on each other and can run at the same time go together in a nested list."
)
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse(text: str) -> dict[str, Any] | None:
    """The verdict from a reply (JSON, possibly fenced or with prose around it), or None."""
    m = _OBJECT.search(text or "")
    if not m:
        return None
    try:
        data = json.loads(m.group(0))
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("is_complex"), bool):
        return None
    plan = data.get("plan") if isinstance(data.get("plan"), list) else []
    entries: list[Any] = []
    for item in plan:  # a step, or a nested list: steps that can run at once
        if isinstance(item, list):
            group = [str(s).strip()[:300] for s in item if str(s).strip()]
            if len(group) > 1:
                entries.append(group)
            elif group:
                entries.append(group[0])
        elif str(item).strip():
            entries.append(str(item).strip()[:300])
    return {"is_complex": data["is_complex"], "reasoning": str(data.get("reasoning", ""))[:500], "plan": entries}


def plan_rows(entries: list[Any], limit: int) -> list[dict[str, Any]]:
    """Plan rows from the verdict's entries (a group's steps ``parallel_with`` each other), at most
    ``limit``; the first entry (every step of a first group) in progress."""
    rows: list[dict[str, Any]] = []
    for k, entry in enumerate(entries):
        group = entry if isinstance(entry, list) else [entry]
        first = len(rows) + 1
        members = list(range(first, first + len(group)))
        for title, number in zip(group, members):
            if len(rows) >= limit:
                return rows
            row = {"title": title, "status": "in_progress" if k == 0 else "pending"}
            others = [m for m in members if m != number and m <= limit]
            if others:
                row["parallel_with"] = others
            rows.append(row)
    return rows


def _unfinished(plan: dict[str, Any] | None) -> bool:
    return bool(plan) and any(s.get("status") not in ("done",) for s in plan.get("steps", []))


@hookimpl(trylast=True, specname="message_received")
@hook_order(95)
def pre_analyse(ctx: Any, message: Any) -> Any:
    """The pre-analysis of a new task (an awaitable), or None at once when there is none to make (off, the
    default; an empty or directive message; a plan under way; a turn answered without the model): most
    messages cost no coroutine."""
    cfg = config(ctx)
    if not cfg.pre_analysis.enabled or not message.content.strip() or message.content.lstrip().startswith("/"):
        return None
    if _unfinished(ctx.session.get(KEY)):
        return None  # the current plan goes on
    if ctx.state.get("reply") is not None:
        return None  # answered without the model (a directive, a budget stop, a sub-agent dispatch): nothing to plan
    return _pre_analyse(ctx, message, cfg)


async def _pre_analyse(ctx: Any, message: Any, cfg: Any) -> None:
    runtime = ctx.runtime
    model_cfg = cfg.pre_analysis.model or ctx.agent.model
    provider = runtime.provider_for(model_cfg) if cfg.pre_analysis.model else runtime.provider
    request = LlmRequest(model=model_cfg.name, system=LEAD_ARCHITECT, messages=[Message(role="user", content=message.content)], stream=False)
    try:
        response = await provider.complete(request)
    except Exception as exc:  # pre-analysis is advice: the turn goes on without it
        ctx.emit("plan.pre_analysis", ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return
    ctx.session.store.record_usage(ctx.session.id, ctx.run_id, response.model or request.model, response.usage)
    for field in ("prompt_tokens", "completion_tokens", "total_tokens"):  # counts against the run's budgets
        setattr(ctx.usage, field, getattr(ctx.usage, field) + getattr(response.usage, field))
    if response.usage.cost is not None:
        ctx.usage.cost = (ctx.usage.cost or 0.0) + response.usage.cost
    verdict = parse(response.content)
    if verdict is None:
        ctx.emit("plan.pre_analysis", ok=False, error="the reply was not the expected JSON")
        return
    rows = plan_rows(verdict["plan"], cfg.pre_analysis.max_steps)
    parallel = sum(1 for r in rows if r.get("parallel_with"))
    extra = {"parallel": parallel} if parallel else {}  # steps that can run at once
    ctx.emit("plan.pre_analysis", ok=True, is_complex=verdict["is_complex"], reasoning=verdict["reasoning"],
             steps=len(rows), **extra)
    if verdict["is_complex"] and rows:
        store_plan(ctx, rows, verdict["reasoning"], "pre_analysis")
