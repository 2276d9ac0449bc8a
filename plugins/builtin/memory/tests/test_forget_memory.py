"""The memory plugin's forget_sessions: a deleted session's episode chunks (with their FTS rows,
sources and provenance rows) go, and so does a merged summary that includes the session; another
session's episode stays."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from clawkit_memory import db as mdb
from clawkit_memory import forget_sessions
from clawkit_memory.merge import SCHEMA as MERGED
from clawkit_memory.trust import SCHEMA as TRUST


def _chunk(conn, path: str, text: str, session_id: str | None) -> None:
    cur = conn.execute("INSERT INTO memory_chunks (partition, kind, path, text, hash, session_id, created)"
                       " VALUES ('lead', 'episode', ?, ?, ?, ?, 0)", (path, text, f"h-{text}", session_id))
    conn.execute("INSERT INTO memory_fts (rowid, text, heading, path) VALUES (?, ?, '', ?)", (cur.lastrowid, text, path))
    conn.execute("INSERT OR REPLACE INTO memory_sources (partition, path, kind) VALUES ('lead', ?, 'episode')", (path,))


def test_forget_removes_episodes_and_merged_summaries_that_include_them(tmp_path: Path):
    conn = mdb.connect(tmp_path / "memory.db")
    conn.execute(MERGED)
    conn.execute(TRUST)
    _chunk(conn, "session:ses_a", "alpha canary turn", "ses_a")
    _chunk(conn, "session:ses_b", "bravo keeps", "ses_b")
    _chunk(conn, "merged:1", "summary quoting alpha canary and c", None)
    conn.execute("INSERT INTO memory_merged VALUES ('lead', 'merged:1', ?, 0, '[]', 0, 0, 0)", (json.dumps(["ses_a", "ses_c"]),))
    conn.execute("INSERT INTO memory_episode_trust (partition, path, untrusted, sources, recorded) VALUES ('lead', 'session:ses_a', 0, '[]', 0)")
    conn.close()

    store = SimpleNamespace(path=tmp_path / "state.db")
    counts = forget_sessions(store=store, session_ids=["ses_a"], config=None)
    assert counts["episode_chunks"] == 2 and counts["merged_summaries"] == 1 and counts["provenance"] == 1

    conn = mdb.connect(tmp_path / "memory.db")
    dump = json.dumps([conn.execute(f"SELECT * FROM {t}").fetchall() for t in
                       ("memory_chunks", "memory_sources", "memory_merged", "memory_episode_trust", "memory_fts")])
    assert "canary" not in dump and "ses_a" not in dump and "bravo keeps" in dump
    assert conn.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH 'canary'").fetchone()[0] == 0
    conn.close()
    assert forget_sessions(store=store, session_ids=["ses_a"], config=None)["episode_chunks"] == 0  # idempotent


def test_an_indexer_that_read_a_session_before_its_deletion_writes_nothing_for_it(tmp_path: Path):
    """The race docs/forget.md used to leave open: an indexer (in another process) reads a session's
    turns, the session is deleted, then the indexer writes. The deletion leaves the session's id in
    ``memory_forgotten``, and the indexer's write transaction (BEGIN IMMEDIATE: it reads what was
    committed last) skips it; the other session read in the same batch is indexed."""
    from clawkit.sessions import SessionStore
    from clawkit.types import Message
    from clawkit_memory.embeddings import LocalStatic
    from clawkit_memory.index import IndexReport, MemoryIndex

    store = SessionStore(tmp_path / "state.db")
    gone, kept = store.create("a"), store.create("a")
    for sid, word in ((gone, "pangolin"), (kept, "heron")):
        store.append(sid, Message(role="user", content=f"remember the {word}"))
        store.append(sid, Message(role="assistant", content=f"noted: the {word}"))
    store.flush()
    index = MemoryIndex(tmp_path / "memory.db", LocalStatic(), workspace=tmp_path)
    try:
        conn = index._state_conn(tmp_path / "state.db")
        batch, done = index._read_touched(conn, "episodes:a:a:test", "a", 50)  # read while both exist
        assert {b[0] for b in batch} == {gone, kept}
        forget_sessions(store=SimpleNamespace(path=tmp_path / "state.db"), session_ids=[gone], config=None)
        report = IndexReport()
        index._index_episodes("a", batch, "episodes:a:a:test", done, report)  # the indexer writes after
        texts = [r[0] for r in index.conn.execute("SELECT text FROM memory_chunks")]
        assert any("heron" in t for t in texts) and not any("pangolin" in t for t in texts), texts
    finally:
        index.close()
        store.close()
