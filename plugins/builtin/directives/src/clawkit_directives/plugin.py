"""The directives' implementation: config, session state, the hook bodies and ``/think``.

The entry point names this module: the kernel reads its ``@hookimpl`` functions from the source
and imports it on the first hook call, so ``clawkit --help`` loads no pydantic or clawkit.prompt.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import math
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clawkit import hook_order, hookimpl
from clawkit.prompt import PromptContributor, PromptSection

from .parse import VALUES, Parsed, parse

__all__ = ["DirectivesConfig", "ThinkContributor", "effective", "elevated_until", "parse", "session_directives"]

log = logging.getLogger("clawkit.directives")

STATE_KEY = "directives"
META_KEY = "directives"
ELEVATED_KEY = "elevated_until"
#: session metadata: the channel whose person turned elevation on; only that channel's turns use it
ELEVATED_CHANNEL_KEY = "elevated_channel"
#: message metadata a terminal front-end sets: the pieces of the text that were pasted (bracketed paste)
PASTED_KEY = "pasted"
THINK_TEXT = {
    "minimal": "Answer directly; think only as much as the task strictly needs.",
    "low": "Think briefly before answering: check the key assumption, then answer.",
    "medium": "Think step by step before answering: work out the approach, check it, then answer.",
    "high": ("Think carefully and thoroughly before answering: consider alternatives, check each step and edge case, "
             "verify the result, and only then answer."),
}


class DirectivesConfig(BaseModel):
    """``plugins.directives`` in the agent YAML."""

    model_config = ConfigDict(extra="forbid")

    allow_elevated: bool = Field(False, description="permit /elevated on (a time-limited grant the policy plugins read)")
    elevated_channels: list[str] = Field(
        default_factory=lambda: ["chat", "terminal", "tui"],
        description="channels where a person types the messages: /elevated on is accepted only there")
    allow_noninteractive_elevated: bool = Field(
        False, description="also accept /elevated on in non-interactive runs (clawkit run, pipes, servers): not recommended")
    elevated_minutes: float = Field(30.0, gt=0, le=24 * 60, description="how long /elevated on lasts")
    reasoning_models: list[str] = Field(
        default_factory=lambda: ["o1*", "o3*", "o4*", "gpt-5*", "*claude-3-7*", "*claude-sonnet-4*", "*claude-opus-4*",
                                 "*claude-4*", "*claude-haiku-4*", "*deepseek-r1*", "*deepseek-reasoner*", "*gemini-2.5*", "*grok-3-mini*", "*qwq*"],
        description="model-name globs (matched with and without the provider prefix) that accept reasoning_effort")
    verbose_max_chars: int = Field(2000, ge=100, description="longest tool result shown with /verbose full")


@hookimpl
def register_config(register):
    register("directives", DirectivesConfig)


def _config(ctx: Any) -> DirectivesConfig:
    cfg = ctx.plugin_config("directives") if ctx is not None else None
    if cfg is None:
        return DirectivesConfig()
    if isinstance(cfg, dict):
        return DirectivesConfig(**{k: v for k, v in cfg.items() if k != "enabled"})
    return cfg


# --- session state, read defensively ----------------------------------------------------


def session_directives(session: Any) -> dict[str, str]:
    """The session's persisted directives; anything corrupted is dropped (and logged)."""
    try:
        raw = session.get(META_KEY)
    except Exception as exc:
        log.warning("session %s: unreadable metadata (%r); directives off", getattr(session, "id", "?"), exc)
        return {}
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        log.warning("session %s: corrupted directives %r; using defaults", session.id, raw)
        return {}
    good = {k: v for k, v in raw.items() if k in ("think", "verbose") and isinstance(v, str) and v in VALUES[k] and v != "off"}
    if len(good) != len(raw):
        log.warning("session %s: ignoring invalid directives %r", session.id, {k: v for k, v in raw.items() if k not in good})
    return good


