"""Running turns for the server: agents, one turn per session, live events.

:class:`TurnRunner` is the interface the HTTP layer uses; :class:`InProcessRunner`
runs turns as asyncio tasks in this process. A queue-backed runner (workers pulling
turns from PostgreSQL) implements the same four calls and the :class:`EventHub`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol

from clawkit import hookimpl

log = logging.getLogger("clawkit.serve")
Deliver = Callable[[Any], Awaitable[None] | None]


class SessionBusy(Exception):
    """A turn is already running on this session."""


class UnknownSession(KeyError):
    pass


class Checkpointed(Exception):
    """The server stopped while this turn waited for approval; it resumes when the approval is answered."""


class EventHub:
    """Per-session fan-out of live events to SSE subscribers (thread-safe publish)."""

    def __init__(self) -> None:
        self._subs: dict[str, set[asyncio.Queue]] = {}
        self._all: set[asyncio.Queue] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self._thread = loop, threading.get_ident()

    def subscribe(self, session_id: str | None) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue(maxsize=1000)
        (self._subs.setdefault(session_id, set()) if session_id else self._all).add(q)
        return q

    def unsubscribe(self, session_id: str | None, q: asyncio.Queue) -> None:
        (self._subs.get(session_id, set()) if session_id else self._all).discard(q)

    def publish(self, session_id: str | None, event: dict[str, Any]) -> None:
        if self._loop is None:
            return
        if threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self._put, session_id, event)
        else:
            self._put(session_id, event)

    def _put(self, session_id: str | None, event: dict[str, Any]) -> None:
        event = {**event, "session_id": session_id}
        for q in [*self._subs.get(session_id, ()), *self._all]:
            if q.full():  # a stalled reader loses old events, never blocks a turn
                q.get_nowait()
            q.put_nowait(event)


class HubPlugin:
    """Registered on each served agent's plugin manager: forwards events to the hub."""

    def __init__(self, hub: EventHub):
        self.hub = hub

    @hookimpl
    def on_event(self, event):
        if event.session_id:
            self.hub.publish(event.session_id, {"type": event.type, "data": event.data, "ts": event.ts, "run_id": event.run_id})


class TurnRunner(Protocol):
    hub: EventHub

    def agent_names(self) -> list[str]: ...
    async def warm(self) -> None: ...
    def agent_of(self, session_id: str) -> str: ...
    def open_session(self, agent: str, session_id: str | None, history: list[Any] | None = None) -> str: ...
    def busy(self, session_id: str) -> bool: ...
    async def turn(self, agent: str, session_id: str, text: str, deliver: Deliver | None, *, wait: bool = False) -> Any: ...
    def resume_later(self, agent: str, session_id: str) -> None: ...
    async def shutdown(self, timeout: float) -> None: ...
    async def close(self) -> None: ...


