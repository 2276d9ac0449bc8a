"""Forgetting sessions (the ``forget_sessions`` hook; docs/forget.md): their episodes go from the
memory database — the chunks of ``session:<id>`` (and every chunk carrying that ``session_id``),
their FTS and vector rows, the source rows, the provenance (``memory_episode_trust``) rows — and so
does every merged summary (``memory_merged``) that includes one of them: a summary quotes the
sessions it replaced, so it holds their content. Embeddings no chunk uses any more are dropped too.

The memory database of an agent is found from its config; without one (``clawkit sessions delete
--db``) the default ``<folder of state.db>/memory.db``. When this process has the index open (a
served agent), the deletion goes through it, under its lock, so its in-memory prefilter stays in step.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from clawkit.forget import scrub_sources

from . import db as mdb
from .trust import SESSION, TABLE as TRUST

BATCH = 500


def memory_db(store: Any, config: Any) -> Path | None:
    if config is not None:
        from .config import config_of, db_path

        return db_path(Path(config.workspace), config_of(config))
    path = getattr(store, "path", None)
    return path.parent.resolve() / "memory.db" if isinstance(path, Path) and str(path) != ":memory:" else None


@contextmanager
def _opened(path: Path) -> Iterator[tuple[Any, Any]]:
    """(connection, live index or None) for the memory database at ``path``, in one write transaction."""
    from . import service

    index = service._indexes.get(path)
    if index is not None:
        with index._episodes_lock:
            with index.lock:
                index.conn.execute("PRAGMA secure_delete = ON")  # deleted text is overwritten, not left in free pages
            try:
                with index.transaction():
                    yield index.conn, index
                with index.lock:
                    index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # and the WAL's copies of it go
            finally:
                with index.lock:
                    index.conn.execute("PRAGMA secure_delete = OFF")  # the index's own writes pay nothing for it
        return
    conn = mdb.connect(path)
    try:
        conn.execute("PRAGMA secure_delete = ON")
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            yield conn, None
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _tables(conn: Any) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def forget(store: Any, session_ids: list[str], config: Any) -> dict[str, int] | None:
    path = memory_db(store, config)
    if path is None or not path.exists() or not session_ids:
        return None
    counts = {"episode_chunks": 0, "merged_summaries": 0, "sources": 0, "provenance": 0, "embeddings": 0}
    wanted = set(session_ids)
    paths = [SESSION + s for s in session_ids]
    with _opened(path) as (conn, index):
        tables = _tables(conn)
        # first, in the same transaction: an indexer in another process that read these sessions before
        # the kernel deletes them writes nothing for them once this commits (index._forgotten)
        now = time.time()
        conn.executemany("INSERT OR REPLACE INTO memory_forgotten (session_id, at) VALUES (?, ?)",
                         [(s, now) for s in session_ids])
        merged: list[tuple[str, str]] = []
        if "memory_merged" in tables:
            for partition, mpath, sessions in conn.execute("SELECT partition, path, sessions FROM memory_merged"):
                try:
                    names = set(json.loads(sessions or "[]"))
                except ValueError:
                    names = set()
                if names & wanted or any(s in (sessions or "") for s in wanted):
                    merged.append((partition, mpath))
        ids: list[int] = []
        for s in range(0, len(session_ids), BATCH):
            part, pparts = session_ids[s:s + BATCH], paths[s:s + BATCH]
            marks = ",".join("?" * len(part))
            ids += [r[0] for r in conn.execute(
                f"SELECT id FROM memory_chunks WHERE session_id IN ({marks}) OR path IN ({marks})", (*part, *pparts))]
        for partition, mpath in merged:
            ids += [r[0] for r in conn.execute("SELECT id FROM memory_chunks WHERE partition = ? AND path = ?",
                                               (partition, mpath))]
        ids = sorted(set(ids))
        vec = mdb.has_vectors(conn)
        for s in range(0, len(ids), BATCH):
            part = ids[s:s + BATCH]
            marks = ",".join("?" * len(part))
            conn.execute(f"DELETE FROM memory_fts WHERE rowid IN ({marks})", part)
            if vec:
                conn.execute(f"DELETE FROM memory_vec WHERE rowid IN ({marks})", part)
            counts["episode_chunks"] += conn.execute(f"DELETE FROM memory_chunks WHERE id IN ({marks})", part).rowcount
        if index is not None and ids:
            index.binary.remove(ids)
        for partition, mpath in merged:
            conn.execute("DELETE FROM memory_sources WHERE partition = ? AND path = ?", (partition, mpath))
            conn.execute("DELETE FROM memory_merged WHERE partition = ? AND path = ?", (partition, mpath))
            if TRUST in tables:
                conn.execute(f"DELETE FROM {TRUST} WHERE partition = ? AND path = ?", (partition, mpath))
        counts["merged_summaries"] = len(merged)
        for s in range(0, len(paths), BATCH):
            pparts = paths[s:s + BATCH]
            marks = ",".join("?" * len(pparts))
            counts["sources"] += conn.execute(f"DELETE FROM memory_sources WHERE path IN ({marks})", pparts).rowcount
            if TRUST in tables:
                counts["provenance"] += conn.execute(f"DELETE FROM {TRUST} WHERE path IN ({marks})", pparts).rowcount
        # the episodes of other sessions that recalled these stay untrusted, without naming them
        for s_id in session_ids if TRUST in tables else ():
            for partition, tpath, sources in conn.execute(
                    f"SELECT partition, path, sources FROM {TRUST} WHERE sources LIKE ?", (f"%{s_id}%",)).fetchall():
                try:
                    scrubbed, hit = scrub_sources(json.loads(sources or "[]"), session_ids)
                except ValueError:
                    continue
                if hit:
                    conn.execute(f"UPDATE {TRUST} SET sources = ? WHERE partition = ? AND path = ?",
                                 (json.dumps(scrubbed), partition, tpath))
                    counts["provenance_rewritten"] = counts.get("provenance_rewritten", 0) + 1
        counts["embeddings"] = conn.execute(
            "DELETE FROM memory_embeddings WHERE hash NOT IN (SELECT hash FROM memory_chunks)").rowcount
        if ids:  # FTS5 keeps a deleted row's terms in its index segments until they are merged
            conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('optimize')")
    return counts
