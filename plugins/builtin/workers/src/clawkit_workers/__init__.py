"""clawkit-workers: durable execution of turns on DBOS, state in PostgreSQL.

A turn submitted to the queue (``clawkit serve --db postgresql://…``, the Python API
:func:`clawkit.runtime.open_turn_queue`, ``clawkit submit``) is a DBOS workflow that any
``clawkit worker AGENT.yaml… --db postgresql://…`` process may run; its model calls and tool
executions are checkpointed steps (the kernel's ``durable_steps`` seam), approvals are
durable waits. A worker that dies mid-turn loses nothing: another recovers the turn and
replays its finished steps. Nothing here is imported unless a worker or a queue is opened:
single-process runs never load DBOS. See docs/scale-out.md.
"""

from __future__ import annotations

from clawkit import hookimpl
from clawkit.lazy import loaded


@hookimpl
def register_config(register):
    from .config import WorkersConfig

    register("workers", WorkersConfig)


@hookimpl
def durable_steps(ctx):
    engine = loaded("clawkit_workers.engine")
    if engine is None or not engine.active():
        return None  # not inside `clawkit worker`: the kernel runs the turn directly
    return engine.steps_for(ctx)


@hookimpl
def open_turn_queue(url):
    if not str(url).startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        return None
    from .client import TurnQueue

    return TurnQueue(str(url))


@hookimpl
def register_commands(cli):
    from .cli import register

    register(cli)


@hookimpl
def forget_sessions(store, session_ids):
    """Deleted sessions' queued turns (DBOS workflows, their steps' outputs and streamed chunks),
    approvals and unshared attachments go from the PostgreSQL database (see :mod:`.forget`)."""
    if getattr(store, "dialect", "sqlite") != "postgresql":
        return None
    from .forget import forget

    return forget(store, list(session_ids))