class InProcessRunner:
    """Agents opened from YAML files, turns as tasks in this event loop."""

    #: a request's model settings (``turn_settings.CURRENT``) reach its turn's model calls
    request_settings = True
    #: a request's image and file parts reach its turn (``Agent.turn(attachments=…)``)
    attachments = True

    def __init__(self, paths: list[str | Path], approver_for: Callable[[str], Any], *, overrides: dict | None = None):
        from clawkit.runtime import load_config
        from clawkit.loop import Agent
        from clawkit.plugins import get_plugin_manager

        from .turn_settings import TurnSettings

        self.hub = EventHub()
        self.agents: dict[str, Any] = {}
        for path in paths:
            cfg, _ = load_config(path, overrides)
            if cfg.name in self.agents:
                raise ValueError(f"{path}: an agent named {cfg.name!r} is served already (names pick agents: make them unique)")
            pm = get_plugin_manager(disabled=cfg.disabled_plugins(), extra=(HubPlugin(self.hub), TurnSettings()))
            section = cfg.plugin("serve")
            approver = approver_for(cfg.name, getattr(section, "approval_timeout", None))
            self.agents[cfg.name] = Agent(cfg, pm=pm, approver=approver, channel="http")
        self.stopping = False
        self._owner: dict[str, str] = {}  # session id -> agent name
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: dict[asyncio.Task, str] = {}
        self.waiting_sessions: Callable[[], set[str]] = set  # sessions whose turn waits for a person
        self.before_turn: Callable[[str], None] = lambda session_id: None  # (the broker supersedes stale requests)

    def agent_names(self) -> list[str]:
        return list(self.agents)

    async def warm(self) -> None:
        """Let each agent's provider load its SDK before the first request (``Provider.warm``:
        sync ones run in a thread, async ones are awaited), so no request stalls the loop."""
        for a in self.agents.values():
            try:
                warm = getattr(await asyncio.to_thread(lambda: a.provider), "warm", None)
                if inspect.iscoroutinefunction(warm):
                    await warm()
                elif callable(warm):
                    await asyncio.to_thread(warm)
            except Exception as exc:  # the first turn reports it properly
                log.warning("agent %s: warming its model provider failed: %s", a.config.name, exc)

    def agent_of(self, session_id: str) -> str:
        found = self._owner.get(session_id)
        if found is not None:
            return found
        for name, agent in self.agents.items():
            if agent.store.exists(session_id):
                row = agent.store.row(session_id)
                if row["agent"] == name:
                    if len(self._owner) > 100_000:
                        self._owner.clear()
                    self._owner[session_id] = name
                    return name
        raise UnknownSession(session_id)

    def busy(self, session_id: str) -> bool:
        lock = self._locks.get(session_id)
        return lock is not None and lock.locked()

    def open_session(self, agent: str, session_id: str | None, history: list[Any] | None = None) -> str:
        """A new session (seeded with ``history``: earlier messages a stateless client sent),
        or ``session_id`` checked to belong to ``agent``."""
        a = self.agents[agent]
        if session_id is not None:
            if self.agent_of(session_id) != agent:
                raise UnknownSession(session_id)
            return session_id
        for m in history or ():
            if m.blocks:
                from clawkit.attachments import check_vision

                check_vision(a.config.model, m.blocks)  # AttachmentError (a 400) before the session exists
        session = a.session(None)
        self._owner[session.id] = agent
        blobs = None
        for m in history or ():
            if m.blocks:  # an earlier message's attachments: their bytes stored once per hash
                from clawkit.attachments import blob_store

                blobs = blobs or blob_store(a)
                for block in m.blocks:
                    blobs.put(block)
            a.store.append(session.id, m)
            session.history.append(m)
        return session.id

    async def turn(self, agent: str, session_id: str, text: str, deliver: Deliver | None, *, wait: bool = False,
                   attachments: list[Any] | None = None, settings: dict[str, Any] | None = None) -> Any:
        """Run one turn; raises :class:`SessionBusy` when the session has one running (unless ``wait``).
        ``settings`` are applied through ``turn_settings.CURRENT`` (the request's context), not here.

        The turn is a task of the runner, not of the request: a client that disconnects
        does not cut it short, and shutdown can wait for it.
        """
        a = self.agents[agent]

        def start() -> Awaitable[Any]:
            self.before_turn(session_id)
            return a.turn(text, session_id=session_id, deliver=deliver, **({"attachments": attachments} if attachments else {}))

        return await self._locked(session_id, wait, start)

    async def _locked(self, session_id: str, wait: bool, make: Callable[[], Awaitable[Any]]) -> Any:
        if self.stopping:
            raise Checkpointed("the server is stopping: no new turns")
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        if lock.locked() and not wait:
            raise SessionBusy(session_id)
        async with lock:
            task = asyncio.ensure_future(self._publishing(session_id, make))
            self._track(task, session_id)
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled() and self.stopping:
                    raise Checkpointed(f"the server is stopping; session {session_id} is checkpointed and resumes "
                                       "when its pending approval is answered") from None
                raise
            finally:
                if not lock._waiters:  # type: ignore[attr-defined]
                    self._locks.pop(session_id, None)

    async def _publishing(self, session_id: str, make: Callable[[], Awaitable[Any]]) -> Any:
        self.hub.publish(session_id, {"type": "turn.running"})
        try:
            result = await make()
        except asyncio.CancelledError:
            self.hub.publish(session_id, {"type": "turn.checkpointed"})
            raise
        except Exception as exc:
            self.hub.publish(session_id, {"type": "turn.failed", "error": f"{type(exc).__name__}: {exc}"})
            raise
        self.hub.publish(session_id, {"type": "turn.done", "reply": result.reply, "stop_reason": result.stop_reason,
                                      "usage": result.usage.model_dump()})
        return result

    def resume_later(self, agent: str, session_id: str) -> None:
        """Resume a turn whose approval was answered after it stopped waiting (a restart)."""
        a = self.agents.get(agent)
        if a is None:
            log.warning("approval answered for agent %s, which this server does not serve", agent)
            return

        async def go() -> None:
            try:
                await self._locked(session_id, True, lambda: a.resume(session_id, deliver=self._delta(session_id)))
            except Exception:
                log.exception("resuming session %s failed", session_id)

        self._track(asyncio.ensure_future(go()), session_id)

    def _track(self, task: asyncio.Task, session_id: str) -> None:
        self._tasks[task] = session_id
        task.add_done_callback(lambda t: self._tasks.pop(t, None))

    def _delta(self, session_id: str) -> Deliver:
        def deliver(outbound: Any) -> None:
            if outbound.kind == "stream_chunk" and outbound.content:
                self.hub.publish(session_id, {"type": "delta", "text": outbound.content})

        return deliver

    async def shutdown(self, timeout: float) -> None:
        """Let running turns finish for up to ``timeout`` s; then cancel them (a turn waiting for
        approval is already checkpointed: its request and history are in the database). Agents close
        in :meth:`close`, after the HTTP server has stopped."""
        self.stopping = True
        waiting = self.waiting_sessions()
        parked = {t for t, sid in self._tasks.items() if sid in waiting}
        for t in parked:
            t.cancel()
        running = set(self._tasks) - parked
        if running:
            _, late = await asyncio.wait(running, timeout=timeout)
            for t in late:
                t.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)

    async def close(self) -> None:
        for a in self.agents.values():
            try:
                await a.drain(timeout=2)
            finally:
                a.close()
