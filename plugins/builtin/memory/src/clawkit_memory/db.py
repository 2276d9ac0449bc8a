"""The memory database: its own SQLite file, opened with pysqlite3 so sqlite-vec can load.

The interpreter's ``sqlite3`` (the kernel's session store) cannot load extensions, so
memory keeps ``<workspace>/.clawkit/memory.db`` next to ``state.db`` instead of sharing
it: the index can be deleted and rebuilt at any time, and its bulk writes never hold
the session store's write lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    import pysqlite3.dbapi2 as sqlite  # SQLite with FTS5 and extension loading
except ImportError:  # pragma: no cover - a Python whose sqlite3 can load extensions works too
    import sqlite3 as sqlite  # type: ignore[no-redef]

import sqlite_vec

from .migrate import SCHEMA_VERSION

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS memory_sources (
    partition TEXT NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL, hash TEXT, mtime REAL, size INTEGER,
    indexed_at REAL, forgotten INTEGER NOT NULL DEFAULT 0, forgotten_before REAL,
    PRIMARY KEY (partition, path)
);
CREATE TABLE IF NOT EXISTS memory_chunks (
    id INTEGER PRIMARY KEY, partition TEXT NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL,
    start_line INTEGER, end_line INTEGER, heading TEXT, text TEXT NOT NULL, hash TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT ',', session_id TEXT, created REAL
);
CREATE INDEX IF NOT EXISTS memory_sources_kind ON memory_sources (partition, kind);
CREATE INDEX IF NOT EXISTS memory_chunks_path ON memory_chunks (partition, path);
CREATE INDEX IF NOT EXISTS memory_chunks_created ON memory_chunks (partition, created);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5 (text, heading, path, tokenize = 'porter unicode61');
-- sessions deleted with `clawkit sessions delete` (ids only): an indexer that read one before it was
-- deleted (another process) writes nothing for it (clawkit_memory.forget)
CREATE TABLE IF NOT EXISTS memory_forgotten (session_id TEXT PRIMARY KEY, at REAL);
CREATE TABLE IF NOT EXISTS memory_embeddings (
    model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, created REAL, PRIMARY KEY (model, hash)
);
"""


def connect(path: str | Path) -> Any:
    """Open (and create) the memory database with sqlite-vec loaded and the schema in place."""
    path = Path(path)
    if str(path) != ":memory:":
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite.connect(str(path), isolation_level=None, check_same_thread=False, timeout=10)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:  # new, or older: see .migrate
        from .migrate import ensure

        ensure(conn, SCHEMA)  # an older file's columns first: the schema's indexes may name new ones
    conn.executescript(SCHEMA)
    return conn


def create_vectors(conn: Any, dims: int) -> None:
    """The KNN table: full vectors (cosine) plus a bit vector for the binary prefilter."""
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS memory_vec USING vec0 ("
        f"partition TEXT, embedding float[{dims}] distance_metric=cosine, coarse bit[{dims}])"
    )


def has_vectors(conn: Any) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_vec'").fetchone() is not None


def get_meta(conn: Any, key: str) -> str | None:
    row = conn.execute("SELECT value FROM memory_meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def set_meta(conn: Any, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO memory_meta (key, value) VALUES (?, ?)", (key, value))
