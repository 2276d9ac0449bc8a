"""Budget arithmetic: what was used, against which cap, and what to do about it.

Every capped run has a :class:`Pool`: what the run has reserved and used, its own and its
sub-agents' (a child's run links its pool to its parent's, so every call a child makes is
reserved against every ancestor's caps too). Calls are reserved *before* they start: a tool
call in ``before_tool_call`` (atomically: a gate is a plain function on the event loop, so
of forty parallel calls only as many as the cap leaves run), a model call in
``before_llm_call``. A reservation whose call another gate blocks, or whose approval is
denied, is given back (``tool.blocked``/``tool.approval`` events). Tokens and cost are added
as each model call reports them (``llm.call``, estimated usage included) and checked before
the next call.
"""

from __future__ import annotations

from clawkit import hook_order, hookimpl, on_events

import time
import weakref
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

KEY = "budgets"  # session metadata: tool calls and wall time of earlier runs
KINDS = ("tokens", "cost", "model_calls", "tool_calls", "wall_time")
STATE = "budgets.pool"
START_KINDS = ("tokens", "cost", "model_calls", "wall_time")  # what refuses a child's turn outright


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
    run: Caps = Field(default_factory=Caps, description="caps for one run (one turn, its sub-agents included)")
    session: Caps = Field(default_factory=Caps, description="caps for the whole session, across runs")
    warn_at: float = Field(0.8, gt=0, le=1, description="share of a cap at which the wrap-up notice is sent")


class Pool:
    """One run's reservations and usage, its descendants' included; linked to the parent run's pool."""

    __slots__ = ("caps", "parent", "started", "tool_calls", "model_calls", "tokens", "cost", "estimated", "held",
                 "children", "__weakref__")

    def __init__(self, caps: Caps, parent: "Pool | None", started: float) -> None:
        self.caps, self.parent, self.started = caps, parent, started
        self.tool_calls = self.model_calls = self.tokens = 0
        self.cost = 0.0
        self.estimated = False
        self.held: set[str] = set()  # tool calls reserved and not given back
        self.children: set[str] = set()  # call ids of agent calls whose child run reports here live

    def chain(self) -> "list[Pool]":
        out, p = [], self
        while p is not None:
            out.append(p)
            p = p.parent
        return out

    def value(self, kind: str) -> float:
        return time.monotonic() - self.started if kind == "wall_time" else getattr(self, kind)


_pools: "weakref.WeakValueDictionary[str, Pool]" = weakref.WeakValueDictionary()  # run id -> its pool


def _config(ctx: Any) -> BudgetsConfig:
    cfg = ctx.plugin_config("budgets")
    return cfg if isinstance(cfg, BudgetsConfig) else BudgetsConfig()


def _capped(c: Caps) -> bool:
    # spelled out (KINDS): asked by every hook, and a generator over getattr costs ~2 us
    return (c.tokens is not None or c.cost is not None or c.model_calls is not None or c.tool_calls is not None
            or c.wall_time is not None)


def _active(cfg: BudgetsConfig) -> bool:
    return cfg.enabled and (_capped(cfg.run) or _capped(cfg.session))


def pool(ctx: Any) -> Pool | None:
    """This run's pool (made on first use), or None when neither it nor an ancestor run is capped."""
    found = ctx.state.get(STATE)
    if found is not None:
        return found or None
    cfg = _config(ctx)
    parent_run = getattr(ctx, "parent_run_id", None)
    parent = _pools.get(parent_run) if parent_run else None
    if not cfg.enabled or (parent is None and not _active(cfg)):
        ctx.state[STATE] = False
        return None
    mine = ctx.state[STATE] = Pool(cfg.run, parent, ctx.started)
    _pools[ctx.run_id] = mine
    if parent is not None and ctx.parent_step_id:
        parent.children.add(ctx.parent_step_id)
    return mine


@hookimpl(tryfirst=True, specname="message_received")
@hook_order(15)
def start(ctx: Any) -> None:
    p = pool(ctx)
    if p is None:
        return
    cfg = _config(ctx)
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
    # a spent session, or an ancestor's spent run (a child: no model call at all); an ancestor with no
    # tool calls left still lets the child answer (its first call is the wrap-up round, without tools)
    hit = _over(ctx, cfg, p, include_run=False, kinds=START_KINDS)
    if hit:
        _stop(ctx, hit)
        raise_it = "the session budget" if hit[0].startswith("session") else "the parent's budget"
        ctx.state["reply"] = f"Stopped by a budget before doing anything: {hit[1]}. Raise {raise_it} to continue."


def used(ctx: Any) -> dict[str, dict[str, float]]:
    """This run's usage (its sub-agents' included) and the session's (earlier runs plus this one)."""
    p = pool(ctx)
    if p is None:
        run = {"tokens": ctx.usage.total_tokens, "cost": ctx.usage.cost or 0.0, "model_calls": ctx.model_calls,
               "tool_calls": ctx.tool_calls, "wall_time": time.monotonic() - ctx.started}
    else:
        run = {k: p.value(k) for k in KINDS}
        # usage a tool reported that this plugin did not see (a later plugin set it): the kernel
        # rolled it into ctx.usage after the calls; children's usage is in both, so the larger holds
        run["tokens"] = max(run["tokens"], ctx.usage.total_tokens)
        run["cost"] = max(run["cost"], ctx.usage.cost or 0.0)
    base = ctx.state.get("budgets.base") or {}
    return {"run": run, "session": {k: base.get(k, 0) + run[k] for k in KINDS}}


