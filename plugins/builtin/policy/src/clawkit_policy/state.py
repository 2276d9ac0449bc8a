"""Durable policy state in the session database: approvals and persistent grants."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from clawkit.storage import Column, Index, Table, declare

from .config import Grant

TABLES = (
    Table("policy_approvals", (
        Column("session_id", nullable=False), Column("approval_key", nullable=False), Column("tool", nullable=False),
        Column("approved_by"), Column("created", "real", nullable=False), Column("expires", "real", nullable=False),
    ), indexes=(Index("policy_approvals_key", ("session_id", "approval_key")),)),
    Table("policy_grants", (
        Column("id", "integer", autoincrement=True), Column("agent", nullable=False), Column("spec", nullable=False),
        Column("created", "real", nullable=False),
    ), indexes=(Index("policy_grants_agent", ("agent",)),)),
)


class PolicyState:
    """Approvals (bound to a session and a call hash, with an expiry) and persistent grants."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        declare(conn, *TABLES)

    def add_approval(self, session_id: str, key: str, tool: str, by: str | None, ttl: float) -> None:
        now = time.time()
        self.conn.execute(
            "INSERT INTO policy_approvals (session_id, approval_key, tool, approved_by, created, expires) VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, key, tool, by, now, now + ttl),
        )

    def approval(self, session_id: str, key: str) -> dict[str, Any] | None:
        """A still-valid approval of ``key`` in this session, or None."""
        row = self.conn.execute(
            "SELECT approved_by, created, expires FROM policy_approvals WHERE session_id = ? AND approval_key = ? "
            "AND expires > ? ORDER BY expires DESC LIMIT 1",
            (session_id, key, time.time()),
        ).fetchone()
        return None if row is None else {"by": row[0], "created": row[1], "expires": row[2]}

    def add_grant(self, agent: str, grant: Grant) -> None:
        self.conn.execute(
            "INSERT INTO policy_grants (agent, spec, created) VALUES (?, ?, ?)",
            (agent, grant.model_dump_json(), time.time()),
        )

    def grants(self, agent: str) -> list[Grant]:
        out = []
        for (spec,) in self.conn.execute("SELECT spec FROM policy_grants WHERE agent = ? ORDER BY id", (agent,)):
            try:
                out.append(Grant.model_validate(json.loads(spec)))
            except Exception:
                continue  # a damaged row grants nothing
        return out
