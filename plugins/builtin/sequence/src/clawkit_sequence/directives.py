"""Tool-response directives (seed 001, Approach C): recorded as session flags, enforced on the next call.

The kernel strips a result's ``__directives`` block before anything else sees it and hands
it over as ``result.metadata["directives"]`` (:mod:`clawkit.resultdirectives`). Here:

* ``after_tool_call`` — a block from a *trusted* tool becomes a session flag (session
  metadata ``sequence.directives``): ``requireBeforeNext: [tool…]`` (those tools must run,
  successfully, before any other call), ``escalateToOwner: true`` (the next call needs the
  owner's approval), ``expires: {calls: N}`` (N more calls that run; blocked ones do not
  count) or ``{turns: N}`` (default ``{turns: 1}``: the end of the turn that set it). A block from an untrusted source — the tool marked its result
  untrusted (MCP, web) or matches ``directives.untrusted_tools`` (``web_*``, ``mcp__*``,
  ``agent_*``…) and not ``directives.trusted_tools`` — is dropped (event
  ``sequence.directive_ignored``). A successful call of a required tool satisfies it; a
  failed one does not (the flag stays until satisfied or expired).
* ``before_tool_call`` — a pending ``requireBeforeNext`` blocks every other tool with a
  reason naming the directive and the tool that set it; ``escalateToOwner`` asks for
  approval once (the next call), then is spent.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clawkit.types import Decision, ToolCall, ToolResult

META_KEY = "sequence.directives"
DEFAULT_UNTRUSTED = ["web_fetch", "web_search", "http_*", "mcp__*", "agent_*", "browser_*"]


class DirectivesConfig(BaseModel):
    """``plugins.sequence.directives``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="obey __directives blocks in tool results (they are always stripped)")
    trusted_tools: list[str] = Field(default_factory=list, description="tools (globs) whose directives are obeyed even "
                                     "when untrusted by default (an MCP server you trust: mcp__mine__*)")
    untrusted_tools: list[str] = Field(default_factory=lambda: list(DEFAULT_UNTRUSTED),
                                       description="tools (globs) whose results can never set directives")


def _match(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _flags(ctx: Any) -> list[dict[str, Any]]:
    return [dict(f) for f in ctx.session.get(META_KEY) or [] if isinstance(f, dict)]


def _save(ctx: Any, flags: list[dict[str, Any]]) -> None:
    ctx.session.set(META_KEY, flags)


def _parse(block: Any, tool: str) -> tuple[dict[str, Any] | None, str | None]:
    """(flag, None) for a valid block, (None, why) for a bad one."""
    if not isinstance(block, dict):
        return None, "the __directives block is not an object"
    unknown = sorted(set(block) - {"requireBeforeNext", "escalateToOwner", "expires"})
    if unknown:
        return None, f"unknown directive(s) {', '.join(unknown)}"
    req = block.get("requireBeforeNext") or []
    if isinstance(req, str):
        req = [req]
    if not isinstance(req, list) or not all(isinstance(t, str) and t for t in req):
        return None, "requireBeforeNext must be a list of tool names"
    esc = block.get("escalateToOwner", False)
    if not isinstance(esc, bool):
        return None, "escalateToOwner must be true or false"
    exp = block.get("expires") or {"turns": 1}
    if (not isinstance(exp, dict) or len(exp) != 1 or next(iter(exp)) not in ("calls", "turns")
            or not isinstance(next(iter(exp.values())), int) or next(iter(exp.values())) < 1):
        return None, "expires must be {calls: N} or {turns: N} with N >= 1"
    if not req and not esc:
        return None, "the block sets nothing"
    kind, n = next(iter(exp.items()))
    return {"set_by": tool, "require": list(dict.fromkeys(req)), "escalate": esc, "expires": kind, "left": n}, None


def after_tool_call(ctx: Any, call: ToolCall, result: ToolResult, cfg: DirectivesConfig) -> None:
    flags = _flags(ctx)
    changed = False
    for f in flags:  # {calls: N}: N calls that ran (blocked ones do not count)
        if f["expires"] == "calls":
            f["left"] -= 1
            changed = True
    if not result.is_error:  # a successful required call satisfies it
        for f in flags:
            if call.name in f["require"]:
                f["require"].remove(call.name)
                changed = True
        if changed:
            ctx.emit("sequence.directive_satisfied", tool=call.name, call_id=call.id)
    carried = result.metadata.get("directives")
    if isinstance(carried, dict) and cfg.enabled:
        untrusted = (carried.get("untrusted_source") or _match(call.name, cfg.untrusted_tools)) and not _match(call.name, cfg.trusted_tools)
        flag, why = (None, "its source is untrusted") if untrusted else _parse(carried.get("block"), call.name)
        if flag is None:
            ctx.emit("sequence.directive_ignored", tool=call.name, call_id=call.id, reason=why)
        else:
            flag["call_id"], flag["run_id"] = call.id, ctx.run_id
            flags.append(flag)
            changed = True
            ctx.emit("sequence.directive_set", tool=call.name, call_id=call.id, require=flag["require"],
                     escalate=flag["escalate"], expires={flag["expires"]: flag["left"]})
    if changed:
        _save(ctx, [f for f in flags if (f["require"] or f["escalate"]) and f["left"] > 0])


def before_tool_call(ctx: Any, call: ToolCall) -> Decision | None:
    flags = _flags(ctx)
    if not flags:
        return None
    live = []
    for f in flags:  # expiry: turns pass when a call comes from another run; calls count every call asked for
        if f["expires"] == "turns" and f.get("run_id") != ctx.run_id:
            f["left"] -= 1
            f["run_id"] = ctx.run_id
        if f["left"] <= 0:
            ctx.emit("sequence.directive_expired", set_by=f["set_by"], call_id=f.get("call_id"))
            continue
        live.append(f)
    decision = None
    for f in live:
        if f["require"] and call.name not in f["require"]:
            decision = Decision.block(
                f"the directive requireBeforeNext set by {f['set_by']} (call {f.get('call_id')}) requires "
                f"{', '.join(f['require'])} to run successfully before {call.name}; call it first")
            break
    if decision is None:
        for f in live:
            if f["escalate"]:
                f["escalate"] = False  # one question: the next call
                decision = Decision.require_approval(
                    f"the directive escalateToOwner set by {f['set_by']} (call {f.get('call_id')}) asks the owner to approve {call.name}")
                break
    if live != flags or decision is not None:
        _save(ctx, [f for f in live if f["require"] or f["escalate"]])
    if decision is not None:
        ctx.emit("sequence.directive_enforced", tool=call.name, call_id=call.id, action=decision.action, reason=decision.reason)
    return decision
