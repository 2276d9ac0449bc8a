"""Recall's per-message work, cut without changing what it finds (issue 29, goal 5): the file sync is
skipped while no memory file exists and the index is unchanged, the sub-agent partitions and the
episodes' provenance are looked up again only after a write — and a file, a sub-agent's note or an
untrusted mark that appears afterwards is still seen by the very next recall."""

from __future__ import annotations

from pathlib import Path

import pytest

import clawkit_memory
from clawkit.sessions import SessionStore
from clawkit_memory.embeddings import LocalStatic
from clawkit_memory.index import MemoryIndex
from clawkit_memory.search import Searcher
from clawkit_memory.service import close_all, memory_for

TOOLS = ["memory_search", "memory_get", "memory_save"]


@pytest.fixture(autouse=True)
def _close_services():
    yield
    close_all()


def test_recall_without_memory_files_syncs_nothing_until_a_file_appears(make_agent, workspace: Path, monkeypatch):
    a = make_agent(script=["Noted: the ledger runs on Postgres.", "ok"], plugins=(clawkit_memory,), tools=TOOLS)
    a.run("For the ledger we decided on Postgres.")
    mem = memory_for(a.config)
    mem.wait_idle()
    syncs = []
    real_sync = mem.index.sync
    monkeypatch.setattr(mem.index, "sync", lambda *args, **kw: syncs.append(args) or real_sync(*args, **kw))
    mem.recall("which database runs the ledger", session_id="other")
    first = len(syncs)  # (at most one: the first look at the roots)
    for q in ("what is the user's cat called", "when do we deploy", "which region for analytics"):
        assert not any("Miso" in h.text for h in mem.recall(q, session_id="other"))
    assert len(syncs) == first, "no memory file and an unchanged index: recall must not walk the roots again"

    (workspace / "MEMORY.md").write_text("# About the user\n\nThe user's cat is called Miso.\n")
    hits = mem.recall("what is the user's cat called", session_id="other")
    assert any(h.path == "MEMORY.md" and "Miso" in h.text for h in hits)  # the very next recall finds it
    assert len(syncs) == first + 1


def test_a_burst_of_messages_shares_one_look_at_absent_memory_roots(make_agent, workspace: Path, monkeypatch):
    """start_watching looks for the memory file roots at most once per ABSENT_REUSE (5 ms) while all are
    absent: the messages of a burst share the look; a root that appears is seen once the window passes."""
    from clawkit_memory import service

    a = make_agent(script=["ok"], plugins=(clawkit_memory,), tools=TOOLS)
    mem = memory_for(a.config)
    looks = []
    real = mem._absent_roots.absent
    monkeypatch.setattr(mem._absent_roots, "absent", lambda: looks.append(1) or real())
    now = [1000.0]
    monkeypatch.setattr(service.time, "monotonic", lambda: now[0])
    for _ in range(5):  # one burst
        mem.start_watching()
    assert len(looks) == 1 and not mem.watching
    (workspace / "MEMORY.md").write_text("# Notes\n\nThe cat is called Miso.\n")
    now[0] += 2 * service.ABSENT_REUSE
    mem.start_watching()  # the window has passed: looks again, finds the file, watches it
    assert len(looks) == 2 and mem.watching


def test_a_sub_agent_partition_is_seen_after_its_first_note(make_agent, workspace: Path):
    a = make_agent(script=["ok"], plugins=(clawkit_memory,), tools=TOOLS)
    mem = memory_for(a.config)
    mem.refresh()
    assert mem._below == ()
    note = workspace / "child-note.md"
    note.write_text("# Child\n\nThe sub-agent found the build cache on /var/cache/ci.\n")
    mem.index.index_file(note, f"{mem.partition}>child")
    mem.refresh()
    assert mem._below == (f"{mem.partition}>child",)
    hits = mem.search("where is the build cache", k=3)
    assert any(h.partition == f"{mem.partition}>child" for h in hits) and all(
        mem.untrusted(h.partition) for h in hits if h.partition != mem.partition)





