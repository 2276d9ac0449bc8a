"""``clawkit serve --db postgresql://…``: the server's turn runner and approval broker backed by
the queue — a request enqueues its turn and waits for the workers' result; approvals are the
rows the workers' turns wait on. Serve hands in its ``EventHub`` and its error classes (it
never imports this plugin, and this plugin never imports serve)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from clawkit.types import new_id

from . import approvals as approvals_mod
from . import chunks

log = logging.getLogger("clawkit.workers.serve")


def _result(data: dict[str, Any]) -> Any:
    from clawkit.loop import TurnResult
    from clawkit.types import Usage

    return TurnResult(session_id=data["session_id"], reply=data.get("reply", ""), tool_calls=data.get("tool_calls", []),
                      usage=Usage.model_validate(data.get("usage") or {}), run_id=data.get("run_id", ""),
                      stop_reason=data.get("stop_reason", "done"), stop_detail=data.get("stop_detail", ""),
                      interrupted=bool(data.get("interrupted")))


class QueueRunner:
    """serve's ``TurnRunner`` for queued turns: agents are loaded for their config, tools and
    session store (the shared PostgreSQL); their turns run on ``clawkit worker`` processes.
    A request's model settings, typed-output spec and attachments ride the queued turn (:mod:`.queued`)."""

    #: a request's model settings (and response_format) reach its queued turn's model calls
    request_settings = True
    #: a request's image and file parts reach its queued turn (bytes in ``clawkit_attachments``)
    attachments = True

    def __init__(self, queue: Any, paths: list[Any], *, overrides: dict | None, hub: Any, errors: dict[str, type]):
        from clawkit.loop import Agent
        from clawkit.plugins import get_plugin_manager
        from clawkit.runtime import load_config

        from .queued import PgBlobStore

        self.queue, self.hub, self.errors = queue, hub, errors
        blobs = PgBlobStore(queue.url)
        self.agents: dict[str, Any] = {}
        for path in paths:
            cfg, _ = load_config(path, overrides)
            if cfg.name in self.agents:
                raise ValueError(f"{path}: an agent named {cfg.name!r} is served already (names pick agents: make them unique)")
            self.agents[cfg.name] = Agent(cfg, pm=get_plugin_manager(disabled=cfg.disabled_plugins()), channel="http")
            self.agents[cfg.name].attachment_store = blobs
        self.stopping = False
        self.waiting_sessions: Callable[[], set[str]] = set
        self.before_turn: Callable[[str], None] = lambda session_id: None
        self._running: dict[str, int] = {}
        self._waiters: dict[str, asyncio.Future] = {}
        self._poller: asyncio.Task | None = None
        chunks.ensure_schema(queue.url)
        self.feed = chunks.ChunkFeed(queue.url)

    def agent_names(self) -> list[str]:
        return list(self.agents)

    async def warm(self) -> None:
        """Nothing to warm: no model is called in this process."""

    def agent_of(self, session_id: str) -> str:
        for name, agent in self.agents.items():
            if agent.store.exists(session_id) and agent.store.row(session_id)["agent"] == name:
                return name
        raise self.errors["UnknownSession"](session_id)

    def busy(self, session_id: str) -> bool:
        return self._running.get(session_id, 0) > 0

    def open_session(self, agent: str, session_id: str | None, history: list[Any] | None = None) -> str:
        a = self.agents[agent]
        if session_id is not None:
            if self.agent_of(session_id) != agent:
                raise self.errors["UnknownSession"](session_id)
            return session_id
        from clawkit.attachments import check_vision

        for m in history or ():
            if m.blocks:
                check_vision(a.config.model, m.blocks)  # AttachmentError (a 400) before the session exists
        sid = a.store.create(agent)
        for m in history or ():
            for block in m.blocks:  # an earlier message's attachments: their bytes where every worker reads them
                a.attachment_store.put(block)
            a.store.append(sid, m)
        return sid

    async def turn(self, agent: str, session_id: str, text: str, deliver: Any, *, wait: bool = False,
                   attachments: list[Any] | None = None, settings: dict[str, Any] | None = None) -> Any:
        """Enqueue the turn and wait for its result. Turns of a session queue behind each other
        (the queue runs them in order), so ``wait=False`` refuses only a turn this server is
        already waiting on for the same session. ``settings`` (checked by serve) and ``attachments``
        (checked here as in process: ``AttachmentError``, bytes stored once) ride the queued turn."""
        if self.stopping:
            raise self.errors["Checkpointed"]("the server is stopping: no new turns")
        if self.busy(session_id) and not wait:
            raise self.errors["SessionBusy"](session_id)
        refs = None
        if attachments:
            from .queued import references

            refs = await asyncio.to_thread(references, attachments, self.agents[agent])
        self._running[session_id] = self._running.get(session_id, 0) + 1
        turn_id, streamed = new_id("turn"), 0
        try:
            if deliver is not None:  # the worker's chunks reach ``deliver`` as they are written
                await asyncio.to_thread(self.feed.watch, turn_id, deliver, asyncio.get_running_loop())
            await asyncio.to_thread(lambda: self.queue.submit(agent, text, session_id, turn_id, stream=deliver is not None,
                                                              settings=settings or None, attachments=refs))
            self.hub.publish(session_id, {"type": "turn.queued", "turn_id": turn_id})
            data = await self._wait(turn_id)
            if data.get("output_invalid"):  # the response_format was never met: as in process (502 output_invalid)
                from clawkit.output import OutputValidationError

                bad = data["output_invalid"]
                raise OutputValidationError(list(bad.get("errors") or []), reply=bad.get("reply", ""),
                                            attempts=int(bad.get("attempts") or 1), session_id=session_id,
                                            run_id=bad.get("run_id", ""))
            if deliver is not None:
                streamed = await self.feed.finish(turn_id)
        except Exception as exc:
            self.hub.publish(session_id, {"type": "turn.failed", "error": f"{type(exc).__name__}: {exc}"})
            raise
        finally:
            self.feed.forget(turn_id)
            self._running[session_id] -= 1
            if not self._running[session_id]:
                self._running.pop(session_id)
        result = _result(data)
        if deliver is not None and not streamed and result.reply:  # nothing reached the stream (its rows were lost)
            from clawkit.types import Outbound

            res = deliver(Outbound(kind="final_reply", content=result.reply, metadata={"streamed": False}))
            if asyncio.iscoroutine(res):
                await res
        self.hub.publish(session_id, {"type": "turn.done", "reply": result.reply, "stop_reason": result.stop_reason,
                                      "usage": result.usage.model_dump(), "turn_id": turn_id})
        return result

    async def _wait(self, turn_id: str) -> dict[str, Any]:
        fut = asyncio.get_running_loop().create_future()
        self._waiters[turn_id] = fut
        if self._poller is None or self._poller.done():
            self._poller = asyncio.ensure_future(self._poll())
        return await fut

    async def _poll(self) -> None:
        """One query for every turn this server waits on (not a thread per request)."""
        while self._waiters:
            try:
                done = await asyncio.to_thread(self.queue.finished, list(self._waiters))
            except Exception as exc:  # the database went away: tell the waiting requests
                log.warning("polling the turn queue failed: %s", exc)
                done = {}
                await asyncio.sleep(1.0)
            for turn_id, (ok, value) in done.items():
                fut = self._waiters.pop(turn_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(value) if ok else fut.set_exception(value)
            await asyncio.sleep(0.05)

    def resume_later(self, agent: str, session_id: str) -> None:
        """Nothing to do here: the workers resume turns whose approval was answered."""

    async def shutdown(self, timeout: float) -> None:
        """Stop taking turns; requests still waiting are told their turn goes on in the workers."""
        self.stopping = True
        for turn_id, fut in list(self._waiters.items()):
            if not fut.done():
                fut.set_exception(self.errors["Checkpointed"](
                    f"the server is stopping; turn {turn_id} goes on in the workers (read the session for its reply)"))
        self._waiters.clear()
        if self._poller is not None:
            self._poller.cancel()

    async def close(self) -> None:
        self.feed.close()
        for a in self.agents.values():
            a.close()
        self.queue.close()


class QueueBroker:
    """serve's ``ApprovalBroker`` over the rows queued turns wait on."""

    def __init__(self, url: str, *, errors: dict[str, type], publish: Callable[[str, dict[str, Any]], None] | None = None):
        self.url, self.errors = url, errors
        self.publish = publish or (lambda session_id, event: None)
        self.on_orphan_answer: Callable[[dict[str, Any]], None] = lambda row: None

    def get(self, approval_id: str) -> dict[str, Any] | None:
        return approvals_mod.get(self.url, approval_id)

    def list(self, status: str | None = "pending", session_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return approvals_mod.list_approvals(self.url, status, session_id, limit)

    def waiting_sessions(self) -> set[str]:
        return set()  # nothing waits in this process

    def approver(self, agent_name: str, timeout: float | None = None) -> Any:
        return None  # turns run on the workers, whose approver waits durably

    def answer(self, approval_id: str, approve: bool, *, by: str, call_hash: str | None = None,
               note: str | None = None) -> dict[str, Any]:
        try:
            row = approvals_mod.answer(self.url, approval_id, approve, by=by, call_hash=call_hash, note=note)
        except approvals_mod.ApprovalError as exc:
            raise self.errors["ApprovalError"](exc.status, str(exc)) from None
        self.publish(row["session_id"], {"type": "approval.answered", "approval": row})
        return row

    def supersede(self, session_id: str) -> None:
        """Nothing to supersede: a session's turns run in order, each finishing its own waits."""

    def sweep(self) -> list[dict[str, Any]]:
        """Expire requests past their expiry (their waiting step notices and denies the call)."""
        now = time.time()
        stale = [r for r in self.list("pending", limit=1000) if r["expires"] <= now]
        return stale
