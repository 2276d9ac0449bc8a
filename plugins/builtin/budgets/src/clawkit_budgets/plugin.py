"""Budget arithmetic: what was used, against which cap, and what to do about it."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

KEY = "budgets"  # session metadata: tool calls and wall time of earlier runs
KINDS = ("tokens", "cost", "model_calls", "tool_calls", "wall_time")


class Caps(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: int | None = Field(None, gt=0, description="total tokens (prompt + completion)")
    cost: float | None = Field(None, gt=0, description="cost in the price table's currency")
    model_calls: int | None = Field(None, gt=0, description="model calls")
    tool_calls: int | None = Field(None, gt=0, description="tool calls")
    wall_time: float | None = Field(None, gt=0, description="seconds of wall-clock time")


class BudgetsConfig(BaseModel):
    """``plugins.budgets`` in the agent YAML."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    run: Caps = Field(default_factory=Caps, description="caps for one run (one turn)")
    session: Caps = Field(default_factory=Caps, description="caps for the whole session, across runs")
    warn_at: float = Field(0.8, gt=0, le=1, description="share of a cap at which the wrap-up notice is sent")


def _config(ctx: Any) -> BudgetsConfig:
    cfg = ctx.plugin_config("budgets")
    return cfg if isinstance(cfg, BudgetsConfig) else BudgetsConfig()


def _capped(c: Caps) -> bool:
    # spelled out (KINDS): asked by every hook, and a generator over getattr costs ~2 us
    return (c.tokens is not None or c.cost is not None or c.model_calls is not None or c.tool_calls is not None
            or c.wall_time is not None)


def _active(cfg: BudgetsConfig) -> bool:
    return cfg.enabled and (_capped(cfg.run) or _capped(cfg.session))


def start(ctx: Any) -> None:
    cfg = _config(ctx)
    if not _active(cfg):
        return
    totals = ctx.session.store.usage_totals(ctx.session.id) if any(
        getattr(cfg.session, k) is not None for k in ("tokens", "cost", "model_calls")) else {}
    earlier = ctx.session.get(KEY) or {}
    ctx.state["budgets.base"] = {
        "tokens": totals.get("total_tokens", 0) or 0,
        "cost": totals.get("cost") or 0.0,
        "model_calls": totals.get("calls", 0) or 0,
        "tool_calls": earlier.get("tool_calls", 0),
        "wall_time": earlier.get("wall_time", 0.0),
    }
    hit = _over(ctx, cfg, include_run=False)
    if hit:
        _stop(ctx, hit)
        ctx.state["reply"] = f"Stopped by a budget before doing anything: {hit[1]}. Raise the session budget to continue."


def used(ctx: Any) -> dict[str, dict[str, float]]:
    """This run's usage and the session's (earlier runs plus this one)."""
    run = {
        "tokens": ctx.usage.total_tokens,
        "cost": ctx.usage.cost or 0.0,
        "model_calls": ctx.model_calls,
        "tool_calls": ctx.tool_calls,
        "wall_time": time.monotonic() - ctx.started,
    }
    base = ctx.state.get("budgets.base") or {}
    return {"run": run, "session": {k: base.get(k, 0) + run[k] for k in KINDS}}


def _over(ctx: Any, cfg: BudgetsConfig, *, include_run: bool = True, share: float = 1.0) -> tuple[str, str] | None:
    """The first cap reached (scope.kind, a readable line), or None."""
    u = used(ctx)
    for scope, caps in (("run", cfg.run), ("session", cfg.session)):
        if scope == "run" and not include_run:
            continue
        for kind in KINDS:
            cap = getattr(caps, kind)
            if cap is not None and u[scope][kind] >= cap * share:
                value = u[scope][kind]
                shown = f"{value:.4g}" if isinstance(value, float) else str(value)
                return f"{scope}.{kind}", f"{scope} {kind.replace('_', ' ')} {shown} of {cap:g}"
    return None


def _stop(ctx: Any, hit: tuple[str, str]) -> None:
    if ctx.state.get("budgets.stopped"):
        return
    ctx.state["budgets.stopped"] = True
    ctx.emit("budget.exceeded", cap=hit[0], detail=hit[1])
    ctx.stop(f"Stopped: the {hit[1]} budget is reached.", reason="budget", detail=hit[1])


def gate(ctx: Any, call: Any) -> Any:
    cfg = _config(ctx)
    if not _active(cfg):
        return None
    hit = _over(ctx, cfg)
    if hit is None and ctx.state.get("budgets.stopped"):
        hit = ("stopped", "budget")
    if hit is None:
        # this call itself would pass a tool-call cap
        for scope, caps in (("run", cfg.run), ("session", cfg.session)):
            if caps.tool_calls is not None and used(ctx)[scope]["tool_calls"] + 1 > caps.tool_calls:
                hit = (f"{scope}.tool_calls", f"{scope} tool calls {caps.tool_calls} of {caps.tool_calls}")
                break
    if hit is None:
        return None
    from clawkit import Decision

    _stop(ctx, hit)
    return Decision(action="block", reason=f"budget reached ({hit[1]})")


def count_tool(ctx: Any) -> None:
    cfg = _config(ctx)
    if not _active(cfg):
        return
    u = used(ctx)["session"]
    ctx.session.set(KEY, {"tool_calls": u["tool_calls"], "wall_time": round(u["wall_time"], 3)})


def before_model(ctx: Any, request: Any) -> None:
    cfg = _config(ctx)
    if not _active(cfg):
        return
    u = used(ctx)["session"]
    ctx.session.set(KEY, {"tool_calls": u["tool_calls"], "wall_time": round(u["wall_time"], 3)})
    if not ctx.state.get("stop_turn"):
        hit = _over(ctx, cfg)
        if hit is not None:
            _stop(ctx, hit)  # the kernel turns this call into the wrap-up round
            return
    if ctx.state.get("budgets.warned") or ctx.state.get("stop_turn"):
        return
    near = _over(ctx, cfg, share=cfg.warn_at)
    if near is not None:
        ctx.state["budgets.warned"] = True
        ctx.emit("budget.warning", cap=near[0], detail=near[1])
        note = f"Budget notice: {near[1]} used. Wrap up soon: finish the current step and summarise."
        request.system = (request.system + "\n\n" if request.system else "") + note