def test_episode_provenance_is_read_again_after_the_index_changes(tmp_path, episodes):
    store = SessionStore(tmp_path / "state.db")
    sid = episodes.session(store, "my bicycle is green", "noted, green bicycle")
    ws = tmp_path / "ws"
    ws.mkdir()
    index = MemoryIndex(ws / "memory.db", LocalStatic(), workspace=ws)
    searcher = Searcher(index)

    def hit():
        hits = searcher.search("what colour is my bicycle", partitions=["a"], k=3)
        index.episode_trust(hits)
        return next(h for h in hits if h.path == f"session:{sid}")

    try:
        index.sync_sessions(store.path, "a", "a")
        assert hit().untrusted_sources == []
        assert hit().untrusted_sources == []  # (answered from the lookup kept for this index version)
        # the session reads an untrusted file and goes on: its episode is re-indexed, now untrusted
        episodes.untrust(store, sid, "notes.txt")
        episodes.session(store, "and the wheels?", "black wheels", sid=sid)
        index.sync_sessions(store.path, "a", "a")
        got = hit().untrusted_sources
        assert got and got[0]["detail"] == "notes.txt"
        got.clear()  # a caller changing its copy changes nobody else's
        assert hit().untrusted_sources[0]["detail"] == "notes.txt"
    finally:
        index.close()
        store.close()


def test_maybe_has_memory_follows_the_index_without_a_query_per_message(make_agent, workspace: Path):
    a = make_agent(script=["ok"], plugins=(clawkit_memory,), tools=TOOLS)
    mem = memory_for(a.config)
    assert mem.maybe_has_memory() is False
    queries: list[str] = []
    conn = mem.index.conn
    mem.index.conn = _Spy(conn, queries)
    try:
        assert mem.maybe_has_memory() is False and mem.maybe_has_memory() is False
    finally:
        mem.index.conn = conn
    assert not [q for q in queries if "memory_chunks" in q]  # unchanged index: answered from the last look
    other = workspace / "elsewhere.md"  # not a memory root: only the index knows of it
    other.write_text("# Elsewhere\n\nThe staging database lives on host db-7.\n")
    mem.index.index_file(other, mem.partition)
    assert mem.maybe_has_memory() is True
    queries.clear()
    mem.index.conn = _Spy(conn, queries)
    try:
        assert mem.maybe_has_memory() is True  # (every message of a session with memory asks this)
    finally:
        mem.index.conn = conn
    assert not [q for q in queries if "memory_chunks" in q]
    mem.index.forget(mem.partition, "elsewhere.md")
    assert mem.maybe_has_memory() is False


class _Spy:
    """A connection that records the SQL it runs."""

    def __init__(self, conn, seen):
        self._conn, self._seen = conn, seen

    def execute(self, sql, *args):
        self._seen.append(sql)
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_no_recall_starts_while_memory_is_empty_and_turns_wait_for_a_quiet_moment(make_agent, spy):
    import time

    agent = make_agent(script=["Noted: the wiki moves to Hetzner.", "ok", "On Hetzner."], plugins=(clawkit_memory, spy),
                       tools=TOOLS)
    first = agent.run("We decided to host the wiki on Hetzner.")
    mem = memory_for(agent.config)
    clawkit_memory._ACTIVE["another-session"] = time.monotonic()  # a reply in the making: the turn waits to be indexed
    try:
        submitted = []
        real_submit = mem.executor.submit
        mem.executor.submit = lambda fn, *a, **kw: submitted.append(fn) or real_submit(fn, *a, **kw)
        try:
            agent.run("Which day is the team lunch?")
        finally:
            mem.executor.submit = real_submit
        assert mem._episodes_running  # the first turn still waits in the background...
        assert spy.states[-1] is None and submitted == []  # ...and a recall could find nothing: none started
    finally:
        clawkit_memory._ACTIVE.pop("another-session", None)
    mem.wait_idle()  # the quiet moment: the first turn is indexed
    agent.run("Where do we host the wiki?")
    hits = spy.states[-1]["hits"]
    assert any(h.session_id == first.session_id and "Hetzner" in h.text for h in hits)  # recall reaches the prompt
