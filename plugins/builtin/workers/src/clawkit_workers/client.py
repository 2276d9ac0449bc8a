"""The turn queue as a front-end sees it: submit turns, wait for their results, answer approvals.

Used by the Python API (:func:`clawkit.runtime.open_turn_queue`), ``clawkit serve --db
postgresql://…`` and ``clawkit submit``/``clawkit approvals``. It only talks to PostgreSQL
(a DBOS client): no agent runs here.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from clawkit.types import new_id

from . import approvals as approvals_mod

APP_NAME = "clawkit"
QUEUE = "clawkit_turns"
WORKFLOW = "clawkit.turn"
APP_VERSION = "clawkit-turns-1"  # = engine.APP_VERSION (a test keeps them equal)
DONE = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}


def caller_traceparent() -> str | None:
    """The W3C ``traceparent`` of whoever submits: a served request's header, else ``TRACEPARENT``.
    Only its shape is checked here (bounded, printable); telemetry validates it where it is used."""
    import os

    from clawkit.context import incoming_traceparent

    value = incoming_traceparent.get() or os.environ.get("TRACEPARENT") or ""
    return value if 0 < len(value) <= 128 and value.isprintable() else None


class TurnFailed(Exception):
    """The turn ended with an error (its message), or was cancelled."""


class TurnQueue:
    def __init__(self, url: str):
        from dbos import DBOS, DBOSClient

        self.url = url
        approvals_mod.ensure_schema(url)  # first: an unreachable database fails here at once (DBOS retries)
        DBOS.migrate(url)  # idempotent: the first front-end or worker creates DBOS's tables
        self.client = DBOSClient(system_database_url=url, application_name=APP_NAME)

    def submit(self, agent: str, text: str, session_id: str | None = None, turn_id: str | None = None,
               *, stream: bool = False, traceparent: str | None = None, settings: dict[str, Any] | None = None,
               attachments: list[Any] | None = None) -> str:
        """Enqueue a turn of ``agent`` on ``session_id`` (a new session when None); returns the turn id.
        Turns of one session run one at a time, in the order they were submitted; resubmitting a
        ``turn_id`` returns the same turn, never a second one. ``stream``: the worker writes what the
        turn delivers as it goes (``chunks.ChunkFeed`` reads it). ``traceparent``: the caller's W3C trace
        context (default: the served request's, ``clawkit.context.incoming_traceparent``, else
        ``TRACEPARENT``); the worker runs the turn under it, so its spans join the caller's trace.
        ``settings``: model settings for this turn's calls (checked by the caller: serve's
        ``openai_request``; ``response_format`` makes it typed). ``attachments``: references from
        :func:`clawkit_workers.queued.references` (the bytes are in ``clawkit_attachments``) and URLs."""
        session_id = session_id or new_id("ses")
        turn_id = turn_id or new_id("turn")
        kwargs: dict[str, Any] = {"stream": True} if stream else {}
        parent = traceparent or caller_traceparent()
        if parent:
            kwargs["traceparent"] = parent
        if settings:
            from .queued import check_settings

            kwargs["settings"] = check_settings(settings)
        if attachments:
            kwargs["attachments"] = attachments
        self.client.enqueue({"queue_name": QUEUE, "workflow_name": WORKFLOW, "workflow_id": turn_id,
                             "queue_partition_key": session_id, "app_version": APP_VERSION}, agent, session_id, text, **kwargs)
        return turn_id

    def status(self, turn_id: str) -> dict[str, Any]:
        s = self.client.retrieve_workflow(turn_id).get_status()
        args = getattr(s, "input", None) or {}
        positional = args.get("args", ()) if isinstance(args, dict) else ()
        return {"turn_id": turn_id, "status": s.status, "executor": s.executor_id,
                "agent": positional[0] if len(positional) > 0 else None,
                "session_id": positional[1] if len(positional) > 1 else None}

    def result(self, turn_id: str, timeout: float | None = None, poll: float = 0.1) -> dict[str, Any]:
        """Wait for the turn (up to ``timeout`` s: ``TimeoutError``) and return ``TurnResult.as_json()``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        handle = self.client.retrieve_workflow(turn_id)
        while True:
            status = handle.get_status().status
            if status in DONE:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"turn {turn_id} is still {status} after {timeout:g} s")
            time.sleep(poll)
        if status != "SUCCESS":
            try:
                return handle.get_result()
            except Exception as exc:
                raise TurnFailed(f"turn {turn_id} {status.lower()}: {exc}") from exc
        return handle.get_result()

    async def result_async(self, turn_id: str, timeout: float | None = None, poll: float = 0.1) -> dict[str, Any]:
        return await asyncio.to_thread(self.result, turn_id, timeout, poll)

    def finished(self, turn_ids: list[str]) -> dict[str, tuple[bool, Any]]:
        """Of ``turn_ids``, those that ended: ``{id: (True, result) or (False, TurnFailed)}`` (one query)."""
        out: dict[str, tuple[bool, Any]] = {}
        for s in self.client.list_workflows(workflow_ids=turn_ids, load_input=False):
            if s.status == "SUCCESS":
                out[s.workflow_id] = (True, s.output)
            elif s.status in DONE:
                out[s.workflow_id] = (False, TurnFailed(f"turn {s.workflow_id} {s.status.lower()}: {s.error}"))
        return out

    def serve_backend(self, paths: list[Any], *, overrides: dict | None, hub: Any, errors: dict[str, type]) -> tuple[Any, Any]:
        """For ``clawkit serve --db postgresql://…``: a runner that enqueues turns and a broker
        over the workers' approvals (serve passes its event hub and its error classes)."""
        from .serve_backend import QueueBroker, QueueRunner

        runner = QueueRunner(self, paths, overrides=overrides, hub=hub, errors=errors)
        return runner, QueueBroker(self.url, errors=errors, publish=hub.publish)

    def approvals(self, status: str | None = "pending", session_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return approvals_mod.list_approvals(self.url, status, session_id, limit)

    def answer(self, approval_id: str, approve: bool, *, by: str = "api", call_hash: str | None = None,
               note: str | None = None) -> dict[str, Any]:
        return approvals_mod.answer(self.url, approval_id, approve, by=by, call_hash=call_hash, note=note)

    def close(self) -> None:
        self.client.destroy()

    def __enter__(self) -> "TurnQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