def elevated_until(session: Any) -> float | None:
    """When the session's elevation ends (epoch seconds), or None. Corrupted values are removed (fail closed)."""
    try:
        raw = session.get(ELEVATED_KEY)
    except Exception:
        return None
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        log.warning("session %s: corrupted %s=%r; treating as not elevated", session.id, ELEVATED_KEY, raw)
        _clear_elevated(session)
        return None
    return float(raw) if raw > time.time() else None


def _clear_elevated(session: Any) -> None:
    try:
        if ELEVATED_KEY in session.metadata or ELEVATED_CHANNEL_KEY in session.metadata:
            session.metadata.pop(ELEVATED_KEY, None)
            session.metadata.pop(ELEVATED_CHANNEL_KEY, None)
            session.store.save_metadata(session.id, session.metadata)
    except Exception as exc:
        log.warning("session %s: could not clear %s: %r", session.id, ELEVATED_KEY, exc)


def effective(state: dict[str, Any] | None, session: Any) -> dict[str, str]:
    """Directives in force for this turn: the turn's own (set by message_received) or the session's."""
    if state is not None and isinstance(state.get(STATE_KEY), dict):
        return state[STATE_KEY]
    return session_directives(session) if session is not None else {}


# --- message_received ---------------------------------------------------------------------


def _change(ctx: Any, name: str, value: str, previous: str, scope: str, accepted: bool = True, **extra: Any) -> None:
    ctx.emit("directive.change", directive=name, value=value, previous=previous, scope=scope, accepted=accepted, **extra)


ELEVATED_STATE = "elevated_until"  # ctx.state: the elevation the policy plugins honour this turn


def nested(ctx: Any) -> bool:
    """A sub-agent's run (started by a parent's tool call): never elevated, never elevates."""
    return getattr(ctx, "parent_run_id", None) is not None


def elevated_channel(session: Any) -> str | None:
    try:
        value = session.get(ELEVATED_CHANNEL_KEY)
    except Exception:
        return None
    return value if isinstance(value, str) else None


def elevation_applies(ctx: Any) -> bool:
    """Whether the session's stored elevation counts for this turn: only on the channel that set it
    (a chat's elevation is not used by ``clawkit run``, ``serve``, ``mcp serve`` on the same session),
    and never in a sub-agent. A stored elevation that names no channel counts nowhere (fail closed)."""
    return not nested(ctx) and elevated_channel(ctx.session) == ctx.channel


def current_elevation(ctx: Any, cfg: DirectivesConfig) -> float | None:
    """The session's elevation if it still stands for this turn: a stored grant ends when the agent no
    longer allows ``/elevated`` (it is removed); it holds only on the channel that set it, never in a
    sub-agent (:func:`elevation_applies`); published in ``ctx.state["elevated_until"]`` for the policy plugins."""
    until = elevated_until(ctx.session)
    if until is not None and not cfg.allow_elevated:
        _clear_elevated(ctx.session)
        _change(ctx, "elevated", "off", "on", "session", reason="allow_elevated was revoked in the agent config")
        until = None
    if until is not None and not elevation_applies(ctx):
        until = None  # stays stored for the channel that set it
    if until is None:
        ctx.state.pop(ELEVATED_STATE, None)
    else:
        ctx.state[ELEVATED_STATE] = until
    return until


