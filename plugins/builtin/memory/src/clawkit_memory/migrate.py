"""Schema migrations of the memory database, with sqlite-utils (issue 29, goal 3).

The declared schema is :data:`clawkit_memory.db.SCHEMA` (``CREATE … IF NOT EXISTS``); its version
is kept in SQLite's ``PRAGMA user_version``. Opening a database whose version is current costs one
pragma read — sqlite-utils is not imported on that path (its import alone, which loads its
plugins' entry points, took 0.3-1.8 s here; a one-shot run must not pay it). A database made by an
older clawkit-memory (version below :data:`SCHEMA_VERSION`, or unversioned) is brought in line
once, here:

* each declared table's missing columns are added (``table.add_column``, with the declared
  ``NOT NULL DEFAULT`` where there is one);
* a column whose declared type, ``NOT NULL`` or default differs is rebuilt with
  ``table.transform`` (sqlite-utils' create-copy-drop-rename, in one transaction, indexes kept);
* columns the schema no longer declares are left in place (nothing is lost; an older clawkit
  reading the file still finds them).

The expected columns are read from the schema itself (executed into an in-memory database), so
the DDL stays the one source of truth. Virtual tables (FTS5, sqlite-vec) are not migrated: they
are derived data, rebuilt from ``memory_chunks`` (``clawkit memory index --force``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

#: bump with every change to db.SCHEMA that an existing file needs (columns added, types changed)
SCHEMA_VERSION = 1


def version(conn: Any) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _declared(schema: str) -> dict[str, dict[str, Any]]:
    """Table -> column name -> sqlite-utils Column, as ``schema`` declares them (virtual tables left out)."""
    import sqlite_utils

    mem = sqlite3.connect(":memory:")
    plain = ";\n".join(s for s in schema.split(";") if "VIRTUAL TABLE" not in s.upper())
    mem.executescript(plain)
    db = sqlite_utils.Database(mem)
    return {t.name: {c.name: c for c in t.columns} for t in db.tables}


def migrate(conn: Any, schema: str) -> list[str]:
    """Bring the tables of ``conn`` in line with ``schema``; what changed, one line each."""
    import sqlite_utils

    db = sqlite_utils.Database(conn)
    done: list[str] = []
    for table, want in _declared(schema).items():
        t = db.table(table)
        if not t.exists():
            continue  # the schema's CREATE makes it, as declared
        have = {c.name: c for c in t.columns}
        for name, col in want.items():
            if name in have:
                continue
            default = _default(col.default_value)
            if col.notnull and default is None:
                raise RuntimeError(f"memory database: {table}.{name} is NOT NULL without a default; "
                                   "cannot add it to existing rows (delete .clawkit/memory.db to rebuild)")
            t.add_column(name, col.type or None, not_null_default=default if col.notnull else None)
            done.append(f"{table}: added column {name}")
        have = {c.name: c for c in t.columns}
        types, not_null, defaults = {}, {}, {}
        for name, col in want.items():
            cur = have[name]
            if (cur.type or "").upper() != (col.type or "").upper():
                types[name] = _pytype(col.type)
            if bool(cur.notnull) != bool(col.notnull):
                not_null[name] = bool(col.notnull)
            if _default(cur.default_value) != _default(col.default_value):
                defaults[name] = _default(col.default_value)
        for name, required in not_null.items():  # NULLs take the declared default before NOT NULL holds
            if required:
                default = _default(want[name].default_value)
                if default is None and conn.execute(f'SELECT 1 FROM "{table}" WHERE "{name}" IS NULL LIMIT 1').fetchone():
                    raise RuntimeError(f"memory database: {table}.{name} has NULLs and no default to fill them "
                                       "(delete .clawkit/memory.db to rebuild)")
                conn.execute(f'UPDATE "{table}" SET "{name}" = ? WHERE "{name}" IS NULL', (default,))
        if types or not_null or defaults:
            t.transform(types=types or None, not_null=not_null or None, defaults=defaults or None)
            done.append(f"{table}: transformed {', '.join(sorted({*types, *not_null, *defaults}))}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return done


def ensure(conn: Any, schema: str) -> list[str]:
    """Before the schema's ``CREATE … IF NOT EXISTS`` runs: stamp a new (empty) database with
    :data:`SCHEMA_VERSION`; migrate an older one (see the module doc)."""
    if version(conn) >= SCHEMA_VERSION:
        return []
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_chunks'").fetchone() is None:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")  # new: the schema creates it as declared
        return []
    return migrate(conn, schema)


def _default(value: Any) -> Any:
    """A column default as PRAGMA table_info reports it (SQL text) -> a Python value."""
    if value is None:
        return None
    text = str(value).strip()
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1].replace("''", "'")
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _pytype(sql_type: str | None) -> type:
    t = (sql_type or "").upper()
    if "INT" in t:
        return int
    if "REAL" in t or "FLOA" in t or "DOUB" in t:
        return float
    if "BLOB" in t:
        return bytes
    return str
