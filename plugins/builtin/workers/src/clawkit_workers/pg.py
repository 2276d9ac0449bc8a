"""Small helpers for the plugin's own tables in the PostgreSQL database the workers share."""

from __future__ import annotations

import zlib
from typing import Any


def connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True)


def ensure(url: str, name: str, ddl: str) -> None:
    """Create tables once, even with many workers starting together (one advisory lock per name)."""
    with connect(url) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(name.encode()),))
        conn.execute(ddl)
