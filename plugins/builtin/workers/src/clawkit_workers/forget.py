"""Forgetting sessions on the turn queue (the ``forget_sessions`` hook; docs/forget.md).

A session store on PostgreSQL is also the queue's database: each queued turn of a session is a
DBOS workflow whose input holds the session id and the user's text, with its steps' outputs (model
replies, tool results), its streamed chunks (``clawkit_turn_chunks``), its approvals
(``clawkit_approvals``, the call's arguments) and the attachments it carried
(``clawkit_attachments``, by SHA-256). All of it goes: the workflows through DBOS's
``delete_workflows`` (their children too), the rest by SQL. A SQLite store has no queue: nothing to do.
Any failure (the database unreachable, DBOS refusing) propagates: ``clawkit sessions delete`` then
reports it and exits non-zero, keeping the session so it can be run again.
"""

from __future__ import annotations

from typing import Any

from . import pg
from .client import APP_NAME, WORKFLOW

PAGE = 500


def _tables(conn: Any) -> set[str]:
    return {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}


def _turns(url: str, wanted: set[str]) -> list[str]:
    """The workflow ids of the queued turns of ``wanted`` sessions (the session id is the input's second argument)."""
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=url, application_name=APP_NAME)
    try:
        ids: list[str] = []
        offset = 0
        while True:
            page = client.list_workflows(name=WORKFLOW, limit=PAGE, offset=offset, load_output=False)
            for s in page:
                args = (getattr(s, "input", None) or {}).get("args") or ()
                if len(args) > 1 and args[1] in wanted:
                    ids.append(s.workflow_id)
            if len(page) < PAGE:
                break
            offset += PAGE
        if ids:
            client.delete_workflows(ids, delete_children=True)
        return ids
    finally:
        destroy = getattr(client, "destroy", None)
        if callable(destroy):
            destroy()


def forget(store: Any, session_ids: list[str]) -> dict[str, int] | None:
    if not session_ids:  # (a SQLite store has no queue: the hook does not import this module for one)
        return None
    url = str(store.path)
    counts = {"turn_workflows": 0, "turn_chunks": 0, "approvals": 0, "attachments": 0}
    marks = ",".join(["%s"] * len(session_ids))
    with pg.connect(url) as conn:
        tables = _tables(conn)
        if "dbos" in {r[0] for r in conn.execute("SELECT schema_name FROM information_schema.schemata")}:
            turns = _turns(url, set(session_ids))
            counts["turn_workflows"] = len(turns)
            if turns and "clawkit_turn_chunks" in tables:
                counts["turn_chunks"] = conn.execute(
                    f"DELETE FROM clawkit_turn_chunks WHERE turn_id IN ({','.join(['%s'] * len(turns))})", turns).rowcount
        if "clawkit_approvals" in tables:
            counts["approvals"] = conn.execute(f"DELETE FROM clawkit_approvals WHERE session_id IN ({marks})",
                                               session_ids).rowcount
        if "clawkit_attachments" in tables and "messages" in tables:
            from clawkit.forget import unshared_attachments

            for sha in unshared_attachments(store, session_ids):
                counts["attachments"] += conn.execute("DELETE FROM clawkit_attachments WHERE sha256 = %s", (sha,)).rowcount
    return counts
