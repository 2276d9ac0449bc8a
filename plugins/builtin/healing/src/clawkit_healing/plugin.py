"""Self-healing counters and the notes they trigger."""

from __future__ import annotations

from clawkit import hook_order, hookimpl

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

KEY = "healing"
SEEN_MAX = 500  # distinct call signatures remembered per session

STOP_AND_THINK = (
    "STOP and THINK. The last {n} tool calls failed. Before you call another tool, analyse the errors: "
    "what exactly failed, why, and what you will do differently. Do not repeat a failing call unchanged; "
    "if the task cannot be done this way, say so."
)
STAGNATION = (
    "Stagnation alert: {n} tool calls without progress (no new call, no plan step completed). "
    "Change your approach, or stop and tell the user what blocks you."
)
FOCUS = "Focus: the conversation is long. Your current instruction from the user is: \u00ab{text}\u00bb"


class HealingConfig(BaseModel):
    """``plugins.healing`` in the agent YAML."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    consecutive_failures: int = Field(3, ge=1, description="failing tool results in a row before the stop-and-think note")
    stagnation_steps: int = Field(15, ge=1, description="tool calls without progress before the stagnation alert")
    focus_share: float = Field(0.5, gt=0, le=1, description="share of the window the history may fill before the focus note")
    focus_quote_chars: int = Field(400, ge=50, description="longest quote of the user's instruction in the focus note")


def _config(ctx: Any) -> HealingConfig:
    cfg = ctx.plugin_config("healing")
    return cfg if isinstance(cfg, HealingConfig) else HealingConfig()


# id(agent config) -> (agent config, its plugins, the window the request named, (section, window, history tokens past
# which the focus note is due)): looked up once per agent (config objects are not changed once loaded; a reloaded
# config is a new object, and so is a replaced ``plugins``)
_AGENTS: dict[int, tuple[Any, Any, Any, tuple[HealingConfig, int, float]]] = {}


def _settings(ctx: Any, request: Any) -> tuple[HealingConfig, int, float]:
    """``(section, window, focus threshold)`` for ``request``: :func:`_config` and the window arithmetic."""
    agent = ctx.agent
    named = request.metadata.get("context_window")
    plugins = getattr(agent, "plugins", None)
    hit = _AGENTS.get(id(agent))
    if hit is not None and hit[0] is agent and hit[1] is plugins and hit[2] == named:
        return hit[3]
    cfg = _config(ctx)
    window = int(named or agent.limits.context_window)
    out = (cfg, window, cfg.focus_share * window)
    if len(_AGENTS) >= 256:
        _AGENTS.clear()
    _AGENTS[id(agent)] = (agent, plugins, named, out)
    return out


def _state(session: Any) -> dict[str, Any]:
    st = session.get(KEY) or {}
    return _defaults(st)


def _defaults(st: dict[str, Any]) -> dict[str, Any]:
    st.setdefault("failures", 0)
    st.setdefault("since_progress", 0)
    st.setdefault("seen", [])
    st.setdefault("noted_failures", 0)
    return st


# the encoder ``json.dumps(arguments, sort_keys=True, default=str)`` builds on every call, built once
_ARGS = json.JSONEncoder(sort_keys=True, default=str)
_SIGS: dict[str, str] = {}  # a call's signature -> its hash (short signatures only: a repeated call is common)


def _sig(call: Any) -> str:
    """A short hash of the call's name and canonical arguments (``ToolCall.signature``'s text)."""
    args = call.arguments
    text = call.name + ":" + (_ARGS.encode(args) if args else "{}")
    hit = _SIGS.get(text)
    if hit is None:
        hit = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        if len(text) <= 1024:
            if len(_SIGS) >= 4096:
                _SIGS.clear()
            _SIGS[text] = hit
    return hit


def observe(ctx: Any, st: dict[str, Any]) -> bool:
    """Count the tool results that arrived since the last request (blocked and denied calls too);
    True when a counter or the signatures seen changed (the state is to be written)."""
    history = ctx.session.history
    seen = ctx.state.get("healing.seen")
    ctx.state["healing.seen"] = len(history)
    if seen is None or seen >= len(history):
        return False  # nothing arrived (a turn's first request): no plan or calls to look at
    new = history[seen:]
    calls = {c.id: c for m in new if m.role == "assistant" for c in m.tool_calls}
    plan = ctx.session.get("plan")  # the plan (clawkit-plans), if any, is session metadata
    steps = plan.get("steps") if isinstance(plan, dict) else None
    done = sum(1 for s in steps if isinstance(s, dict) and s.get("status") == "done") if steps else 0
    failures, since, noted, signatures = st["failures"], st["since_progress"], st["noted_failures"], st["seen"]
    plan_done = st.get("plan_done", 0)
    observed = False
    for m in new:
        if m.role != "tool" or m.tool_result is None:
            continue
        observed = True
        if m.tool_result.is_error:
            failures += 1
        else:
            failures = noted = 0
        call = calls.get(m.tool_result.call_id)
        sig = _sig(call) if call is not None else m.tool_result.call_id
        if sig not in signatures:
            since = 0
            signatures = (signatures + [sig])[-SEEN_MAX:]  # a new list: the stored one is not changed in place
        elif done > plan_done:
            since = 0
        else:
            since += 1
        plan_done = done
    if not observed:
        return False
    changed = (failures != st["failures"] or since != st["since_progress"] or noted != st["noted_failures"]
               or signatures is not st["seen"] or done != st.get("plan_done"))
    st["failures"], st["since_progress"], st["noted_failures"], st["seen"], st["plan_done"] = \
        failures, since, noted, signatures, done
    return changed


def _history_tokens(request: Any) -> int:
    chars = 0
    for m in request.messages:  # (a loop: no generator per model call)
        if m.content:
            chars += len(m.content)
    return chars // 4  # ~4 chars a token: a cheap, stable estimate


async def intervene(ctx: Any, request: Any) -> None:
    pending = intervene_now(ctx, request)
    if pending is not None:
        await pending


@hookimpl(specname="before_llm_call")
@hook_order(35)
def intervene_now(ctx: Any, request: Any) -> Any:
    """:func:`intervene`'s work, synchronously; an awaitable (the notices to deliver) only
    when there are notes — most model calls need no coroutine."""
    cfg, window, focus_at = _settings(ctx, request)
    if not cfg.enabled:
        return None
    stored = ctx.session.get(KEY)
    st = stored if isinstance(stored, dict) else {}
    seen = ctx.state.get("healing.seen")
    if (seen is None or seen >= len(ctx.session.history)) and st.get("failures", 0) < cfg.consecutive_failures \
            and st.get("since_progress", 0) < cfg.stagnation_steps:
        # nothing arrived since the last request (a turn's first, as a rule) and no counter at its threshold:
        # nothing to count, note or write — only the focus booster to look at
        ctx.state["healing.seen"] = len(ctx.session.history)
        focus = _focus(ctx, request, cfg, window, focus_at)
        if focus is None:
            return None
        add_to_latest_message(request, focus)
        return _notify(ctx, [focus])
    _defaults(st)
    changed = observe(ctx, st)
    notes: list[str] = []
    if st["failures"] >= cfg.consecutive_failures and st["failures"] > st["noted_failures"]:
        notes.append(STOP_AND_THINK.format(n=st["failures"]))
        st["noted_failures"] = st["failures"] + cfg.consecutive_failures - 1  # again after another streak
        ctx.emit("healing.stop_and_think", failures=st["failures"])
        changed = True
    if st["since_progress"] >= cfg.stagnation_steps:
        notes.append(STAGNATION.format(n=st["since_progress"]))
        ctx.emit("healing.stagnation", steps=st["since_progress"])
        st["since_progress"] = 0
        changed = True
    focus = _focus(ctx, request, cfg, window, focus_at)
    if focus is not None:
        notes.append(focus)
    if changed:  # an unchanged state (most model calls) is not written again
        ctx.session.set(KEY, st)
    if not notes:
        return None
    add_to_latest_message(request, "\n\n".join(notes))
    return _notify(ctx, notes)


def _focus(ctx: Any, request: Any, cfg: HealingConfig, window: int, focus_at: float) -> str | None:
    """The focus note (and its event) when the history fills more than ``focus_share`` of the window
    (``focus_at`` tokens)."""
    tokens = _history_tokens(request)
    if tokens <= focus_at:
        return None
    last = next((m.content for m in reversed(request.messages) if m.role == "user" and not m.metadata.get("kernel_note")), "")
    if not last:
        return None
    quote = last if len(last) <= cfg.focus_quote_chars else last[: cfg.focus_quote_chars] + "\u2026"
    ctx.emit("healing.focus", history_tokens=tokens, window=window)
    return FOCUS.format(text=quote)


def add_to_latest_message(request: Any, text: str) -> None:
    """Put ``text`` where the model looks last (Rust-Claw): at the end of the request's final message
    when that is the user's, else as a user message after it (a tool round ends in tool results).
    The request's copy only: the session's history keeps the user's message as typed."""
    from clawkit import Message

    messages = list(request.messages)
    last = messages[-1] if messages else None
    if last is not None and last.role == "user" and not last.tool_result:
        messages[-1] = last.model_copy(update={"content": (last.content + "\n\n" if last.content else "") + text})
    else:
        messages.append(Message(role="user", content=text, metadata={"kernel_note": True, "healing": True}))
    request.messages = messages


async def _notify(ctx: Any, notes: list[str]) -> None:
    for note in notes:
        await ctx.notice(note.split(".")[0] + ".", source="healing")


@hookimpl
def register_config(register):
    register("healing", HealingConfig)
