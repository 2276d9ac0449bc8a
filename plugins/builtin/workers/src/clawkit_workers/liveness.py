"""Which workers are alive: each beats a row; a worker whose row went quiet for ``dead_after``
seconds (by the database's clock, so machines' clocks need not agree) is declared dead by the
first live worker to notice, which then has DBOS re-enqueue that worker's pending turns."""

from __future__ import annotations

import os
import socket

from . import pg

DDL = """
CREATE TABLE IF NOT EXISTS clawkit_workers (
    id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL,
    started DOUBLE PRECISION NOT NULL, seen DOUBLE PRECISION NOT NULL,
    recovered_by TEXT, recovered DOUBLE PRECISION
)"""
NOW = "extract(epoch from clock_timestamp())"


def ensure_schema(url: str) -> None:
    pg.ensure(url, "clawkit_workers", DDL)


def beat(url: str, executor_id: str) -> None:
    with pg.connect(url) as conn:
        conn.execute(f"INSERT INTO clawkit_workers (id, host, pid, started, seen) VALUES (%s, %s, %s, {NOW}, {NOW}) "
                     f"ON CONFLICT (id) DO UPDATE SET seen = {NOW}, recovered_by = NULL, recovered = NULL",
                     (executor_id, socket.gethostname(), os.getpid()))


def claim_dead(url: str, me: str, dead_after: float) -> list[str]:
    """Workers silent for ``dead_after`` s, claimed by ``me`` (exactly one live worker claims each)."""
    with pg.connect(url) as conn:
        rows = conn.execute(f"UPDATE clawkit_workers SET recovered_by = %s, recovered = {NOW} "
                            f"WHERE seen < {NOW} - %s AND recovered_by IS NULL AND id <> %s RETURNING id",
                            (me, dead_after, me)).fetchall()
    return [r[0] for r in rows]


def gone(url: str, executor_id: str) -> None:
    """A worker stopping on purpose: dead at once, so another takes over its waiting turns."""
    with pg.connect(url) as conn:
        conn.execute("UPDATE clawkit_workers SET seen = 0 WHERE id = %s", (executor_id,))


def workers(url: str) -> list[dict]:
    with pg.connect(url) as conn:
        cur = conn.execute(f"SELECT id, host, pid, started, seen, {NOW} - seen AS quiet, recovered_by FROM clawkit_workers ORDER BY started")
        cols = [c.name for c in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
