"""The per-turn context handed to hooks and tools."""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .types import Event, Outbound, Usage, new_id

log = logging.getLogger("clawkit.context")

if TYPE_CHECKING:
    from .config import AgentConfig
    from .hooks import HookRunner
    from .sessions import Session
    from .tools import ToolRegistry


current_call: ContextVar[Any] = ContextVar("clawkit_current_call", default=None)
"""The :class:`ToolCall` being gated/executed in this task (concurrent calls each see their own)."""

incoming_traceparent: ContextVar[str | None] = ContextVar("clawkit_incoming_traceparent", default=None)
"""The W3C ``traceparent`` of the request that started the turns of this task (``clawkit serve``
sets it from the request header, ``""`` when there was none); None outside a served request.
Telemetry makes such a run a child of the caller's span."""

result_reader: ContextVar[str | None] = ContextVar("clawkit_result_reader", default=None)
"""Who reads the result of the call being executed in this task: None is the model; a host
proxy names itself (``"wasm:text_stats"``). ``after_tool_call`` plugins that shape a result
*for the model* (cutting it to the context budget, wrapping it as untrusted data) leave it
alone for another reader; auditing, redaction and provenance apply to every reader."""


class TurnContext:
    """What one turn knows: the agent, the session, the run ids and turn state.

    ``state`` is a scratch dict for this turn only (plugins namespace their keys);
    durable things go in ``session.set(key, value)``. ``emit(type, **data)`` reports
    an event: persisted on the session and passed to every ``on_event``.
    """

    __slots__ = (
        "agent", "session", "hooks", "tools", "trace_id", "task_id", "run_id", "parent_run_id", "parent_step_id",
        "state", "channel", "_agent_obj", "usage", "model_calls", "tool_calls", "started", "deliver", "_at_end", "steps",
    )

    def __init__(
        self,
        agent: "AgentConfig",
        session: "Session",
        hooks: "HookRunner",
        tools: "ToolRegistry",
        *,
        trace_id: str | None = None,
        task_id: str | None = None,
        channel: str = "cli",
        agent_obj: Any = None,
        parent_run_id: str | None = None,
        parent_step_id: str | None = None,
    ):
        self.agent = agent
        self.session = session
        self.hooks = hooks
        self.tools = tools
        self.trace_id = trace_id or new_id("trace")
        self.task_id = task_id or new_id("task")
        self.run_id = new_id("run")
        # set on a sub-agent's turn: the run and the tool-call step of the agent that spawned it
        self.parent_run_id = parent_run_id
        self.parent_step_id = parent_step_id
        self.state: dict[str, Any] = {}
        self.channel = channel
        self._agent_obj = agent_obj
        # running totals of this run, for plugins that watch budgets or progress
        self.usage = Usage()
        self.model_calls = 0
        self.tool_calls = 0
        self.started = time.monotonic()
        self.deliver: Any = None  # the turn's delivery callback (None: nobody is listening)
        self._at_end: list[Any] = []
        self.steps: Any = None  # a clawkit.steps.StepRunner when an engine checkpoints this turn (durable_steps)

    @property
    def step_id(self) -> str | None:
        """The current tool call's id (the step), inside gates, tools and ``after_tool_call``."""
        call = current_call.get()
        return call.id if call is not None else None

    @property
    def idempotency_key(self) -> str | None:
        """Inside a durable tool step: a key that stays the same when an interrupted step runs
        again after a crash (a tool with side effects uses it to act at most once); else None."""
        from .steps import idempotency_key

        return idempotency_key.get()

    @property
    def call(self) -> Any:
        """The :class:`ToolCall` this task is working on, or None outside tool execution."""
        return current_call.get()

    @property
    def workspace(self) -> Path:
        ws = self.agent.workspace
        # the config's Path itself (immutable; its str() is then computed once): a new Path per access
        # cost every plugin that reads it ~5 us a turn
        return ws if isinstance(ws, Path) else Path(ws)

    @property
    def budget(self) -> Any:
        """The :class:`clawkit.budget.ContextBudget` of this agent's window: ask it, keep no thresholds of your own."""
        from .budget import ContextBudget

        window = self.agent.model.context_window or self.agent.limits.context_window
        return ContextBudget(window, self.agent.context)

    @property
    def session_id(self) -> str:
        return self.session.id

    def invalidate_prompt(self) -> None:
        """Rebuild the system prompt for the next model call of this turn.

        The prompt is assembled once per turn (every round sees the same text, which
        prompt caching likes); a plugin whose tool changes what the prompt should say
        mid-turn (e.g. loading a skill) calls this.
        """
        self.state.pop("_system", None)

    def stop(self, note: str, reason: str = "stopped_by_plugin", detail: str = "") -> None:
        """End the turn: the next model call is the final round, with no tools offered.

        ``note`` is shown to the model for that round (what happened, what to do now);
        ``reason`` becomes the turn's ``stop_reason`` (the CLI maps some to exit codes,
        e.g. ``budget``), ``detail`` a one-line explanation for the user. The first
        stop of a turn wins.
        """
        if not self.state.get("stop_turn"):
            self.state["stop_turn"] = note
            self.state["stop_reason"] = reason
            self.state["stop_detail"] = detail

    def plan_tool_call(self, name: str, arguments: dict[str, Any] | None = None, *, origin: str) -> Any:
        """Ask the kernel to make a tool call for this turn, before its first model call.

        For ``message_received`` implementations that decide an effect themselves (a router
        dispatching a message to a sub-agent): there is no second way to act. The kernel
        records the planned calls in the history as an assistant message with
        ``tool_calls`` (``metadata["origin"] = origin``, one message per origin, in the
        order planned) and a ``tool.planned`` event, then runs them through the same
        pipeline as the model's calls — ``before_tool_call`` gates, approvals, the audit
        records, execution, ``after_tool_call`` (truncation, scanning, wrapping as data),
        persistence — concurrently when there are several. The model is then called with
        their results and answers as usual; a blocked or denied call is an error result
        it reads like any other. Returns the :class:`~clawkit.types.ToolCall` (its ``id``
        is the call's step id). Ignored when a plugin answers the message itself
        (``ctx.state["reply"]``). ``ctx.state["planned_calls"]`` maps each planned call's
        id to its origin, for gates that want to know who asked. Planning after
        ``message_received`` (from a tool or a later hook) raises ``RuntimeError``.
        """
        from .types import ToolCall

        if not origin or not isinstance(origin, str):
            raise ValueError("plan_tool_call: origin must name who plans the call (e.g. 'router')")
        if self.state.get("_planned_closed"):
            raise RuntimeError("plan_tool_call: calls are planned in message_received, before the turn's first model call")
        call = ToolCall(id=new_id("call"), name=name, arguments=dict(arguments or {}))
        self.state.setdefault("_planned", []).append((call, origin))
        self.state.setdefault("planned_calls", {})[call.id] = origin
        return call

    async def notice(self, text: str, *, verbose_only: bool = True, **metadata: Any) -> None:
        """Tell the user something about the run (an intervention, a budget warning).

        With ``verbose_only`` the notice is delivered cancelled, and ``/verbose`` (or any
        ``message_sending`` plugin) may un-cancel it; it always passes through the hooks.
        """
        runtime = self._agent_obj
        if runtime is None:
            return
        out = Outbound(kind="notice", content=text, cancelled=verbose_only, metadata={"verbose_only": verbose_only, **metadata})
        await runtime._send(self, out, self.deliver)

    def at_end(self, callback: Any) -> None:
        """Call ``callback()`` (sync, or returning an awaitable) once this run ends — done,
        failed or cancelled — to release what is tied to the run (a per-task sandbox
        instance). The latest registered runs first; one that raises is logged and the
        others still run. Agent shutdown (``agent_closing``) covers a process that exits
        without finishing its runs."""
        self._at_end.append(callback)

    async def finish(self) -> None:
        """Run the ``at_end`` callbacks (the kernel calls this when the run ends)."""
        from .hooks import isawaitable

        while self._at_end:
            callback = self._at_end.pop()
            try:
                res = callback()
                if isawaitable(res):
                    await res
            except Exception:  # noqa: BLE001 - one plugin's cleanup must not skip the others'
                log.exception("a run's at_end callback failed")

    @property
    def governing(self) -> tuple:
        """What governs this agent's next run (:mod:`clawkit.governing`): a tuple of ``GoverningPath``."""
        from .governing import for_context

        return for_context(self)

    def plugin_config(self, name: str) -> Any:
        """This agent's config section for plugin ``name``."""
        return self.agent.plugin(name)

    @property
    def runtime(self) -> Any:
        """The running :class:`clawkit.loop.Agent` (provider access for plugins that call models)."""
        return self._agent_obj

    def emit(self, type: str, **data: Any) -> None:
        # built without validation: the kernel's own fields (a plugin's type is a str, data a dict of its kwargs)
        emit_event(self.hooks, self.session, Event.model_construct(type=type, session_id=self.session.id, run_id=self.run_id,
                                                                    data=data, ts=time.time()))


def emit_event(hooks: "HookRunner", session: "Session | None", event: Event) -> None:
    """Persist (when a session is known) and broadcast an event; never raises."""
    if session is not None:
        try:
            session.store.event(event.session_id, event.run_id, event.type, event.data, event.ts)
        except Exception:  # a full disk must not take the turn down with it
            pass
    if hooks.has("on_event"):
        hooks.call_event(event)