def _elevate(ctx: Any, cfg: DirectivesConfig, value: str, alone: bool = True) -> str:
    until = elevated_until(ctx.session)
    previous = "on" if until else "off"
    if value == "on":
        refusal = None
        if not cfg.allow_elevated:
            refusal = ("not permitted by the agent config",
                       "Elevated mode is not permitted for this agent (plugins.directives.allow_elevated is false).")
        elif nested(ctx):
            refusal = ("inside a sub-agent",
                       "Elevated mode was NOT turned on: a sub-agent is never elevated (only a person, in their own chat).")
        elif not alone:
            refusal = ("the directive must be the whole message",
                       "Elevated mode was NOT turned on: send /elevated on as a message of its own.")
        elif ctx.channel not in cfg.elevated_channels and not cfg.allow_noninteractive_elevated:
            refusal = (f"not an interactive channel ({ctx.channel})",
                       f"Elevated mode was NOT turned on: it is accepted only in an interactive session "
                       f"({', '.join(cfg.elevated_channels)}), not in {ctx.channel!r}.")
        if refusal is not None:
            _change(ctx, "elevated", "on", previous, "session", accepted=False, reason=refusal[0])
            return refusal[1]
        new_until = time.time() + cfg.elevated_minutes * 60
        ctx.session.set(ELEVATED_CHANNEL_KEY, ctx.channel, now=True)
        ctx.session.set(ELEVATED_KEY, new_until, now=True)
        ctx.state[ELEVATED_STATE] = new_until
        _change(ctx, "elevated", "on", previous, "session", until=new_until, minutes=cfg.elevated_minutes,
                channel=ctx.channel)
        return (f"Elevated mode on for {cfg.elevated_minutes:g} minutes (until {time.strftime('%H:%M', time.localtime(new_until))}), "
                f"in this {ctx.channel} only. It relaxes policy for tools this agent already has; it never adds a tool.")
    if nested(ctx):  # a sub-agent cannot end its parent's elevation either
        _change(ctx, "elevated", "off", previous, "session", accepted=False, reason="inside a sub-agent")
        return "Elevated mode is not changed from inside a sub-agent."
    _clear_elevated(ctx.session)
    ctx.state.pop(ELEVATED_STATE, None)
    _change(ctx, "elevated", "off", previous, "session")
    return "Elevated mode off."


def status_text(ctx: Any, cfg: DirectivesConfig, turn: dict[str, str] | None = None) -> str:
    turn = turn if turn is not None else session_directives(ctx.session)
    until = elevated_until(ctx.session)
    if until and not elevation_applies(ctx):
        elevated = f"off here (on in {elevated_channel(ctx.session) or 'another channel'} only)"
    elif until:
        elevated = f"on ({max(1, round((until - time.time()) / 60))} min left)"
    else:
        elevated = "off" if cfg.allow_elevated else "off (not permitted for this agent)"
    return "\n".join([
        "Active directives:",
        f"- think: {turn.get('think', 'off')}",
        f"- verbose: {turn.get('verbose', 'off')}",
        f"- elevated: {elevated}",
    ])


@hookimpl
@hook_order(20)
def message_received(ctx, message):
    """Strip directives; persist a directive-only message's settings and answer it."""
    pasted = message.metadata.get(PASTED_KEY) if isinstance(message.metadata, dict) else None
    # pasted text is data, never a directive (a paste cannot elevate the session)
    parsed: Parsed = parse(message.content, pasted if isinstance(pasted, list) else ())
    persisted = session_directives(ctx.session)
    if not parsed.directives and elevated_until(ctx.session) is None:  # most messages: no config to look at
        ctx.state.pop(ELEVATED_STATE, None)
        ctx.state[STATE_KEY] = persisted
        return None
    cfg = _config(ctx)
    current_elevation(ctx, cfg)
    if not parsed.directives:
        ctx.state[STATE_KEY] = persisted
        return None
    session_scope = parsed.only_directives
    turn = dict(persisted)
    settings: list[str] = []
    notes: list[str] = []
    show_status = False
    for name, value in parsed.directives:
        if name == "status":
            show_status = True
        elif name == "elevated":
            # only a message that is the directive and nothing else elevates: not one pasted inside other text
            note = _elevate(ctx, cfg, value, alone=session_scope and len(parsed.directives) == 1)
            notes.append(note)
            if not session_scope:
                ctx.state.setdefault("notices", []).append(note)
        else:
            previous = turn.get(name, "off")
            turn[name] = value
            # inline or alone, a directive holds for the conversation until changed
            if value == "off":
                persisted.pop(name, None)
            else:
                persisted[name] = value
            _change(ctx, name, value, previous, "session")
            settings.append(f"{name} {value}")
    ctx.state[STATE_KEY] = {k: v for k, v in turn.items() if v != "off"}
    if settings:
        ctx.session.set(META_KEY, persisted)
    if session_scope:
        lines = (["Set for this session: " + ", ".join(settings) + "."] if settings else []) + notes
        if show_status:
            lines.append(status_text(ctx, cfg, ctx.state[STATE_KEY]))
        ctx.state["reply"] = "\n".join(lines)
    message.content = parsed.text
    return parsed.text


