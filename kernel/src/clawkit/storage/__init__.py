"""One storage interface, two backends: SQLite (the default, a file, nothing to install) and PostgreSQL.

A database is named by a path (SQLite) or a ``postgresql://`` URL. :func:`connect` opens either
and returns a connection with the ``sqlite3`` API — ``execute(sql, params)`` with ``?``
placeholders, ``executemany``, ``fetchone``/``fetchall``, ``lastrowid``, ``in_transaction``,
``with conn:`` for a transaction — so a plugin writes its SQL once. On SQLite it *is* the
``sqlite3`` connection (the fast path pays nothing). A server URL is opened by the storage plugin
that answers the ``open_storage`` hook for its scheme (:func:`open_url`): ``clawkit-postgres``
gives a connection that translates the placeholders, runs ``INSERT OR REPLACE``/``INSERT OR
IGNORE`` as ``ON CONFLICT`` on the table's primary key, answers ``lastrowid`` through
``RETURNING``, and raises ``sqlite3.Error`` subclasses (so one ``except`` covers both backends).
SQLite stays here, the embedded default; nothing of a server backend is imported for a file.

Tables are declared once with :class:`Table`/:class:`Column`/:class:`Index` and created on
either backend with :func:`declare`. Write portable SQL: ``?`` placeholders, standard types,
``INSERT … ON CONFLICT (key) DO UPDATE SET x = excluded.x`` (both backends speak it), no
``PRAGMA`` and no SQLite-only functions (``json_patch``, scalar ``MAX(a, b)``) — use
:func:`dialect` where the two must differ.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Sequence

from .schema import (  # noqa: F401  (the storage vocabulary, re-exported)
    POSTGRESQL, SQLITE, TYPES, Column, Index, Table, is_postgres_url, redact_url,
)


@functools.lru_cache(maxsize=None)
def metrics_table(name: str) -> Table:
    """The ``<plugin>_metrics`` shape (``metric`` key, summed ``value``, ``updated``) ``clawkit skills
    stats`` shows; add to a metric with :func:`metrics_upsert`."""
    return Table(name, (Column("metric", nullable=False), Column("value", "real", nullable=False),
                        Column("updated", "real", nullable=False)), primary_key=("metric",))


@functools.lru_cache(maxsize=None)
def metrics_upsert(name: str) -> str:
    """``(metric, by, now)`` → add ``by`` to a metric of table ``name`` (portable upsert)."""
    return (f"INSERT INTO {name} (metric, value, updated) VALUES (?, ?, ?) ON CONFLICT (metric) DO UPDATE"
            f" SET value = {name}.value + excluded.value, updated = excluded.updated")


def script(tables: Sequence[Table], dialect: str) -> str:
    """Every table's DDL as one script."""
    return "".join(stmt + ";\n" for t in tables for stmt in t.ddl(dialect))


def dialect(conn: Any) -> str:
    """``"sqlite"`` or ``"postgresql"`` for a connection :func:`connect` returned (or a sqlite3 one)."""
    return getattr(conn, "dialect", SQLITE)


_statements: dict[Table, list[str]] = {}


def declare(conn: Any, *tables: Table) -> None:
    """Create ``tables`` (and their indexes) if missing, on either backend. Cheap to call again
    (SQLite: a few microseconds per statement; PostgreSQL: the connection remembers what it declared).
    Statement by statement, never ``executescript``: that would commit a transaction in progress."""
    if dialect(conn) != SQLITE:
        conn.declare(tables)
        return
    for t in tables:
        stmts = _statements.get(t)
        if stmts is None:
            stmts = _statements[t] = t.ddl(SQLITE)
        for stmt in stmts:
            conn.execute(stmt)


def table_names(conn: Any) -> list[str]:
    """The tables of the database behind ``conn`` (either backend), sorted."""
    if dialect(conn) == POSTGRESQL:
        sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1"
    return [r[0] for r in conn.execute(sql)]


def exists(db: str | Path) -> bool:
    """Whether the database is there to read: a SQLite file exists; a server is assumed to (connecting says)."""
    return is_postgres_url(db) or Path(db).exists()


_storage_pm: tuple[str | None, Any] | None = None


def open_url(url: str, *, read_only: bool = False, pm: Any = None) -> Any:
    """A connection to a server database (``postgresql://…``) from the plugin that answers the
    ``open_storage`` hook for its scheme; :class:`clawkit.errors.ConfigError` when none does."""
    global _storage_pm
    import os

    from ..errors import ConfigError

    if pm is None:  # one plugin manager per process (per CLAWKIT_LOAD_PLUGINS): stores open often
        wanted = os.environ.get("CLAWKIT_LOAD_PLUGINS")
        if _storage_pm is None or _storage_pm[0] != wanted:
            from ..plugins import get_plugin_manager

            _storage_pm = (wanted, get_plugin_manager())
        pm = _storage_pm[1]
    conn = pm.hook.open_storage(url=str(url), read_only=read_only)
    if conn is None:
        scheme = str(url).split(":", 1)[0]
        hint = " (install clawkit-postgres)" if is_postgres_url(url) else ""
        raise ConfigError(f"{redact_url(str(url))}: no installed plugin opens {scheme}:// databases{hint}")
    return conn


def connect(db: str | Path, *, read_only: bool = False, timeout: float = 5.0) -> Any:
    """Open a database: a ``postgresql://`` URL, else a SQLite file (autocommit, WAL).

    ``read_only`` opens a SQLite file without creating it (a missing file raises
    ``sqlite3.OperationalError``) and a PostgreSQL session as read-only.
    """
    if is_postgres_url(db):
        return open_url(str(db), read_only=read_only)
    import sqlite3

    if read_only:
        return sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False, timeout=timeout)
    conn = sqlite3.connect(str(db), isolation_level=None, check_same_thread=False, timeout=timeout)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


__all__ = ["Column", "Index", "Table", "connect", "declare", "dialect", "exists", "is_postgres_url", "open_url", "table_names", "metrics_table",
           "metrics_upsert", "redact_url",
           "script", "SQLITE", "POSTGRESQL"]
