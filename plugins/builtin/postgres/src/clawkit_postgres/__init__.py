"""clawkit-postgres: PostgreSQL as a storage backend, selected by the database URL's scheme.

The kernel keeps SQLite (a file, nothing to install) as the embedded default; a ``postgresql://``
(``postgres://``, ``postgresql+psycopg://``) URL given as ``--db`` or ``state_db`` is opened through
the ``open_storage`` hook, which this plugin answers with :class:`~clawkit_postgres.connection.PgConnection`:
the ``sqlite3`` API over psycopg 3 (placeholders translated, ``INSERT OR REPLACE`` as ``ON CONFLICT``,
errors as ``sqlite3.Error`` subclasses). psycopg is imported only when such a URL is opened.
See docs/plugins/postgres.md.
"""

from __future__ import annotations

from clawkit import hookimpl

SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


@hookimpl
def open_storage(url, read_only):
    if not isinstance(url, str) or not url.startswith(SCHEMES):
        return None
    from .connection import PgConnection

    return PgConnection(url, read_only=read_only)
