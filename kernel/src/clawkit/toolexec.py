"""Tool calls inside a turn: gate (``before_tool_call``), approval, execution,
post-processing (``after_tool_call``), persistence — several calls concurrently.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from .approvals import Answer
from .context import current_call, result_reader
from .hooks import HookFailure, isawaitable, maybe_await
from .provenance import mark_result
from .types import Decision, Message, Outbound, ToolCall, ToolResult

if TYPE_CHECKING:
    from .context import TurnContext
    from .loop import Agent, TurnResult

REPEAT_LIMIT = 3


def _error(call: ToolCall, text: str, **metadata: Any) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=f"Error: {text}", is_error=True, metadata=metadata)


class ToolExecutor:
    def __init__(self, agent: "Agent"):
        self.agent = agent
        self.hooks = agent.hooks

    async def run_calls(self, ctx: "TurnContext", calls: list[ToolCall], result: "TurnResult", deliver) -> str | None:
        """Run one model response's calls; returns a stop note when the loop must end."""
        repeats = ctx.state.setdefault("_repeats", {"last": None, "count": 0})
        stop: str | None = None
        runnable: list[ToolCall] = []
        for call in calls:
            sig = call.signature()
            repeats["count"] = repeats["count"] + 1 if sig == repeats["last"] else 1
            repeats["last"] = sig
            if repeats["count"] >= REPEAT_LIMIT:
                stop = (
                    f"Stopped: the call {call.name} with the same arguments was repeated {REPEAT_LIMIT} times in a row."
                )
                result.stop_reason = "repeated_call"
            runnable.append(call)
        in_thread = len(runnable) > 1
        if ctx.steps is not None:
            ctx.steps.reserve(ctx, runnable)
        if stop is not None:
            outcomes = [
                _error(c, "not run: repeated identical call", repeated=True) if i == len(runnable) - 1 else None
                for i, c in enumerate(runnable)
            ]
            pending = [self.one(ctx, c, deliver, in_thread) for c, o in zip(runnable, outcomes) if o is None]
            done = iter(await asyncio.gather(*pending))
            results = [o if o is not None else next(done) for o in outcomes]
        elif len(runnable) == 1:
            results = [await self.one(ctx, runnable[0], deliver, False)]
        else:
            results = list(await asyncio.gather(*(self.one(ctx, c, deliver, in_thread) for c in runnable)))
        ctx.tool_calls += len(runnable)
        halt = ctx.state.get("stop_turn")
        if stop is None and halt:
            # a plugin (a sequence rule blocking the same call again and again, a budget) ends the turn
            stop = halt if isinstance(halt, str) else "Stopped by a plugin."
            result.stop_reason = ctx.state.get("stop_reason", "stopped_by_plugin")
        from .usage import add_usage as _add_usage

        for call, res in zip(runnable, results):
            self.agent._append(ctx.session, Message(role="tool", content=res.content, tool_result=res), ctx)
            if res.metadata.get("usage"):  # a tool that ran models itself (a sub-agent): its usage rolls up
                _add_usage(result.usage, res.metadata["usage"])
                _add_usage(ctx.usage, res.metadata["usage"])  # and counts against the run's budgets
            result.tool_calls.append(
                {"id": call.id, "name": call.name, "arguments": call.arguments, "is_error": res.is_error, "blocked": res.metadata.get("blocked", False)}
            )
        return stop

    async def one(self, ctx: "TurnContext", call: ToolCall, deliver, in_thread: bool, *, reader: str | None = None) -> ToolResult:
        """One call through the whole pipeline (gates, approval, execution, ``after_tool_call``, audit).
        ``reader``: who reads the result when it is not the model (a Wasm host proxy); see
        :data:`clawkit.context.result_reader`."""
        token = current_call.set(call)
        reading = result_reader.set(reader)
        started = time.time()
        res: ToolResult | None = None
        try:
            res = await self._one(ctx, call, deliver, in_thread)
            return res
        finally:
            current_call.reset(token)
            result_reader.reset(reading)
            status = "cancelled" if res is None else "blocked" if res.metadata.get("blocked") else "error" if res.is_error else "ok"
            ctx.session.store.step(ctx.run_id, call.id, "tool", call.name, started, time.time(), status)

    async def _one(self, ctx: "TurnContext", call: ToolCall, deliver, in_thread: bool) -> ToolResult:
        tool = self.agent.tools.get(call.name)
        if tool is None:
            # refused before any gate runs: still an audited decision (the policy records tool.blocked)
            registered = call.name in self.agent.tools.tools
            reason = "not in the agent's tools allowlist" if registered else "unknown tool"
            ctx.emit("tool.blocked", tool=call.name, call_id=call.id, reason=reason, plugin="kernel",
                     trace_id=ctx.trace_id, task_id=ctx.task_id)
            known = ", ".join(t.name for t in self.agent.tools.offered(ctx)) or "none"
            return _error(call, f"unknown tool {call.name!r}; available tools: {known}", blocked=True)
        decision = await self.gate(ctx, call)
        if decision is not None and decision.action == "block":
            ctx.emit("tool.blocked", tool=call.name, call_id=call.id, reason=decision.reason, plugin=decision.plugin)
            return _error(call, f"blocked by {decision.plugin or 'policy'}: {decision.reason}", blocked=True)
        if decision is not None and decision.action == "require_approval":
            answer = await self.answer(ctx, call, decision.reason)
            approved, who = answer.approved, answer.by
            ctx.emit("tool.approval", tool=call.name, call_id=call.id, reason=decision.reason, approved=approved, by=who,
                     approver=answer.identity or None, call_hash=answer.call_hash)
            if not approved:
                return _error(call, f"not approved ({decision.reason}); approval was denied by {who}", blocked=True, denied=True)
        if deliver is not None and self.hooks.has("message_sending"):
            # tool displays are quiet by default; /verbose-style plugins un-cancel them
            shown = Outbound(kind="tool_call_display", content=f"{call.name}({call.arguments})", cancelled=True, metadata={"call": call})
            await self.agent._send(ctx, shown, deliver)
        limit = float(getattr(self.agent.config.limits, "tool_timeout", 0) or 0)

        async def execute() -> ToolResult:
            if not limit:
                return await tool.run(ctx, call, in_thread=in_thread)
            try:
                async with asyncio.timeout(limit):  # no task of its own, unlike wait_for
                    return await tool.run(ctx, call, in_thread=in_thread)
            except TimeoutError:
                ctx.emit("tool.timeout", tool=call.name, call_id=call.id, seconds=limit)
                return _error(call, f"{call.name} did not finish within {limit:g} s (limits.tool_timeout); it was abandoned", timed_out=True)

        store = ctx.session.store
        if not store.durable():  # the call is on disk before it runs (the store commits off-thread)
            await store.wait_durable()
        res = await (execute() if ctx.steps is None else ctx.steps.tool(ctx, call, execute))
        if "__directives" in res.content:  # instructions for the harness: never shown to the model
            from .resultdirectives import strip

            res = strip(res)
        if self.hooks.has("after_tool_call"):
            res = await self.hooks.call_chain("after_tool_call", "result", ToolResult, ctx=ctx, call=call, result=res)
        # provenance: outside content entered the context (whatever the scanners thought of it); the
        # gates read it before the next call that can send data off the machine (clawkit.provenance)
        mark_result(ctx, call, res, tool.definition.trusted_output)
        if deliver is not None and self.hooks.has("message_sending"):
            shown = Outbound(kind="tool_result_display", content=res.content, cancelled=True, metadata={"call": call, "result": res})
            await self.agent._send(ctx, shown, deliver)
        return res

    async def gate(self, ctx: "TurnContext", call: ToolCall) -> Decision | None:
        """Every ``before_tool_call`` runs; any block wins; an exception blocks (fail closed)."""
        approvals: list[Decision] = []
        for plugin, fn, argnames in self.hooks.impls("before_tool_call"):
            try:
                res = fn(**{k: {"ctx": ctx, "call": call}[k] for k in argnames})
                if isawaitable(res):
                    res = await res
                if res is not None and not isinstance(res, Decision):
                    raise TypeError(f"before_tool_call must return a Decision or None, got {type(res).__name__}")
            except Exception as exc:
                self.hooks.report("before_tool_call", plugin, exc)
                return Decision(action="block", reason=f"the {plugin} gate failed ({type(exc).__name__}: {exc}); failing closed", plugin=plugin)
            if res is None or res.action == "allow":
                continue
            res.plugin = res.plugin or plugin
            if res.action == "block":
                return res
            approvals.append(res)
        if approvals:
            reason = "; ".join(f"{d.plugin}: {d.reason}" for d in approvals)
            return Decision(action="require_approval", reason=reason, plugin=approvals[0].plugin)
        return None

    async def approve(self, ctx: "TurnContext", call: ToolCall, reason: str) -> tuple[bool, str]:
        """(approved, who answered) — :meth:`answer` without the details."""
        answer = await self.answer(ctx, call, reason)
        return answer.approved, answer.by

    async def answer(self, ctx: "TurnContext", call: ToolCall, reason: str) -> Answer:
        """Ask the ``request_approval`` hooks, then the agent's approver; who answered, as an :class:`Answer`
        (an approver returning a bool is named by its ``approver_name`` attribute, else ``approver``)."""
        try:
            answer = await self.hooks.call_first("request_approval", fail_closed=True, ctx=ctx, call=call, reason=reason)
        except HookFailure as exc:
            return Answer(False, f"{exc.plugin} (failed: {exc.error})")
        if answer is not None:
            return answer if isinstance(answer, Answer) else Answer(bool(answer), "plugin", {"kind": "plugin"})
        approver = self.agent.approver
        if approver is None:
            return Answer(False, "nobody (non-interactive run)", {"kind": "none"})
        name = str(getattr(approver, "approver_name", None) or "approver")
        try:
            answer = await maybe_await(approver(call, reason, ctx))
        except Exception as exc:
            return Answer(False, f"{name} (failed: {exc})", {"kind": "approver", "name": name})
        if isinstance(answer, Answer):
            return answer
        return Answer(bool(answer), name, {"kind": "approver", "name": name})
