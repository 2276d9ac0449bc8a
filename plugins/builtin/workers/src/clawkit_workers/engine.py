"""The DBOS side: the turn workflow, its steps, the queue, and the worker process.

A turn is the workflow ``clawkit.turn``; its first step records how many messages the
session had, every model call and every tool execution is a step (``DurableSteps``, the
kernel's ``durable_steps`` seam), and an approval is a step that waits for the answer in
PostgreSQL. When a turn is recovered (its worker died), the workflow runs again from the
top: the session is cut back to the recorded length and every finished step returns its
recorded result, so the transcript is rebuilt in order and no finished step runs twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from typing import Any

from dbos import DBOS

from clawkit.steps import idempotency_key
from clawkit.types import ToolCall

from . import approvals as approvals_mod
from .approvals import save_progress  # noqa: F401  (used before each tool step; beside the approval wait that uses it too)
from . import chunks, liveness
# every worker and client uses one application version, so any worker may run and recover any
# turn (DBOS only hands a workflow to executors of the version it was started under)
from .client import APP_NAME, APP_VERSION, QUEUE, WORKFLOW

log = logging.getLogger("clawkit.workers")


_worker: "Worker | None" = None


def active() -> bool:
    return _worker is not None


# --- the workflow ------------------------------------------------------------------------


@DBOS.workflow(name=WORKFLOW)
async def run_turn(agent: str, session_id: str, text: str, stream: bool = False, traceparent: str | None = None,
                   settings: dict[str, Any] | None = None, attachments: list[Any] | None = None) -> dict[str, Any]:
    """``settings``: the request's model settings, checked by the front-end (``response_format`` makes
    the turn typed); ``attachments``: references to bytes in ``clawkit_attachments`` and URLs (:mod:`.queued`).
``stream``: what the turn delivers (model text as it arrives, a reply not streamed) is
    written to the chunk table for the front-end that waits on it (:mod:`.chunks`).
    ``traceparent``: the submitter's W3C trace context; the turn runs under it (the kernel's
    ``incoming_traceparent``, which telemetry joins), so a served turn's spans join the caller's trace."""
    from clawkit.context import incoming_traceparent

    token = incoming_traceparent.set(traceparent)
    try:
        return await _run_turn(agent, session_id, text, stream, settings or {}, attachments)
    finally:
        incoming_traceparent.reset(token)


async def _run_turn(agent: str, session_id: str, text: str, stream: bool, settings: dict[str, Any],
                    attachments: list[Any] | None) -> dict[str, Any]:
    from clawkit.output import OutputValidationError

    from . import queued

    worker = _worker
    if worker is None:  # pragma: no cover - DBOS only runs workflows in a launched worker
        raise RuntimeError("clawkit.turn runs only inside `clawkit worker`")
    a = worker.agent(agent)
    base = await DBOS.run_step_async({"name": "clawkit.begin"}, _begin, a, agent, session_id)
    _rewind(a, session_id, base)
    sink = None
    if stream:
        turn_id = DBOS.workflow_id
        sink = chunks.TurnSink(worker.chunks, turn_id, await asyncio.to_thread(worker.chunks.stored, turn_id))
    extra: dict[str, Any] = {}
    if settings.get("response_format"):
        extra["output_type"] = settings["response_format"]
    if attachments:
        extra["attachments"] = await asyncio.to_thread(queued.blocks, attachments, a)
    token = queued.CURRENT.set((session_id, settings) if settings else None)
    try:
        result = await a.turn(text, session_id=session_id, deliver=sink, **extra)
    except OutputValidationError as exc:  # the turn ended; the front-end answers as in process (502 output_invalid)
        await a.drain(timeout=5)
        return {"session_id": session_id, "output_invalid": {"errors": exc.errors, "reply": exc.reply,
                "attempts": exc.attempts, "run_id": exc.run_id}}
    finally:
        queued.CURRENT.reset(token)
        if sink is not None:  # every chunk is in the table before the result is
            await asyncio.to_thread(worker.chunks.flush)
    await a.drain(timeout=5)
    return {**result.as_json(), "run_id": result.run_id}


async def _begin(a: Any, agent: str, session_id: str) -> int:
    """The session's length before this turn (created if new): what a recovery cuts back to."""
    if not a.store.exists(session_id):
        try:
            a.store.create(agent, session_id)
        except Exception:  # created meanwhile by a front-end (serve's open_session)
            if not a.store.exists(session_id):
                raise
    return _count(a.store, session_id)


def _count(store: Any, session_id: str) -> int:
    store.flush()
    return int(store.conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0])


def _rewind(a: Any, session_id: str, base: int) -> None:
    """A recovered turn starts from the session as it was before the turn: the messages the
    interrupted execution wrote are written again, in order, as its steps replay. So is its usage
    (saved as it accrued, :func:`save_progress`): the interrupted run's rows go, the replay's count."""
    if _count(a.store, session_id) > base:
        a.store.replace_messages(session_id, a.store.messages(session_id)[:base])
    a.store.conn.execute("DELETE FROM usage WHERE session_id = ? AND run_id IN "
                         "(SELECT id FROM runs WHERE session_id = ? AND status = 'running')", (session_id, session_id))
    a._sessions.pop(session_id, None)  # another worker may have added turns: never a stale cache


