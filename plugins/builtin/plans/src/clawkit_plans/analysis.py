"""Pre-analysis: one small "lead architect" call decides whether a request needs a plan."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from clawkit import LlmRequest, Message

from .plan import KEY, config, store_plan

log = logging.getLogger("clawkit.plans")

LEAD_ARCHITECT = (
    "You are the lead architect. Decide whether the user's request is complex: it needs several "
    "distinct steps, tools or files, or careful ordering. Answer with JSON only, no prose: "
    '{"is_complex": true|false, "reasoning": "<one sentence>", "plan": ["<step>", ...]} '
    "— the plan lists the steps in order when the request is complex, and is empty otherwise."
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
    return {
        "is_complex": data["is_complex"],
        "reasoning": str(data.get("reasoning", ""))[:500],
        "plan": [str(s).strip()[:300] for s in plan if str(s).strip()],
    }


def _unfinished(plan: dict[str, Any] | None) -> bool:
    return bool(plan) and any(s.get("status") not in ("done",) for s in plan.get("steps", []))


async def pre_analyse(ctx: Any, message: Any) -> None:
    cfg = config(ctx)
    if not cfg.pre_analysis.enabled or not message.content.strip() or message.content.lstrip().startswith("/"):
        return
    if _unfinished(ctx.session.get(KEY)):
        return  # the current plan goes on
    if ctx.state.get("reply") is not None:
        return  # answered without the model (a directive, a budget stop, a sub-agent dispatch): nothing to plan
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
    steps = verdict["plan"][: cfg.pre_analysis.max_steps]
    ctx.emit("plan.pre_analysis", ok=True, is_complex=verdict["is_complex"], reasoning=verdict["reasoning"], steps=len(steps))
    if verdict["is_complex"] and steps:
        rows = [{"title": t, "status": "in_progress" if i == 0 else "pending"} for i, t in enumerate(steps)]
        store_plan(ctx, rows, verdict["reasoning"], "pre_analysis")
