"""The turn engine: one turn of an agent from the message in to the reply out — the session taken,
the message received (and its attachments), planned calls, the model/tool loop with its wrap-up
round, typed answers, a resumed turn — and the :class:`TurnResult` it returns. :class:`TurnSide` is
the half of :class:`clawkit.loop.Agent` that runs turns; the other half (:mod:`clawkit.loop`) builds
the agent (plugins, tools, providers, the store) and closes it."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from . import gcfreeze
from .context import TurnContext
from .agent_model import Deliver
from .hooks import isawaitable
from .providers import ProviderError
from .sessions import LOCK_WAIT, Session
from .usage import add_usage as _add_usage
from .types import LlmRequest, Message, Outbound, SessionClassification, ToolCall, Usage

log = logging.getLogger("clawkit.loop")


@dataclass
class TurnResult:
    session_id: str
    reply: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    run_id: str = ""
    stop_reason: str = "done"
    stop_detail: str = ""
    interrupted: bool = False  # the reply stopped mid-way (cut stream): ``reply`` is the partial text
    #: the validated answer of a typed run (``output_type=``, YAML ``output:``; docs/typed-output.md):
    #: an instance of the type asked for, or the JSON value for a JSON Schema; ``reply`` is its JSON text
    output: Any = None
    typed: bool = False  # the run had an output schema
    model: str | None = None  # the model that answered the turn's last call (a fallback's when one answered)
    fallbacks: list[dict[str, Any]] = field(default_factory=list)  # the turn's fallbacks (clawkit.fallback)

    @property
    def stopped(self) -> bool:
        return self.stop_reason not in ("done", "handled")

    def as_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "reply": self.reply,
            "tool_calls": self.tool_calls,
            "usage": self.usage.model_dump(),
            "interrupted": self.interrupted,
            "stop_reason": self.stop_reason,
            **({"stop_detail": self.stop_detail} if self.stop_detail else {}),
            **({"output": _jsonable(self)} if self.typed else {}),
            **({"model": self.model} if self.model else {}),
            **({"fallbacks": self.fallbacks} if self.fallbacks else {}),
        }


class TurnSide:
    """The turn engine half of :class:`clawkit.loop.Agent` (see the module docstring)."""

    async def turn(
        self,
        text: str,
        session_id: str | None = None,
        deliver: Deliver | None = None,
        *,
        trace_id: str | None = None,
        parent_run_id: str | None = None,
        parent_step_id: str | None = None,
        output_type: Any = None,
        attachments: Any = None,
    ) -> TurnResult:
        """One turn: a run of this agent. ``trace_id``/``parent_run_id``/``parent_step_id``
        tie a sub-agent's run to the tool-call step of the run that spawned it.

        ``output_type`` makes the answer typed (docs/typed-output.md): a pydantic model, any type
        pydantic can validate, a JSON Schema mapping or ``--schema`` text; the result's ``output``
        is then the validated value, or :class:`clawkit.output.OutputValidationError` is raised.

        ``attachments``: paths, ``https://`` URLs, ``bytes`` or :class:`clawkit.attachments.Attachment`
        objects sent with the message (docs/attachments.md); local ones are checked (type, size, a
        model that takes images) before the session is touched, raising ``AttachmentError``."""
        pending = None
        if attachments:
            from .attachments import prepare

            pending = prepare(attachments, self.config)
        session = await self._locked_session(session_id)
        try:
            return await self._locked_turn(session, text, deliver, trace_id, parent_run_id, parent_step_id, output_type,
                                           pending)
        finally:
            self.store.unlock(session.id)
            gcfreeze.after_first_turn()  # once per process: the start-up heap out of the collector's walks

    async def _locked_session(self, session_id: str | None) -> Session:
        """The session, taken for this turn before anything is read from it: a process running a turn
        on it is waited for, up to ``LOCK_WAIT`` seconds, then :class:`~clawkit.sessions.SessionBusy`
        (no interleaved history, and no "interrupted" repair of a call that is still running)."""
        if session_id is None:
            session = self.session(None)
            self.store.try_lock(session.id)  # brand new: nobody else can hold it
            return session
        if not self.store.try_lock(session_id):
            waited, delay = 0.0, 0.02
            while not self.store.try_lock(session_id):
                if waited >= LOCK_WAIT:
                    raise self.store.busy(session_id, waited)
                await asyncio.sleep(delay)
                waited += delay
                delay = min(delay * 2, 0.25)
            self._sessions.pop(session_id, None)  # the other process added to it: reload
        try:
            return self.session(session_id)
        except BaseException:
            self.store.unlock(session_id)
            raise

    async def _locked_turn(self, session: Session, text: str, deliver: Deliver | None, trace_id: str | None,
                           parent_run_id: str | None, parent_step_id: str | None, output_type: Any = None,
                           attachments: Any = None) -> TurnResult:
        started = time.time()
        self._session = session
        ctx = TurnContext(self.config, session, self.hooks, self.tools, channel=self.channel, agent_obj=self, trace_id=trace_id,
                          parent_run_id=parent_run_id, parent_step_id=parent_step_id)
        ctx.state["_started"] = started
        if attachments:
            ctx.state["_attachments"] = attachments
        ctx.deliver = deliver
        await self._durable(ctx)
        ctx.state["_output_type"] = output_type  # read (and dropped) when the model loop starts
        result = TurnResult(session_id=session.id, reply="", run_id=ctx.run_id)
        session.store.run_start({"id": ctx.run_id, "trace_id": ctx.trace_id, "task_id": ctx.task_id, "session_id": session.id,
                                 "agent": self.config.name, "parent_run_id": parent_run_id, "parent_step_id": parent_step_id,
                                 "data": {"tools": [t.name for t in self.tools.visible()], "model": self.config.model.name}})
        status = "error"
        try:
            await self._turn(ctx, text, result, deliver)
            status = "done" if result.stop_reason in ("done", "handled") else result.stop_reason
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "cancelled"
            raise
        except Exception as exc:
            # observers (telemetry, clawkit logs) see the failed run; content stays out of events
            ctx.emit("turn.failed", error=type(exc).__name__, message=str(exc)[:500], usage=result.usage.model_dump(),
                     duration=time.time() - started, agent=self.config.name)
            raise
        finally:
            await self._end_run(ctx, status, result)
        return result

    async def _end_run(self, ctx: TurnContext, status: str, result: TurnResult) -> None:
        """Close the run: its end, the answer and the turn's observations go to the store's writer
        first (one commit, before any cleanup can delay it), then the ``at_end`` callbacks run and
        what they reported follows."""
        store = ctx.session.store
        store.run_end(ctx.run_id, status, {"usage": result.usage.model_dump(exclude_defaults=True)})
        try:
            store.commit()  # handed to the store's writer; the session's lock is released once it is on disk
        finally:
            await ctx.finish()
            store.commit()

    async def _durable(self, ctx: TurnContext) -> None:
        """An execution engine's step runner for this turn (``durable_steps``), if one runs it."""
        if self.hooks.has("durable_steps"):
            ctx.steps = await self.hooks.call_first("durable_steps", ctx=ctx)

    async def _turn(self, ctx: TurnContext, text: str, result: TurnResult, deliver: Deliver | None) -> None:
        await self._receive(ctx, text)
        await self._prepare_provider()
        classify = self._start_classification(ctx)
        if classify is not None:
            await self._await_classification(ctx, classify)
        if ctx.state.get("reply") is not None:
            # a plugin answered the message itself (a directive-only message, /status, a dispatch to sub-agents)
            result.reply = await self._deliver_final(ctx, str(ctx.state["reply"]), deliver, streamed=False, persist=True)
            result.stop_reason = ctx.state.get("stop_reason") or "handled"  # e.g. a spent budget refused the turn
            result.stop_detail = ctx.state.get("stop_detail", "")
            _add_usage(result.usage, ctx.state.get("reply_usage") or Usage())
        else:
            tools_on = await self._run_planned(ctx, result, deliver)
            await self._loop(ctx, result, deliver, tools_on=tools_on)
        # every turn that ends (a plugin's answer too) ends with turn.end; a raised one with turn.failed
        ctx.emit("turn.end", rounds=ctx.state.get("rounds", 0), stop_reason=result.stop_reason, usage=result.usage.model_dump(),
                 duration=time.time() - ctx.state.get("_started", time.time()), agent=self.config.name)

    async def _run_planned(self, ctx: TurnContext, result: TurnResult, deliver: Deliver | None) -> bool:
        """Calls a plugin planned in ``message_received`` (``ctx.plan_tool_call``): recorded as
        assistant tool calls marked with their origin, then run like the model's own calls
        (gates, approvals, audit, ``after_tool_call``, persistence). Returns ``tools_on``."""
        planned = ctx.state.pop("_planned", None)
        ctx.state["_planned_closed"] = True  # later plans would never run: refused loudly
        if not planned:
            return True
        groups: dict[str, list[ToolCall]] = {}
        for call, origin in planned:
            groups.setdefault(origin, []).append(call)
        for origin, calls in groups.items():
            self._append(ctx.session, Message(role="assistant", content="", tool_calls=calls, metadata={"origin": origin}), ctx)
            ctx.emit("tool.planned", origin=origin, calls=[{"id": c.id, "tool": c.name} for c in calls])
            stop_note = await self.executor.run_calls(ctx, calls, result, deliver)
            if stop_note is not None:
                return self._stop(ctx, result, _note(stop_note))
        return True

    async def preview(self, text: str | None, classification: SessionClassification | None = None) -> tuple[LlmRequest, Any]:
        """The first request a turn for ``text`` would send, built by the turn's own code
        (``message_received``, routing, skill activation, memory, contributors,
        ``before_llm_call``) in a fresh session, without calling any model.

        ``classification`` stands in for the classifier's answer (the classifier model is
        not called). Returns the request and the assembled prompt's inclusion report
        (None when the agent has no contributors). Use an agent opened with
        ``persist=False`` so nothing is written.
        """
        session = self.session(None)
        self._session = session
        session.classification = classification
        ctx = TurnContext(self.config, session, self.hooks, self.tools, channel=self.channel, agent_obj=self)
        ctx.state["preview"] = True  # plugins start no process, call no model, write nothing (docs/hooks.md)
        if text is not None:
            await self._receive(ctx, text)
        request = await self._build_request(ctx, True)
        return request, ctx.state.get("_assembled")

    async def _receive(self, ctx: TurnContext, text: str) -> Message:
        """``message_received`` (each may rewrite the text), then the message joins the session."""
        session = ctx.session
        message = Message(role="user", content=text)
        if ctx.state.get("_attachments"):
            from .attachments import attach

            message.blocks = await attach(self, ctx, ctx.state.pop("_attachments"))
        if self.hooks.has("message_received"):
            kw = {"ctx": ctx, "message": message}
            for plugin, fn, argnames in self.hooks.impls("message_received"):
                try:
                    res = self.hooks._invoke("message_received", plugin, fn, argnames, kw)
                    if isawaitable(res):
                        res = await res
                    if isinstance(res, str):
                        message.content = res
                except Exception as exc:
                    self.hooks.report("message_received", plugin, exc)
            if message.content != text:
                message.metadata["original"] = text
        self._append(session, message, ctx)
        return message

    async def resume(self, session_id: str, deliver: Deliver | None = None, *, trace_id: str | None = None) -> TurnResult:
        """Finish a turn that stopped while its last tool calls had no results — a server
        restarted while a call waited for approval (the approval is durable; the turn is not).

        The unanswered calls go through the gates again (so an approver answers from its
        durable record, bound to the call's id and arguments), then the loop continues as
        the turn would have. With nothing unanswered, returns at once (``stop_reason``
        ``"nothing_to_resume"``).
        """
        stored = self.store.messages(session_id)
        answered = {m.tool_result.call_id for m in stored if m.role == "tool" and m.tool_result is not None}
        last = next((m for m in reversed(stored) if m.role == "assistant"), None)
        pending = [c for c in (last.tool_calls if last else []) if c.id not in answered]
        result = TurnResult(session_id=session_id, reply="")
        if not pending or stored[-1].role not in ("assistant", "tool"):
            result.stop_reason = "nothing_to_resume"
            return result
        session = Session(self.store, session_id, self.config)
        session.history = stored
        self._sessions[session_id] = session
        self._session = session
        ctx = TurnContext(self.config, session, self.hooks, self.tools, channel=self.channel, agent_obj=self, trace_id=trace_id)
        ctx.deliver = deliver
        result.run_id = ctx.run_id
        started = ctx.state["_started"] = time.time()
        self.store.run_start({"id": ctx.run_id, "trace_id": ctx.trace_id, "task_id": ctx.task_id, "session_id": session_id,
                              "agent": self.config.name, "parent_run_id": None, "parent_step_id": None,
                              "data": {"resumed_calls": [c.id for c in pending], "model": self.config.model.name}})
        await self._durable(ctx)
        ctx.emit("turn.resumed", calls=[c.id for c in pending])
        status = "error"
        try:
            stop_note = await self.executor.run_calls(ctx, pending, result, deliver)
            if stop_note is not None:
                self._append(session, Message(role="user", content=stop_note, metadata={"kernel_note": True}), ctx)
            await self._loop(ctx, result, deliver, tools_on=stop_note is None)
            ctx.emit("turn.end", rounds=ctx.state.get("rounds", 0), stop_reason=result.stop_reason, usage=result.usage.model_dump(),
                     duration=time.time() - started, agent=self.config.name)
            status = "done" if result.stop_reason == "done" else result.stop_reason
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = "cancelled"
            raise
        finally:
            await self._end_run(ctx, status, result)
        return result

    async def _loop(self, ctx: TurnContext, result: TurnResult, deliver: Deliver | None, *, tools_on: bool = True) -> None:
        session = ctx.session
        rounds = 0
        from .output import resolve

        typed = resolve(self, ctx, ctx.state.pop("_output_type", None))
        result.typed = typed is not None
        while True:
            if tools_on and ctx.state.get("stop_turn"):
                # a plugin stopped the turn before this model call (a budget, say)
                result.stop_reason = ctx.state.get("stop_reason", "stopped_by_plugin")
                tools_on = self._stop(ctx, result, _note(ctx.state["stop_turn"]))
            request = await self._build_request(ctx, tools_on)
            if tools_on and ctx.state.get("stop_turn"):
                # a before_llm_call plugin stopped the turn: this call becomes the wrap-up round
                result.stop_reason = ctx.state.get("stop_reason", "stopped_by_plugin")
                tools_on = self._stop(ctx, result, _note(ctx.state["stop_turn"]))
                request = await self._build_request(ctx, tools_on)
            if typed is not None:
                typed.prepare(self, request)
            heard: list[str] = []  # text already delivered: what the user saw if the reply breaks
            try:
                response = await self._call_model(ctx, request, deliver, heard)
            except ProviderError as exc:
                partial = exc.partial_text or "".join(heard)
                if exc.kind != "stream_cut" or not partial:
                    raise
                self._keep_partial(ctx, result, partial, "stream_cut", str(exc))
                out = Outbound(kind="final_reply", content=partial,
                               metadata={"streamed": bool(heard), "interrupted": True})
                await self._send(ctx, out, deliver)
                return
            except BaseException as exc:  # cancelled (Ctrl-C, SIGTERM) or crashed mid-reply
                if heard:
                    reason = "cancelled" if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)) else "error"
                    self._keep_partial(ctx, result, "".join(heard), reason, f"{type(exc).__name__}: {exc}")
                raise
            _add_usage(result.usage, response.usage)
            _add_usage(ctx.usage, response.usage)
            result.model, result.fallbacks = request.model, ctx.state.get("_fallbacks") or []
            ctx.model_calls += 1
            if typed is not None and self._typed_answer(ctx, typed, response, result, tools_on):
                continue  # the answer failed validation: it went back to the model with the errors
            if not tools_on:
                response.tool_calls = []  # none were offered: calls now would have no results in history
                if not response.content.strip():
                    response.content = _fallback_summary(result)  # the wrap-up reply is never empty
            assistant = Message(role="assistant", content=response.content, tool_calls=response.tool_calls,
                                metadata={"thinking": response.thinking} if response.thinking else {})
            # a call is on disk before it runs; a final answer rides with the turn's end (one commit less)
            self._append(session, assistant, ctx, defer=not response.tool_calls)
            if not response.tool_calls:
                result.reply = await self._deliver_final(ctx, response.content, deliver, streamed=request.stream and deliver is not None)
                return
            rounds += 1
            ctx.state["rounds"] = rounds
            stop_note = await self.executor.run_calls(ctx, response.tool_calls, result, deliver)
            if stop_note is None and rounds >= self.config.limits.max_tool_rounds:
                stop_note = f"Stopped: this turn reached max_tool_rounds ({rounds})."
                result.stop_reason = "max_tool_rounds"
            if stop_note is not None:
                tools_on = self._stop(ctx, result, _note(stop_note))

    def _typed_answer(self, ctx: TurnContext, typed: Any, response: Any, result: TurnResult, tools_on: bool) -> bool:
        """Judge a typed run's answer (:mod:`clawkit.output`). A valid one becomes the reply (its
        canonical JSON) and ``result.output``; an invalid one is stored, its errors go back to the
        model (True: ask again), or — retries spent — :class:`~clawkit.output.OutputValidationError`."""
        answer = typed.take(response, tools_on)
        if answer is None:
            return False  # the agent's own tool calls: an ordinary round
        if answer.ok:
            response.content, response.tool_calls = answer.text, []
            result.output = answer.value
            ctx.emit("output.valid", attempts=typed.failures + 1, mode=typed.mode)
            return False
        # stored as the text it is (a final-tool call too: no tool call for a tool other turns may not offer)
        self._append(ctx.session, Message(role="assistant", content=typed.answer_text(response, answer)), ctx)
        ctx.emit("output.invalid", attempt=typed.failures, errors=answer.errors[:8], mode=typed.mode)
        if typed.exhausted():
            from .output import OutputValidationError

            raise OutputValidationError(answer.errors, reply=typed.answer_text(response, answer), attempts=typed.failures,
                                        session_id=ctx.session.id, run_id=ctx.run_id)
        self._append(ctx.session, typed.feedback(answer), ctx)
        return True

    def _stop(self, ctx: TurnContext, result: TurnResult, note: str) -> bool:
        """Record why the turn stops and ask for the wrap-up round; returns ``tools_on`` (False)."""
        result.stop_detail = ctx.state.get("stop_detail", "") or note.split(". ")[0]
        ctx.emit("turn.stopped", reason=result.stop_reason, note=note)
        self._append(ctx.session, Message(role="user", content=note, metadata={"kernel_note": True, "wrap_up": True}), ctx)
        return False

    def _append(self, session: Session, message: Message, ctx: TurnContext, *, defer: bool = False) -> None:
        session.store.append(session.id, message, ctx.run_id, defer=defer)
        session.history.append(message)

    def _keep_partial(self, ctx: TurnContext, result: TurnResult, text: str, reason: str, error: str) -> None:
        """Store a reply that stopped mid-way as what it is: partial, marked interrupted."""
        self._append(ctx.session, Message(role="assistant", content=text,
                                          metadata={"interrupted": True, "interrupted_reason": reason}), ctx)
        result.reply, result.interrupted, result.stop_reason = text, True, "interrupted"
        result.stop_detail = error[:300]
        ctx.emit("turn.interrupted", reason=reason, chars=len(text), error=error[:300])

WRAP_UP = (
    "Do not call any tools now. Reply to the user with a short summary: what was done so far, "
    "what is left to do, and what you would need to continue."
)


def _note(stop: Any) -> str:
    text = stop if isinstance(stop, str) else "Stopped by a plugin."
    return f"{text.rstrip()} {WRAP_UP}"


def _fallback_summary(result: TurnResult) -> str:
    """What the user gets when the model's wrap-up reply is empty."""
    calls = result.tool_calls
    done = ", ".join(f"{c['name']}{' (failed)' if c.get('is_error') else ''}" for c in calls[-10:]) or "no tool calls"
    return f"The turn stopped ({result.stop_reason}) before an answer was written. Tool calls made: {done}."


def _jsonable(result: TurnResult) -> Any:
    """A typed run's output for ``--json``: the JSON value of its reply."""
    import json

    try:
        return json.loads(result.reply)
    except ValueError:
        return result.reply
