"""Durable approvals: a tool call waiting for a person, kept in the server's database.

A request is a row (``serve_approvals``) bound to the session, the call's id, the
call hash (:func:`clawkit.approvals.call_hash`, the one the audit ledger records), and
an expiry. The answer names the API key that gave it (``answered_by``: its id and name);
the approver hands that to the kernel, so the ledger's chained record names the key too. The waiting turn
holds an in-process future; an answer (API or panel) settles it. After a restart the
future is gone but the row and the turn's history are not: the answer is recorded,
and the runner *resumes* the turn (:meth:`clawkit.loop.Agent.resume`), whose gate asks
again — the approver then answers from the row, if the call's hash still matches and
the answer has not expired. Past ``expires`` a request is denied and the model is told
why. :class:`ApprovalBroker` is the interface a queue-backed runner keeps.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
import time
from typing import Any, Callable

from clawkit.approvals import Answer, call_hash
from clawkit.storage import Column, Index, Table, declare
from clawkit.types import new_id

TABLE = Table("serve_approvals", (
    Column("id", nullable=False), Column("agent", nullable=False), Column("session_id", nullable=False),
    Column("run_id"), Column("call_id", nullable=False), Column("tool", nullable=False),
    Column("arguments", nullable=False), Column("call_hash", nullable=False), Column("reason", nullable=False),
    Column("risk"), Column("status", nullable=False), Column("created", "real", nullable=False),
    Column("expires", "real", nullable=False), Column("answered", "real"), Column("answered_by"), Column("note"),
    Column("consumed", "real"),
), primary_key=("id",), indexes=(Index("serve_approvals_call", ("session_id", "call_id")),
                                 Index("serve_approvals_status", ("status", "created"))))
COLUMNS = ("id", "agent", "session_id", "run_id", "call_id", "tool", "arguments", "call_hash", "reason", "risk",
           "status", "created", "expires", "answered", "answered_by", "note", "consumed")


def answered_by(key_id: str, key_name: str) -> str:
    """How an answer given with an API key is recorded (``answered_by``): its id and its name."""
    return f"key {key_id} ({key_name})"


_BY_KEY = re.compile(r"key (\S+) \((.*)\)", re.DOTALL)


def identity(by: str | None) -> dict[str, Any]:
    """Who answered, as fields for the audit ledger: ``{"kind": "api_key", "key_id", "key_name"}`` for an
    answer given with an API key (see :func:`answered_by`), else ``{"kind": "server", "by": by}``."""
    m = _BY_KEY.fullmatch(by or "")
    if m:
        return {"kind": "api_key", "key_id": m.group(1), "key_name": m.group(2)}
    return {"kind": "server", "by": by or ""}


class ApprovalTimedOut(Exception):
    """Nobody answered before the request expired (the kernel turns this into a denial)."""


class ApprovalError(Exception):
    """An answer that cannot be taken: ``status`` is the HTTP status to report."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class ApprovalBroker:
    """Creates, waits on and answers approval requests; ``on_orphan_answer(row)`` is called
    when an answer arrives for a request no turn in this process waits on (after a restart)."""

    def __init__(self, conn: sqlite3.Connection, *, timeout: float = 3600.0,
                 publish: Callable[[str, dict[str, Any]], None] | None = None):
        self.conn = conn
        declare(conn, TABLE)
        self.timeout = timeout
        self.publish = publish or (lambda session_id, event: None)
        self.on_orphan_answer: Callable[[dict[str, Any]], None] = lambda row: None
        self._waiting: dict[str, asyncio.Future] = {}
        self._waiting_session: dict[str, str] = {}
        self._lock = threading.Lock()

    def forget_sessions(self, session_ids: Any) -> int:
        """Delete the approvals asked in deleted sessions (a call's arguments are in them)."""
        from clawkit.forget import delete_keyed

        with self._lock:
            return delete_keyed(self.conn, "serve_approvals", "session_id", session_ids)

    # reading --------------------------------------------------------------------------------

    def _rows(self, sql: str, args: tuple = ()) -> list[dict[str, Any]]:
        with self._lock:
            rows = self.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM serve_approvals {sql}", args).fetchall()
        out = []
        for r in rows:
            d = dict(zip(COLUMNS, r))
            d["arguments"] = json.loads(d["arguments"])
            out.append(d)
        return out

    def get(self, approval_id: str) -> dict[str, Any] | None:
        found = self._rows("WHERE id = ?", (approval_id,))
        return found[0] if found else None

    def list(self, status: str | None = "pending", session_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        where, args = [], []
        if status:
            where.append("status = ?")
            args.append(status)
        if session_id:
            where.append("session_id = ?")
            args.append(session_id)
        sql = ("WHERE " + " AND ".join(where) if where else "") + " ORDER BY created DESC LIMIT ?"
        return self._rows(sql, (*args, limit))

    def waiting_sessions(self) -> set[str]:
        """Sessions whose turn, in this process, waits for an answer."""
        return set(self._waiting_session.values())

    def _set(self, approval_id: str, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._lock:
            self.conn.execute(f"UPDATE serve_approvals SET {cols} WHERE id = ?", (*fields.values(), approval_id))

    # the approver ---------------------------------------------------------------------------

    def approver(self, agent_name: str, timeout: float | None = None) -> Callable[..., Any]:
        """The approver for ``agent_name``'s turns: ``async (call, reason, ctx) -> bool``."""

        async def approve(call: Any, reason: str, ctx: Any) -> bool:
            return await self.request(agent_name, call, reason, ctx, timeout=timeout)

        return approve

    async def request(self, agent_name: str, call: Any, reason: str, ctx: Any, *, timeout: float | None = None) -> Answer:
        digest = call_hash(call.name, call.arguments)
        now = time.time()
        found = self._rows("WHERE session_id = ? AND call_id = ? AND consumed IS NULL ORDER BY created DESC LIMIT 1",
                           (ctx.session.id, call.id))
        row = found[0] if found else None
        if row is not None and row["status"] != "pending":
            return self._consume(row, digest)
        if row is None:
            row = self._create(agent_name, call, digest, reason, ctx, now, timeout or self.timeout)
        loop = asyncio.get_running_loop()
        fut = self._waiting.get(row["id"])
        if fut is None:
            fut = self._waiting[row["id"]] = loop.create_future()
        self._waiting_session[row["id"]] = row["session_id"]
        try:
            await asyncio.wait_for(asyncio.shield(fut), max(0.0, row["expires"] - time.time()))
        except asyncio.TimeoutError:
            self._set(row["id"], status="expired", answered=time.time(), note="no answer before expiry", consumed=time.time())
            self.publish(row["session_id"], {"type": "approval.expired", "approval": row["id"]})
            waited = row["expires"] - row["created"]
            raise ApprovalTimedOut(f"no answer within {waited:g} s (approval {row['id']} expired)") from None
        finally:
            self._waiting.pop(row["id"], None)
            self._waiting_session.pop(row["id"], None)
        return self._consume(self.get(row["id"]) or row, digest)

    def _create(self, agent_name: str, call: Any, digest: str, reason: str, ctx: Any, now: float, timeout: float) -> dict[str, Any]:
        risk = None
        try:
            tool = ctx.tools.get(call.name)
            risk = tool.definition.risk.value if tool is not None else None
        except Exception:
            pass
        row = {"id": new_id("apr"), "agent": agent_name, "session_id": ctx.session.id, "run_id": ctx.run_id,
               "call_id": call.id, "tool": call.name, "arguments": call.arguments, "call_hash": digest,
               "reason": reason, "risk": risk, "status": "pending", "created": now, "expires": now + timeout,
               "answered": None, "answered_by": None, "note": None, "consumed": None}
        values = [json.dumps(v, default=str) if k == "arguments" else v for k, v in row.items()]
        with self._lock:
            self.conn.execute(f"INSERT INTO serve_approvals ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})", values)
        self.publish(row["session_id"], {"type": "approval.pending", "approval": public(row)})
        return row

    def _consume(self, row: dict[str, Any], digest: str) -> Answer:
        """Use a recorded answer once: it must be for this exact call and not past its expiry. The
        answer names who gave it and the call hash they were shown (the row's)."""
        self._set(row["id"], consumed=time.time())
        if row["status"] == "expired":
            raise ApprovalTimedOut(f"approval {row['id']} expired before an answer ({row.get('note') or 'no answer'})")
        if row["call_hash"] != digest:
            raise ApprovalTimedOut(f"approval {row['id']} was for different arguments; ask again")
        who = identity(row.get("answered_by"))
        return Answer(row["status"] == "approved", row.get("answered_by") or "server", {**who, "approval": row["id"]},
                      row["call_hash"])

    # answers --------------------------------------------------------------------------------

    def answer(self, approval_id: str, approve: bool, *, by: str, call_hash: str | None = None,
               note: str | None = None) -> dict[str, Any]:
        row = self.get(approval_id)
        if row is None:
            raise ApprovalError(404, f"no approval {approval_id}")
        if row["status"] != "pending":
            raise ApprovalError(409, f"approval {approval_id} is already {row['status']}")
        now = time.time()
        if row["expires"] <= now:
            self._set(approval_id, status="expired", answered=now, note="answered after expiry")
            self._after_answer(self.get(approval_id) or row)
            raise ApprovalError(410, f"approval {approval_id} expired at {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(row['expires']))} UTC")
        if call_hash is not None and call_hash != row["call_hash"]:
            raise ApprovalError(409, "call_hash does not match the pending call's arguments")
        status = "approved" if approve else "denied"
        self._set(approval_id, status=status, answered=now, answered_by=by, note=note)
        row = self.get(approval_id) or row
        self._after_answer(row)
        return row

    def _after_answer(self, row: dict[str, Any]) -> None:
        self.publish(row["session_id"], {"type": "approval.answered", "approval": public(row)})
        fut = self._waiting.get(row["id"])
        if fut is not None and not fut.done():
            fut.get_loop().call_soon_threadsafe(lambda: fut.done() or fut.set_result(row["status"]))
        elif fut is None:
            self.on_orphan_answer(row)

    def supersede(self, session_id: str) -> None:
        """A new turn starts on ``session_id``: requests no turn here waits on (left by a restart)
        can no longer resume theirs — the new turn closes the unanswered call as interrupted."""
        now = time.time()
        for r in self._rows("WHERE session_id = ? AND status = 'pending'", (session_id,)):
            if r["id"] not in self._waiting:
                self._set(r["id"], status="expired", answered=now, note="superseded by a new turn", consumed=now)
                self.publish(session_id, {"type": "approval.expired", "approval": r["id"]})

    def sweep(self) -> list[dict[str, Any]]:
        """Expire pending requests past their expiry that no turn here waits on; returns them."""
        now = time.time()
        stale = [r for r in self._rows("WHERE status = 'pending' AND expires <= ?", (now,)) if r["id"] not in self._waiting]
        for r in stale:
            self._set(r["id"], status="expired", answered=now, note="no answer before expiry")
            self._after_answer({**r, "status": "expired"})
        return stale


def public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in COLUMNS if k != "consumed"}
