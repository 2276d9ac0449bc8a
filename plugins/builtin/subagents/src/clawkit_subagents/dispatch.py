"""Dispatch from the translation device: a confident route to a sub-agent spawns it.

The translation plugin puts ``route["dispatch"] = [{"agent", "task", "intent"}, ...]``
in the turn state when a profile names a sub-agent (several entries for a message it
decomposed into intents: MULTI). This plugin spawns the children concurrently and
answers the turn itself with their answers merged by a plain template.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from clawkit.types import Usage, new_id

from .spawn import delegate


def merge(outcomes: list[tuple[dict[str, Any], Any]]) -> str:
    """One answer as is; several as plain sections, in the order of the message."""
    def body(out: Any) -> str:
        return out.answer.strip() if out.error is None else f"(no answer: {out.error})"

    if len(outcomes) == 1:
        return body(outcomes[0][1])
    parts = []
    for item, out in outcomes:
        title = item.get("intent") or out.agent
        parts.append(f"## {title} ({out.agent})\n\n{body(out)}")
    return "\n\n".join(parts)


async def dispatch(ctx: Any, items: list[dict[str, Any]]) -> None:
    declared = ctx.agent.subagents
    wanted = [i for i in items if isinstance(i, dict) and declared.get(str(i.get("agent"))) is not None and i.get("task")]
    if not wanted:
        return None
    started = {}

    async def one(item: dict[str, Any]) -> Any:
        step = new_id("step")
        started[step] = time.time()
        out = await delegate(ctx, item["agent"], declared.get(item["agent"]), str(item["task"]), step_id=step)
        ctx.session.store.step(ctx.run_id, step, "tool", f"agent_{item['agent']}", started[step],
                               time.time(), "ok" if out.error is None else "error",
                               {"dispatch": True, "intent": item.get("intent")})
        return out

    outcomes = await asyncio.gather(*(one(i) for i in wanted))
    total = Usage()
    for out in outcomes:
        total.prompt_tokens += out.usage.prompt_tokens
        total.completion_tokens += out.usage.completion_tokens
        total.total_tokens += out.usage.total_tokens
        if out.usage.cost is not None:
            total.cost = (total.cost or 0.0) + out.usage.cost
    ctx.state["reply"] = merge(list(zip(wanted, outcomes)))
    ctx.state["reply_usage"] = total
    ctx.emit("subagent.dispatch", agents=[o.agent for o in outcomes], intents=[i.get("intent") for i in wanted],
             errors=sum(o.error is not None for o in outcomes))
    return None
