"""Durable approvals for queued turns: a tool call waiting for a person is a row in PostgreSQL
and a workflow step that waits for the row's answer.

The waiting step belongs to the turn's workflow, so nothing pins a process: when the worker
stops (or dies), another worker recovers the turn, the finished steps replay and the wait
resumes on the same row. An answer — from the API, the panel or ``clawkit approvals``, on
any machine — is an update of that row, checked against the call's hash and expiry.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from typing import Any

from clawkit.approvals import Answer, call_hash  # the one call hash (the audit ledger's)

from . import pg

DDL = """
CREATE TABLE IF NOT EXISTS clawkit_approvals (
    id TEXT PRIMARY KEY, workflow_id TEXT NOT NULL, agent TEXT NOT NULL, session_id TEXT NOT NULL, run_id TEXT,
    call_id TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL, call_hash TEXT NOT NULL, reason TEXT NOT NULL,
    risk TEXT, status TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, expires DOUBLE PRECISION NOT NULL,
    answered DOUBLE PRECISION, answered_by TEXT, note TEXT
);
CREATE INDEX IF NOT EXISTS clawkit_approvals_status ON clawkit_approvals (status, created);
CREATE INDEX IF NOT EXISTS clawkit_approvals_session ON clawkit_approvals (session_id, call_id);
"""
COLUMNS = ("id", "workflow_id", "agent", "session_id", "run_id", "call_id", "tool", "arguments", "call_hash", "reason",
           "risk", "status", "created", "expires", "answered", "answered_by", "note")
NOW = "extract(epoch from clock_timestamp())"
POLL = 0.25  # seconds between looks at a waiting row
log = logging.getLogger("clawkit.workers.approvals")


class ApprovalError(Exception):
    """An answer that cannot be taken: ``status`` is the HTTP status to report."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def ensure_schema(url: str) -> None:
    pg.ensure(url, "clawkit_approvals", DDL)


_BY_KEY = re.compile(r"key (\S+) \((.*)\)", re.DOTALL)


def identity(by: str | None) -> dict[str, Any]:
    """Who answered, for the audit ledger: an API key's id and name (``key <id> (<name>)``, as the
    server records it), else the ``--by`` a person gave ``clawkit approvals``."""
    m = _BY_KEY.fullmatch(by or "")
    if m:
        return {"kind": "api_key", "key_id": m.group(1), "key_name": m.group(2)}
    return {"kind": "queue", "by": by or ""}


def _row(cur: Any, r: tuple) -> dict[str, Any]:
    d = dict(zip([c.name for c in cur.description], r))
    d["arguments"] = json.loads(d["arguments"])
    return d


def durable_approver(url: str, timeout: float = 3600.0) -> Any:
    """The approver of a worker's agents: inside a queued turn, wait for the answer durably."""

    async def approve(call: Any, reason: str, ctx: Any) -> Answer | bool:
        slot = ctx.steps.approval_slot(call.id) if getattr(ctx, "steps", None) is not None and hasattr(ctx.steps, "approval_slot") else None
        if slot is None:
            return False  # not a queued turn: nobody can answer
        tool = ctx.tools.get(call.name)
        risk = getattr(getattr(getattr(tool, "definition", None), "risk", None), "value", None)
        request = {"id": "apr_" + hashlib.sha256(f"{ctx.steps.workflow_id}:{call.id}".encode()).hexdigest()[:20],
                   "workflow_id": ctx.steps.workflow_id, "agent": ctx.agent.name, "session_id": ctx.session.id,
                   "run_id": ctx.run_id, "call_id": call.id, "tool": call.name, "arguments": call.arguments,
                   "call_hash": call_hash(call.name, call.arguments), "reason": reason, "risk": risk}

        save_progress(ctx)  # the usage so far is visible while the turn waits (the panel's tokens)
        row = await slot.run_async({"name": "clawkit.approval"}, wait_for_answer, url, request, timeout)
        ctx.emit("approval.answered", approval=row["id"], status=row["status"], by=row.get("answered_by"))
        approved = row["status"] == "approved" and row["call_hash"] == request["call_hash"]
        who = {**identity(row.get("answered_by")), "approval": row["id"]}
        return Answer(approved, row.get("answered_by") or "queue", who, row["call_hash"])

    return approve


