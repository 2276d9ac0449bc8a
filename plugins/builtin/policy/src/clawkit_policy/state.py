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


#: seconds a store keeps an agent's persistent grants before reading them again (another process may
#: have stored one, or deleted one by hand); grants stored in this process are seen at once
GRANTS_TTL = 1.0
#: database -> times a grant was stored in it by this process (a store's cache older than that reads again)
_generation: dict[str | None, int] = {}


class PolicyState:
    """Approvals (bound to a session and a call hash, with an expiry) and persistent grants."""

    def __init__(self, conn: sqlite3.Connection, db: str | None = None):
        self.conn = conn
        declare(conn, *TABLES)
        #: the database these grants live in (:func:`.anchor.db_file`): grants stored in this process
        #: through any store of it are seen by every store's next turn (see :meth:`grants`)
        self.db = db
        self._grants: dict[str, tuple[float, int, tuple[Grant, ...]]] = {}  # agent -> (until, generation, grants)

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
        _generation[self.db] = _generation.get(self.db, 0) + 1  # every store of this database reads again

    def grants(self, agent: str) -> list[Grant]:
        """The agent's persistent grants, read from the database at most once per :data:`GRANTS_TTL`
        (a turn reads no table for them): a grant stored in this process is seen by the next turn of
        every store of the database; one stored, or a row deleted, by another process within
        :data:`GRANTS_TTL`."""
        now = time.monotonic()
        generation = _generation.get(self.db, 0)
        found = self._grants.get(agent)
        if found is not None and found[0] > now and found[1] == generation:
            return list(found[2])
        out = []
        for (spec,) in self.conn.execute("SELECT spec FROM policy_grants WHERE agent = ? ORDER BY id", (agent,)):
            try:
                out.append(Grant.model_validate(json.loads(spec)))
            except Exception:
                continue  # a damaged row grants nothing
        self._grants[agent] = (now + GRANTS_TTL, generation, tuple(out))
        return out