def _line(scope: str, kind: str, value: float, cap: float) -> str:
    shown = f"{value:.4g}" if isinstance(value, float) else str(value)
    return f"{scope} {kind.replace('_', ' ')} {shown} of {cap:g}"


def _over(ctx: Any, cfg: BudgetsConfig, p: Pool, *, include_run: bool = True, share: float = 1.0,
          kinds: tuple[str, ...] = KINDS) -> tuple[str, str] | None:
    """The first cap reached (scope.kind, a readable line), or None: the session's, this run's
    (unless ``include_run`` is false) and every ancestor run's."""
    u = used(ctx)
    for kind in KINDS:
        cap = getattr(cfg.session, kind)
        if cap is not None and u["session"][kind] >= cap * share:
            return f"session.{kind}", _line("session", kind, u["session"][kind], cap)
    for depth, q in enumerate(p.chain()):
        if depth == 0 and not include_run:
            continue
        for kind in kinds:
            cap = getattr(q.caps, kind)
            if cap is not None:
                value = u["run"][kind] if depth == 0 else q.value(kind)
                if value >= cap * share:
                    scope = "run" if depth == 0 else "parent run"
                    return f"run.{kind}", _line(scope, kind, value, cap)
    return None


def _stop(ctx: Any, hit: tuple[str, str]) -> None:
    if ctx.state.get("budgets.stopped"):
        return
    ctx.state["budgets.stopped"] = True
    ctx.emit("budget.exceeded", cap=hit[0], detail=hit[1])
    ctx.stop(f"Stopped: the {hit[1]} budget is reached.", reason="budget", detail=hit[1])


@hookimpl(tryfirst=True, specname="before_tool_call")
@hook_order(15)
def gate(ctx: Any, call: Any) -> Any:
    """Reserve ``call`` against every cap, or block it: atomic (no await between check and count)."""
    p = pool(ctx)
    if p is None:
        return None
    cfg = _config(ctx)
    hit = _over(ctx, cfg, p)
    if hit is None and ctx.state.get("budgets.stopped"):
        hit = ("stopped", "budget")
    if hit is None:
        for q in p.chain():
            q.tool_calls += 1
        p.held.add(call.id)
        return None
    from clawkit import Decision

    _stop(ctx, hit)
    return Decision(action="block", reason=f"budget reached ({hit[1]})")


def release(run_id: str | None, call_id: str | None) -> None:
    """Give back a reserved tool call that did not run (another gate blocked it, approval was denied)."""
    p = _pools.get(run_id) if run_id else None
    if p is None or call_id not in p.held:
        return
    p.held.discard(call_id)
    for q in p.chain():
        q.tool_calls -= 1


def add_usage(p: Pool, usage: dict[str, Any]) -> None:
    tokens = int(usage.get("total_tokens") or 0)
    cost = usage.get("cost")
    estimated = bool(usage.get("estimated"))
    for q in p.chain():
        q.tokens += tokens
        if cost:
            q.cost += float(cost)
        q.estimated = q.estimated or estimated


@hookimpl(specname="on_event")
@on_events("llm.call", "tool.blocked", "tool.approval")
def observe(event: Any) -> None:
    if not _pools.data:  # no capped run in the process (the default): nothing to count against
        return
    p = _pools.get(event.run_id) if event.run_id else None
    if p is None:
        return
    if event.type == "llm.call":
        add_usage(p, event.data.get("usage") or {})
    elif event.type == "tool.blocked" or (event.type == "tool.approval" and not event.data.get("approved")):
        release(event.run_id, event.data.get("call_id"))


@hookimpl(specname="after_tool_call")
@hook_order(50)
def after_tool(ctx: Any, call: Any, result: Any) -> None:
    p = pool(ctx)
    if p is None:
        return
    reported = result.metadata.get("usage") if result is not None else None
    if reported and call.id not in p.children:
        # a tool that ran models itself and reports their usage (a child without a live pool)
        add_usage(p, reported)
    _persist(ctx)


def _persist(ctx: Any) -> None:
    u = used(ctx)["session"]
    ctx.session.set(KEY, {"tool_calls": u["tool_calls"], "wall_time": round(u["wall_time"], 3)})


@hookimpl(trylast=True, specname="before_llm_call")
@hook_order(80)
def before_model(ctx: Any, request: Any) -> None:
    p = pool(ctx)
    if p is None:
        return
    cfg = _config(ctx)
    _persist(ctx)
    if not ctx.state.get("stop_turn"):
        hit = _over(ctx, cfg, p)
        if hit is not None:
            _stop(ctx, hit)  # the kernel turns this call into the wrap-up round
            return
        for q in p.chain():  # reserved before the call starts
            q.model_calls += 1
    if ctx.state.get("budgets.warned") or ctx.state.get("stop_turn"):
        return
    near = _over(ctx, cfg, p, share=cfg.warn_at)
    if near is not None:
        ctx.state["budgets.warned"] = True
        ctx.emit("budget.warning", cap=near[0], detail=near[1])
        note = f"Budget notice: {near[1]} used. Wrap up soon: finish the current step and summarise."
        request.system = (request.system + "\n\n" if request.system else "") + note


@hookimpl
def register_config(register):
    register("budgets", BudgetsConfig)