async def wait_for_answer(url: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The approval step: record the request (once, whichever attempt runs this), then wait
    until it is answered or expires. Re-run after a crash, it finds its row and waits on."""
    import psycopg

    while True:
        try:
            return await _wait(url, request, timeout)
        except psycopg.OperationalError as exc:  # the database restarting: wait for it, keep the turn
            log.warning("approval %s: database unavailable (%s); retrying", request["id"], exc)
            await asyncio.sleep(1.0)


async def _wait(url: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        values = {**request, "arguments": json.dumps(request["arguments"], default=str), "timeout": timeout}
        await conn.execute(
            f"INSERT INTO clawkit_approvals (id, workflow_id, agent, session_id, run_id, call_id, tool, arguments, call_hash, "
            f"reason, risk, status, created, expires) VALUES (%(id)s, %(workflow_id)s, %(agent)s, %(session_id)s, %(run_id)s, "
            f"%(call_id)s, %(tool)s, %(arguments)s, %(call_hash)s, %(reason)s, %(risk)s, 'pending', {NOW}, {NOW} + %(timeout)s) "
            f"ON CONFLICT (id) DO NOTHING", values)
        while True:
            cur = await conn.execute(
                f"UPDATE clawkit_approvals SET status = CASE WHEN status = 'pending' AND expires <= {NOW} THEN 'expired' "
                f"ELSE status END, answered = CASE WHEN status = 'pending' AND expires <= {NOW} THEN {NOW} ELSE answered END "
                f"WHERE id = %s RETURNING {', '.join(COLUMNS)}", (request["id"],))
            found = await cur.fetchone()
            if found is not None and found[COLUMNS.index("status")] != "pending":
                return _row(cur, found)
            await asyncio.sleep(POLL)


def list_approvals(url: str, status: str | None = "pending", session_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    where, args = [], []
    if status:
        where.append("status = %s")
        args.append(status)
    if session_id:
        where.append("session_id = %s")
        args.append(session_id)
    sql = f"SELECT {', '.join(COLUMNS)} FROM clawkit_approvals {'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY created DESC LIMIT %s"
    with pg.connect(url) as conn:
        cur = conn.execute(sql, (*args, limit))
        return [_row(cur, r) for r in cur.fetchall()]


def get(url: str, approval_id: str) -> dict[str, Any] | None:
    with pg.connect(url) as conn:
        cur = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM clawkit_approvals WHERE id = %s", (approval_id,))
        r = cur.fetchone()
        return _row(cur, r) if r else None


def answer(url: str, approval_id: str, approve: bool, *, by: str, call_hash: str | None = None, note: str | None = None) -> dict[str, Any]:
    """Answer a pending request once; 404 unknown, 409 answered already or other arguments, 410 expired."""
    with pg.connect(url) as conn:
        cur = conn.execute(
            f"UPDATE clawkit_approvals SET status = %s, answered = {NOW}, answered_by = %s, note = %s "
            f"WHERE id = %s AND status = 'pending' AND expires > {NOW} AND (%s::text IS NULL OR call_hash = %s) "
            f"RETURNING {', '.join(COLUMNS)}",
            ("approved" if approve else "denied", by, note, approval_id, call_hash, call_hash))
        r = cur.fetchone()
        if r is not None:
            return _row(cur, r)
    row = get(url, approval_id)
    if row is None:
        raise ApprovalError(404, f"no approval {approval_id}")
    if row["status"] != "pending":
        raise ApprovalError(409, f"approval {approval_id} is already {row['status']}")
    if call_hash is not None and call_hash != row["call_hash"]:
        raise ApprovalError(409, "call_hash does not match the pending call's arguments")
    raise ApprovalError(410, f"approval {approval_id} expired")


def save_progress(ctx: Any) -> None:
    """Commit what the turn observed so far (usage, steps, events: the store queues them for the
    turn's end) before a wait: the panel, in another process, reads them while the turn waits
    for a tool or an approval. On PostgreSQL a commit is a transaction; a turn makes a few."""
    store = getattr(getattr(ctx, "session", None), "store", None)
    if store is not None:
        try:
            store.flush()
        except Exception as exc:  # an observation not yet visible never stops the turn
            log.warning("saving the turn's progress failed: %s", exc)
