"""The truncator's implementation: config, cutting results, trimming history, ``read_tool_output``.

The entry point names this module: the kernel reads its ``@hookimpl`` functions from the source
and imports it on the first hook call, so ``clawkit --help`` loads no pydantic or sqlite3.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from clawkit import LlmRequest, ToolCall, ToolResult, hook_order, hookimpl

from . import store
from .cut import CutPlan, char_plan, plan_cut
from .history import message_tokens, trim_history
from clawkit.context import result_reader as _result_reader
from clawkit.tokens import TokenCounter, get_counter, max_request_tokens

log = logging.getLogger("clawkit.truncator")

READ_TOOL = "read_tool_output"
DEFAULT_READ_CHARS = 20_000


class TruncatorConfig(BaseModel):
    """``plugins.truncator`` in the agent YAML."""

    model_config = ConfigDict(extra="forbid")

    max_share: float | None = Field(None, gt=0, le=1, description="largest share of the window one tool result may take "
                                    "(default: the agent's context.shares.tool_results, 0.3)")
    max_tokens: int | None = Field(None, gt=0, description="absolute token budget per tool result (overrides max_share)")
    keep_tail: Literal["auto", "always", "never"] = Field(
        "always", description="keep the end of the output too (errors and summaries are there): always (default), "
                              "auto = only when it carries errors, tracebacks, summaries or a closing brace, never")
    tail_share: float = Field(0.3, ge=0, lt=1, description="share of the budget given to the tail when one is kept")
    encoding: Literal["auto", "cl100k_base", "o200k_base"] = Field("auto", description="tiktoken encoding; auto picks by model")
    store_full: bool = Field(True, description="keep the full output of truncated calls in the session database")
    store_max_chars: int = Field(2_000_000, gt=0, description="characters of one output kept at most (a result "
                                 "larger than what a tool may bring in, e.g. a 50 MB MCP result, is kept only this far)")
    trim_history: bool = Field(True, description="trim old tool results in the request when the history fills the window")
    history_trigger: float = Field(0.6, gt=0, le=1, description="start trimming when the request exceeds this share of the window")
    history_target: float = Field(0.45, gt=0, le=1, description="trim until the request is under this share of the window")
    history_keep_turns: int = Field(3, ge=1, description="the last N user turns are never trimmed")
    history_soft_tokens: int = Field(400, ge=50, description="tokens an old tool result keeps when soft-trimmed")


@hookimpl
def register_config(register):
    register("truncator", TruncatorConfig)


def _config(ctx: Any) -> TruncatorConfig:
    cfg = ctx.plugin_config("truncator") if ctx is not None else None
    if cfg is None:
        return TruncatorConfig()
    if isinstance(cfg, dict):
        return TruncatorConfig(**{k: v for k, v in cfg.items() if k != "enabled"})
    return cfg


def context_window(ctx: Any, request: LlmRequest | None = None) -> int:
    window = request.metadata.get("context_window") if request is not None else None
    if window:
        return int(window)
    agent = ctx.agent
    return int(getattr(agent.model, "context_window", None) or agent.limits.context_window)


def budget_tokens(cfg: TruncatorConfig, window: int, ctx: Any = None) -> int:
    """Tokens one tool result may take: this section's cap, else the agent's context budget."""
    share = cfg.max_share
    if share is None:
        context = getattr(getattr(ctx, "agent", None), "context", None)
        share = context.shares.tool_results if context is not None else 0.3
    return cfg.max_tokens or max(64, int(window * share))


def counter_for(ctx: Any, cfg: TruncatorConfig) -> TokenCounter:
    return get_counter(ctx.agent.model.name, None if cfg.encoding == "auto" else cfg.encoding)


# --- cutting one result ------------------------------------------------------------------


def marker_text(plan: CutPlan, output_id: str | None, *, readable: bool, stored_chars: int | None = None) -> str:
    """The note between head and tail: what was removed and how to get it."""
    approx = "" if plan.exact else "~"
    parts = [
        f"[... clawkit truncated this output: {approx}{plan.removed_tokens:,} of {approx}{plan.total_tokens:,} tokens "
        f"removed (characters {plan.head_end:,}–{plan.tail_start:,} of {plan.total_chars:,}) ..."
    ]
    if plan.note:
        parts.append(f" ({plan.note})")
    if output_id and readable:
        stored = "" if stored_chars is None or stored_chars >= plan.total_chars else f" (the first {stored_chars:,} characters are kept)"
        parts.append(
            f" Full output saved{stored}: call {READ_TOOL}(output_id=\"{output_id}\", offset={plan.head_end}, limit={DEFAULT_READ_CHARS})"
            f" to read on from the cut, or pass pattern=\"regex\" to get only matching lines."
        )
    elif output_id:
        parts.append(f" Full output saved as {output_id} (the {READ_TOOL} tool is not enabled for this agent).")
    parts.append(" Or rerun the command with a filter (grep, head, tail, sed -n, jq) to see other parts.]")
    return "".join(parts) + "\n"


def cut_result(ctx: Any, call: ToolCall, result: ToolResult, cfg: TruncatorConfig, budget: int) -> ToolResult | None:
    text = result.content
    counter = counter_for(ctx, cfg)
    try:
        plan = plan_cut(text, budget, counter, keep_tail=cfg.keep_tail, tail_share=cfg.tail_share)
    except BaseException as exc:  # never crash a turn over a count (pyo3 panics are BaseException)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        log.warning("truncation failed for %s, using a character budget: %r", call.name, exc)
        tail = cfg.tail_share if cfg.keep_tail == "always" else 0.0
        plan = char_plan(text, budget, tail, note=f"token counts estimated from characters: {type(exc).__name__}")
    if plan is None:
        return None
    output_id = None
    stored_chars = None
    if cfg.store_full and call.name != READ_TOOL:
        try:
            output_id = store.save(ctx.session.store, ctx.session.id, call.id, call.name, text, cfg.store_max_chars)
            stored_chars = min(len(text), cfg.store_max_chars)
        except Exception as exc:
            log.warning("could not keep the full output of %s: %r", call.name, exc)
            plan.note = (plan.note + "; " if plan.note else "") + "the full output could not be stored"
    readable = ctx.tools.get(READ_TOOL) is not None if getattr(ctx, "tools", None) is not None else False
    marker = marker_text(plan, output_id, readable=readable, stored_chars=stored_chars)
    head = text[: plan.head_end]
    content = head + ("" if head.endswith("\n") or not head else "\n") + marker + text[plan.tail_start :]
    meta = {
        **result.metadata,
        "truncated": True,
        "original_chars": plan.total_chars,
        "removed_tokens": plan.removed_tokens,
        "tokens_exact": plan.exact,
    }
    if output_id:
        meta["output_id"] = output_id
    ctx.emit("truncator.truncated", tool=call.name, call_id=call.id, output_id=output_id, original_chars=plan.total_chars,
             kept_chars=len(content), removed_tokens=plan.removed_tokens, budget_tokens=budget)
    return result.model_copy(update={"content": content, "metadata": meta})


# id(agent config) -> (agent config, its plugins, (section, tokens one result may take, the agent's window)):
# looked up once per agent for every tool result and model call (config objects are not changed once loaded;
# a reloaded config is a new object, and so is a replaced ``plugins``)
_AGENTS: dict[int, tuple[Any, Any, tuple[Any, int, int]]] = {}


def _settings(ctx: Any) -> tuple[Any, int, int]:
    """``(section, result budget, window)``: :func:`_config`, :func:`budget_tokens` and :func:`context_window`
    for the agent, worked out once per config."""
    agent = ctx.agent
    hit = _AGENTS.get(id(agent))
    if hit is not None and hit[0] is agent and hit[1] is getattr(agent, "plugins", None):
        return hit[2]
    cfg = _config(ctx)
    window = context_window(ctx)
    out = (cfg, budget_tokens(cfg, window, ctx), window)
    if len(_AGENTS) >= 256:
        _AGENTS.clear()
    _AGENTS[id(agent)] = (agent, getattr(agent, "plugins", None), out)
    return out


@hookimpl
@hook_order(20)
def after_tool_call(ctx, call, result):
    """Cut a result over its budget before it enters the context."""
    content = result.content
    if not isinstance(content, str) or not content:
        return None
    if _result_reader.get() is not None:
        return None  # a host proxy reads it, not the model: the context budget does not apply
    cfg, budget, _ = _settings(ctx)
    if len(content) * 4 <= budget:  # plan_cut's first test, before a counter is made: fits
        return None
    return cut_result(ctx, call, result, cfg, budget)


# --- old results in history --------------------------------------------------------------


@hookimpl
@hook_order(50)
def before_llm_call(ctx, request):
    """Trim old tool results in the request once it fills the window."""
    cfg, _, window = _settings(ctx)
    if not cfg.trim_history or not request.messages:
        return None
    window = int(request.metadata.get("context_window") or window)
    if max_request_tokens(request) < window * cfg.history_trigger:  # most turns: no tokenizer at all
        return None
    counter = counter_for(ctx, cfg)
    fixed = counter.count(request.system) + sum(counter.count(t.model_dump_json()) for t in request.tools)
    trimmed = trim_history(request.messages, window, counter, fixed_tokens=fixed, trigger=cfg.history_trigger,
                           target=cfg.history_target, keep_turns=cfg.history_keep_turns, soft_tokens=cfg.history_soft_tokens)
    if trimmed is None:
        return None
    messages, report = trimmed
    request.messages = messages
    ctx.emit("truncator.history_trimmed", tokens_before=report.before, tokens_after=report.after,
             soft_trimmed=len(report.soft), cleared=len(report.cleared), window=window)
    return request


# --- reading stored outputs back ---------------------------------------------------------


def linear_regex(pattern: str):
    """``pattern`` compiled by RE2 (linear time: a model-chosen pattern cannot hang the turn).
    Backreferences and look-around, which have no linear-time algorithm, are refused."""
    import re2

    if len(pattern) > 2000:
        raise ValueError("longer than 2000 characters")
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"{why} (patterns run in linear time: no backreferences or look-around)") from None


def read_tool_output(ctx, output_id: str, offset: int = 0, limit: int = DEFAULT_READ_CHARS, pattern: str | None = None) -> str:
    """Read part of a tool output that was truncated (the marker names its output_id).

    Args:
        output_id: the id from the truncation marker, like "out_1a2b3c4d5e6f".
        offset: character offset to start reading at (the marker says where the cut began).
        limit: how many characters to return at most.
        pattern: optional regular expression; when given, only matching lines from offset on are returned.
    """
    from clawkit.tools import ToolError

    cfg = _config(ctx)
    cap = max(1000, int(budget_tokens(cfg, context_window(ctx), ctx) * 3))  # ~3 chars per token keeps it within budget
    limit = max(1, min(int(limit), cap))
    offset = max(0, int(offset))
    conn = ctx.session.store.conn
    try:
        if pattern:
            try:
                rx = linear_regex(pattern)
            except (re.error, ValueError) as exc:
                raise ToolError(f"invalid pattern {pattern!r}: {exc}") from None
            lines, resume, first = store.grep(conn, ctx.session.id, output_id, rx, offset, limit)
            more = f" Continue with offset={resume}." if resume is not None else " No more matches."
            head = f"[{output_id}: {len(lines)} lines matching {pattern!r} from offset {offset:,} of {first.chars:,} characters.{more}]"
            return head + "\n" + "\n".join(lines)
        rng = store.read_range(conn, ctx.session.id, output_id, offset, limit)
    except store.OutputNotFound as exc:
        raise ToolError(str(exc)) from None
    end = offset + len(rng.text)
    nxt = f" Next: offset={rng.next_offset}." if rng.next_offset is not None else " End of output."
    return f"[{output_id} ({rng.tool}): characters {offset:,}–{end:,} of {rng.chars:,}.{nxt}]\n{rng.text}"


@hookimpl
def register_tools(register, agent):
    register(read_tool_output, name=READ_TOOL, risk="safe")


__all__ = ["TruncatorConfig", "read_tool_output", "marker_text", "budget_tokens", "message_tokens"]


@hookimpl
def forget_sessions(store, session_ids):
    """The full tool outputs stored for these sessions (``read_tool_output``'s pages) go with them."""
    from clawkit.forget import delete_keyed
    from clawkit.storage import table_names

    from . import store as store_mod  # the parameter shadows the module's name
    store_mod.wait()  # an output still being written lands before it is deleted
    conn, ids = store.conn, list(session_ids)
    chunks = 0
    if store_mod.CHUNKS in table_names(conn) and ids:
        cur = conn.execute(f"DELETE FROM {store_mod.CHUNKS} WHERE output_id IN (SELECT id FROM {store_mod.TABLE}"
                           f" WHERE session_id IN ({','.join('?' * len(ids))}))", tuple(ids))
        chunks = max(int(cur.rowcount or 0), 0)
    return {"outputs": delete_keyed(conn, store_mod.TABLE, "session_id", ids), "output_chunks": chunks}