class DurableSteps:
    """The :class:`clawkit.steps.StepRunner` of one turn running as a DBOS workflow.

    Tool calls of one model response run concurrently; their step ids are drawn in the
    model's order when the batch starts (``reserve``), two per call (approval, execution),
    so a replay numbers them the same way whatever order the calls finish in.
    """

    def __init__(self, workflow_id: str):
        self.workflow_id = workflow_id
        self._slots: dict[str, tuple[Any, Any]] = {}

    async def model(self, ctx: Any, request: Any, call: Any) -> Any:
        return await DBOS.run_step_async({"name": "clawkit.model"}, call)

    def reserve(self, ctx: Any, calls: list[ToolCall]) -> None:
        for c in calls:
            self._slots[c.id] = (DBOS.reserve_step(), DBOS.reserve_step())

    async def tool(self, ctx: Any, call: ToolCall, run: Any) -> Any:
        save_progress(ctx)
        slot = self._slots.get(call.id)
        if slot is None:  # not reserved (a plugin ran a call on its own): a step in line
            return await DBOS.run_step_async({"name": f"clawkit.tool:{call.name}"}, run)
        execution = slot[1]
        key = f"{self.workflow_id}:{execution.step_id}"

        async def step() -> Any:
            token = idempotency_key.set(key)
            try:
                return await run()
            finally:
                idempotency_key.reset(token)

        return await execution.run_async({"name": f"clawkit.tool:{call.name}"}, step)

    def approval_slot(self, call_id: str) -> Any:
        slot = self._slots.get(call_id)
        return slot[0] if slot else None


def steps_for(ctx: Any) -> DurableSteps | None:
    """Durable steps when this turn is a workflow's own (not a sub-agent's turn inside a tool step)."""
    from dbos._context import get_local_dbos_context

    c = get_local_dbos_context()
    if c is None or not c.is_workflow():
        return None
    return DurableSteps(c.workflow_id)


# --- the worker --------------------------------------------------------------------------


class Worker:
    """One ``clawkit worker`` process: agents, DBOS, the queue, liveness and recovery."""

    def __init__(self, paths: list[str], url: str, *, concurrency: int = 8, executor_id: str | None = None,
                 overrides: dict | None = None, dead_after: float = 15.0,
                 poll: float = 0.1):
        from clawkit.runtime import load_config

        self.url, self.concurrency, self.dead_after, self.poll = url, concurrency, dead_after, poll
        self.executor_id = executor_id or f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
        self.configs = {}
        for path in paths:
            cfg, _ = load_config(path, overrides)
            if cfg.name in self.configs:
                raise ValueError(f"{path}: an agent named {cfg.name!r} is loaded already (names pick agents: make them unique)")
            self.configs[cfg.name] = cfg
        self._agents: dict[str, Any] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.chunks: Any = None

    def agent(self, name: str) -> Any:
        a = self._agents.get(name)
        if a is None:
            from clawkit.loop import Agent
            from clawkit.plugins import get_plugin_manager

            cfg = self.configs.get(name)
            if cfg is None:
                raise KeyError(f"this worker does not serve agent {name!r} (it serves: {', '.join(self.configs)})")
            from .queued import PgBlobStore, QueuedSettings

            pm = get_plugin_manager(disabled=cfg.disabled_plugins(), extra=(QueuedSettings(),))
            section = cfg.plugin("workers")
            approver = approvals_mod.durable_approver(self.url, float(getattr(section, "approval_timeout", 3600.0)))
            a = self._agents[name] = Agent(cfg, pm=pm, approver=approver, channel="worker")
            a.attachment_store = PgBlobStore(self.url)  # shared by every machine (docs/scale-out.md)
        return a

    def start(self) -> None:
        global _worker
        _worker = self
        for name in self.configs:
            self.agent(name)
        DBOS(config={"name": APP_NAME, "system_database_url": self.url, "application_version": APP_VERSION,
                     "executor_id": self.executor_id, "log_level": os.environ.get("CLAWKIT_DBOS_LOG", "WARNING"),
                     "notification_listener_polling_interval_sec": 0.1})
        approvals_mod.ensure_schema(self.url)
        liveness.ensure_schema(self.url)
        chunks.ensure_schema(self.url)
        self.chunks = chunks.ChunkWriter(self.url)
        DBOS.launch()
        # turns of one session run one at a time, in order (a partition per session)
        DBOS.register_queue(QUEUE, worker_concurrency=self.concurrency, partition_concurrency=1,
                            polling_interval_sec=self.poll, on_conflict="always_update")
        liveness.beat(self.url, self.executor_id)
        t = threading.Thread(target=self._watch, name="clawkit-worker-liveness", daemon=True)
        t.start()
        self._threads.append(t)

    def _watch(self) -> None:
        """Beat every second; recover the turns of workers that stopped beating."""
        interval = min(1.0, self.dead_after / 3)
        beats = 0
        while not self._stop.wait(interval):
            beats += 1
            try:
                if beats % 300 == 1:
                    chunks.sweep(self.url)
                liveness.beat(self.url, self.executor_id)
                dead = liveness.claim_dead(self.url, self.executor_id, self.dead_after)
                if dead:
                    handles = DBOS._recover_pending_workflows(dead)
                    log.warning("worker %s: recovering %d turns of stopped workers %s", self.executor_id, len(handles), ", ".join(dead))
            except Exception:
                log.exception("worker liveness check failed")

    def stop(self, timeout: float = 10.0) -> None:
        global _worker
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        try:
            DBOS.destroy(workflow_completion_timeout_sec=int(timeout))
        finally:
            try:
                liveness.gone(self.url, self.executor_id)  # the others take over its turns at once
            except Exception:
                log.exception("marking worker %s gone failed", self.executor_id)
            for a in self._agents.values():
                a.close()
            if self.chunks is not None:
                self.chunks.close()
            _worker = None


def serve_forever(worker: Worker, ready: Any = None, shutdown_timeout: float = 10.0) -> None:
    """Run until SIGTERM/SIGINT; print a ready line (tests and supervisors wait for it)."""
    import signal

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    worker.start()
    if ready is not None:
        ready()
    while not stop.wait(0.5):
        pass
    worker.stop(shutdown_timeout)