# --- /think --------------------------------------------------------------------------------


def supports_reasoning(model: str, patterns: list[str]) -> bool:
    name = model.lower()
    short = name.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, p.lower()) or fnmatch.fnmatchcase(short, p.lower()) for p in patterns)


@hookimpl
@hook_order(20)
def before_llm_call(ctx, request):
    """Set the provider's reasoning effort for /think, where the model accepts it."""
    level = effective(ctx.state, ctx.session).get("think")
    if not level or level == "off":
        return None
    if supports_reasoning(request.model, _config(ctx).reasoning_models):
        # "minimal" is a gpt-5 effort; older reasoning models take low/medium/high
        request.reasoning_effort = "low" if level == "minimal" and "gpt-5" not in request.model else level
        request.metadata["directives.think"] = level
    return None


class ThinkContributor(PromptContributor):
    """The reasoning instruction for the active /think level."""

    id = "directives.think"
    priority = 60

    def should_contribute(self, ctx) -> bool:
        return effective(ctx.state, ctx.session).get("think", "off") != "off"

    def contribute(self, ctx):
        level = effective(ctx.state, ctx.session).get("think", "medium")
        return PromptSection("Reasoning", THINK_TEXT.get(level, THINK_TEXT["medium"]))


_THINK = ThinkContributor()  # stateless: one instance serves every agent and turn


@hookimpl
def register_prompt_contributor(register, agent):
    register(_THINK)


# --- /verbose ------------------------------------------------------------------------------


def _new_usage(ctx: Any) -> list[tuple[int, str, int, int]]:
    """Usage rows of this run not reported yet (the kernel records one per model call)."""
    last = ctx.state.get("directives.usage_seen", 0)
    try:
        ctx.session.store.flush()  # usage rows are queued until the next commit
        rows = ctx.session.store.conn.execute(
            "SELECT id, model, prompt_tokens, completion_tokens FROM usage WHERE session_id = ? AND run_id = ? AND id > ? ORDER BY id",
            (ctx.session.id, ctx.run_id, last),
        ).fetchall()
    except Exception as exc:
        log.warning("cannot read token usage: %r", exc)
        return []
    if rows:
        ctx.state["directives.usage_seen"] = rows[-1][0]
    return rows


def _usage_line(rows: list[tuple[int, str, int, int]]) -> str:
    return "; ".join(f"tokens: {p:,} in / {c:,} out ({m})" for _, m, p, c in rows)


@hookimpl
@hook_order(20)
def message_sending(ctx, outbound):
    """Show tool calls (and with ``full`` their results) and token usage for /verbose."""
    level = effective(ctx.state, ctx.session).get("verbose", "off")
    if level not in ("on", "full"):
        return None
    if outbound.kind == "tool_call_display":
        call = outbound.metadata.get("call")
        text = f"tool call: {call.name}({json.dumps(call.arguments, default=str)})" if call is not None else outbound.content
        usage = _usage_line(_new_usage(ctx))
        outbound.cancelled = False
        return text + (f"\n[{usage}]" if usage else "")
    if outbound.kind == "tool_result_display" and level == "full":
        cap = _config(ctx).verbose_max_chars
        text = outbound.content
        if len(text) > cap:
            text = text[:cap] + f"\n[... {len(text) - cap:,} more characters not shown]"
        outbound.cancelled = False
        result = outbound.metadata.get("result")
        return f"tool result{' (error)' if result is not None and result.is_error else ''}:\n{text}"
    if outbound.kind == "notice" and outbound.metadata.get("verbose_only"):
        outbound.cancelled = False  # plugins' interventions (stop-and-think, budget warnings)
        return None
    if outbound.kind == "final_reply":
        usage = _usage_line(_new_usage(ctx))
        if usage:
            return outbound.content + f"\n\n[{usage}]"
    return None
